// Tiny synthetic checkpoints shared by the model tests, written once per build directory.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/source_paths.h"
#include "models/gguf_export.h"
#include "models/synthetic.h"
#include "text/gguf_metadata.h"

namespace fornace {

// <build>/test-models/<preset>-<dtype>, written on first use (seed 7) with the family's
// tokenizer. A file lock keeps test processes that CTest runs in parallel from writing it twice.
inline std::string synthetic_model_directory(const std::string& preset, DType dtype) {
  std::string root = fornace::test_paths::build("test-models");
  std::string directory = root + "/" + preset + "-" + dtype_name(dtype);
  std::filesystem::create_directories(root);
  int lock = ::open((root + "/.lock").c_str(), O_CREAT | O_RDWR, 0644);
  ::flock(lock, LOCK_EX);
  if (!std::filesystem::exists(directory + "/model.safetensors")) {
    SyntheticOptions options;
    options.preset = preset;
    options.out_directory = directory;
    options.seed = 7;
    options.dtype = dtype;
    // The tiny Qwen2 model keeps the tokenizer at models/ that its tests were written against.
    options.tokenizer_directory =
        fornace::test_paths::source("models") +
        (preset == "tiny" ? "" : "/tokenizers/" + synthetic_preset_tokenizer(preset));
    write_synthetic_model(options);
  }
  ::flock(lock, LOCK_UN);
  ::close(lock);
  return directory;
}

// <build>/test-models/<preset>-<dtype>.<type>.gguf: the synthetic checkpoint written as a GGUF
// file of `type` with its tokenizer, on first use.
inline std::string synthetic_gguf_file(const std::string& preset, DType dtype, const std::string& type) {
  std::string directory = synthetic_model_directory(preset, dtype);
  std::string path = directory + "." + type + ".gguf";
  int lock = ::open((directory + ".gguf.lock").c_str(), O_CREAT | O_RDWR, 0644);
  ::flock(lock, LOCK_EX);
  if (!std::filesystem::exists(path)) {
    std::shared_ptr<const ModelFiles> files = ModelFiles::open(directory);
    export_gguf(*files, path, *parse_gguf_file_type(type), [&](const ModelConfig& config) {
      return gguf_tokenizer_metadata(*files, config.vocab_size);
    });
  }
  ::flock(lock, LOCK_UN);
  ::close(lock);
  return path;
}

inline std::string tiny_model_directory(DType dtype) { return synthetic_model_directory("tiny", dtype); }

// <build>/test-models/<name>, a file or directory one test writes for itself: removed when the
// test is done with it, so that throwaway models do not pile up on the disk.
class ScratchPath {
 public:
  explicit ScratchPath(const std::string& name)
      : path_(std::filesystem::path(fornace::test_paths::build()) / "test-models" / name) {
    std::filesystem::remove_all(path_);
  }
  ScratchPath(const ScratchPath&) = delete;
  ScratchPath& operator=(const ScratchPath&) = delete;
  ~ScratchPath() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string string() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Deterministic ids spread over the vocabulary.
inline std::vector<uint32_t> test_prompt_ids(int64_t length, int64_t vocab_size) {
  std::vector<uint32_t> ids;
  uint64_t state = 12345;
  for (int64_t i = 0; i < length; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<uint32_t>((state >> 33) % static_cast<uint64_t>(vocab_size)));
  }
  return ids;
}

}  // namespace fornace
