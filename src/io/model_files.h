// ModelFiles: a model's files (a checkpoint directory or a GGUF file), opened once and handed to
// the loaders of its weights and of its tokenizer.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "io/file_mapping.h"
#include "io/gguf.h"
#include "io/safetensors.h"

namespace fornace {

// What one model path opens: a GGUF file is mapped and parsed once here, for the model's weights
// and its tokenizer alike; a checkpoint directory's safetensors files are mapped when the weights
// are first asked for (a tokenizer alone needs none of them). Whoever holds the ModelFiles (a
// loaded model does) keeps its mappings alive.
class ModelFiles {
 public:
  // A regular file is opened as a GGUF file (Error naming it when it is not valid); any other
  // path as a checkpoint directory, whose files are checked when they are read.
  static std::shared_ptr<const ModelFiles> open(
      const std::string& path,
      const FileMappingOptions& mapping = FileMappingOptions::for_mode(HugePages::on));

  const std::string& path() const { return path_; }
  bool is_gguf() const { return gguf_ != nullptr; }
  // The GGUF file; null for a checkpoint directory.
  const std::shared_ptr<const GgufFile>& gguf() const { return gguf_; }
  // The checkpoint's safetensors files, mapped on the first call; fails for a GGUF file.
  const Checkpoint& checkpoint() const;
  // The files the weights are read from (the GGUF file, or the checkpoint's shards).
  std::vector<std::string> weight_files() const;
  // Their mappings (none for a checkpoint whose weights were not asked for).
  std::vector<std::shared_ptr<const FileMapping>> mappings() const;
  // Drops the mapped pages of the weight files from resident memory; the next access reads them
  // back from the page cache.
  void release_pages() const;
  const FileMappingOptions& mapping_options() const { return mapping_; }

 private:
  ModelFiles() = default;

  std::string path_;
  FileMappingOptions mapping_;
  std::shared_ptr<const GgufFile> gguf_;
  mutable std::once_flag checkpoint_opened_;
  mutable std::optional<Checkpoint> checkpoint_;
};

}  // namespace fornace
