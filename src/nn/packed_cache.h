// A model's weights as packed for the kernels at one load, kept in a file for later loads to map.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/file_mapping.h"
#include "nn/packed_weights.h"

namespace fornace {

// What a cache entry's forms depend on.
struct PackedCacheKey {
  std::vector<std::string> files;  // The model's files (checkpoint shards, or the GGUF file).
  std::string signature;           // The rest: kernels, dtype, activation rounding.
};

// One entry per model path and signature: a header that names the model's files as they were
// packed (path, size, modification time, device, inode), then the forms, as PackedWeights
// handed them out. Mapped from the page cache, a later load's forms cost no fresh memory: in a
// VM whose host takes freed pages back, fresh memory costs about 1.8 s a GB (see finding 0008).
class PackedCache {
 public:
  // The directory: EngineSettings::packed_cache_directory. `mapping`: how an entry is mapped.
  // Throws Error naming a model file that cannot be found.
  PackedCache(const std::string& directory, const PackedCacheKey& key,
              const FileMappingOptions& mapping = FileMappingOptions::for_mode(HugePages::on));
  const std::string& path() const { return path_; }
  // The entry's forms, mapped, when it exists, is whole, and names the model files as they are
  // now; else nothing. `before_mapping`, when given, runs once the entry is found good, before
  // its pages are mapped.
  std::optional<StoredPackedForms> read(const std::function<void()>& before_mapping = {}) const;
  // Stores `forms` as the entry (through a temporary and a rename), making the directory if
  // needed, then removes the directory's entries whose model files are gone or changed. Throws
  // Error when it cannot write the entry, or when the entry would take more than half the space
  // left on the directory's file system.
  void write(const std::vector<std::shared_ptr<const Storage>>& forms) const;

 private:
  std::string directory_;
  FileMappingOptions mapping_;
  std::string path_;
  std::string identity_;  // The header's first lines: format, signature, files as they are now.
};

}  // namespace fornace
