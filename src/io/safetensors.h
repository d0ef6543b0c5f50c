// safetensors checkpoints: a validated, memory-mapped reader (zero copy), sharded directories
// through model.safetensors.index.json, and an atomic writer.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "io/file_mapping.h"
#include "io/weight_source.h"

namespace fornace {

class ReadOnlyFile;  // io/files.h

struct TensorEntry {
  std::string name;
  DType dtype;
  Dims shape;
  size_t begin = 0;  // Byte range in the data section, [begin, end).
  size_t end = 0;
};

// One .safetensors file, mapped read-only. The header is validated when the file is opened:
// header length, JSON object form, known dtypes (BF16, F16, F32), shape x dtype size equal to
// the byte range, ranges inside the file and not overlapping. Errors name the file and tensor.
class SafetensorsFile {
 public:
  static std::shared_ptr<SafetensorsFile> open(
      const std::string& path,
      const FileMappingOptions& mapping = FileMappingOptions::for_mode(HugePages::on));
  // Parses and validates a header from memory (for fuzzing and tests): `bytes` is the whole file.
  static std::vector<TensorEntry> parse_header(const void* bytes, size_t size,
                                               const std::string& source_name);

  const std::string& path() const { return path_; }
  const std::vector<TensorEntry>& entries() const { return entries_; }
  bool contains(const std::string& name) const;
  const TensorEntry& entry(const std::string& name) const;
  // A read-only tensor that points into the mapping; it keeps the mapping alive.
  Tensor tensor(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Throws Error naming the file when its size changed since it was opened (for example it was
  // truncated in place), since the mapping would then run past the end of the file.
  void check_unchanged() const;
  // The whole mapped file, for checks that tensors point into it.
  const void* mapped_data() const { return mapping_.get(); }
  // Drops the mapping's pages from resident memory (FileMapping::release_pages); the next access
  // reads them back from the page cache.
  void release_pages() const {
    if (file_mapping_) file_mapping_->release_all_pages();
  }
  size_t mapped_size() const { return file_size_; }
  const std::shared_ptr<const FileMapping>& file_mapping() const { return file_mapping_; }

 private:
  std::string path_;
  std::shared_ptr<const ReadOnlyFile> file_;
  std::shared_ptr<const void> mapping_;
  std::shared_ptr<const FileMapping> file_mapping_;  // The same mapping, for page release
  const char* data_ = nullptr;  // Start of the data section.
  size_t file_size_ = 0;
  std::vector<TensorEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// The weights of a checkpoint directory: model.safetensors, or the shards listed by
// model.safetensors.index.json.
class Checkpoint : public WeightSource {
 public:
  static Checkpoint open_directory(
      const std::string& directory,
      const FileMappingOptions& mapping = FileMappingOptions::for_mode(HugePages::on));

  const std::string& origin() const override { return directory_; }
  bool contains(const std::string& name) const override;
  StoredWeight weight(const std::string& name) const override { return {tensor(name), {}}; }
  // Throws Error naming the directory and the tensor when it is missing.
  Tensor tensor(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::string& directory() const { return directory_; }
  // The mapped files, in the order they were opened.
  const std::vector<std::shared_ptr<SafetensorsFile>>& files() const { return files_; }
  // Throws Error when any file changed size since it was opened.
  void check_unchanged() const;

 private:
  std::string directory_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> file_of_;
};

// Writes tensors (any layout; written row-major) to `path` through a temporary file and a
// rename, so an interrupted write never leaves a complete-looking file.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The name, dtype and shape of a tensor that write_safetensors_streamed will write.
struct TensorSpec {
  std::string name;
  DType dtype;
  Dims shape;
};

// Like write_safetensors, but the tensors are made one at a time by `produce(index)` (which must
// return a tensor of specs[index]'s dtype and shape), so at most one is held in memory. Tensors
// are laid out by element size, largest first, so each is aligned to its element size.
void write_safetensors_streamed(const std::string& path, const std::vector<TensorSpec>& specs,
                                const std::function<Tensor(size_t index)>& produce,
                                const std::map<std::string, std::string>& metadata = {});

}  // namespace fornace
