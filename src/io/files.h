// File helpers: whole-file reads with clear errors, atomic writes, and the .npy writer.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/layout.h"

namespace fornace {

// The whole file as bytes. Errors name the path: missing, a directory, unreadable.
std::string read_file(const std::string& path);

// Calls `write` with a stream on `<path>.tmp.<pid>.<n>` in the same directory, flushes and fsyncs
// it, then renames it over `path`. On any error (including one thrown by `write`) the temporary
// is removed, `path` is left as it was, and the error is thrown.
void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write);

// A little-endian float32 .npy file (format 1.0) of `shape`, written atomically.
void write_npy(const std::string& path, const std::vector<float>& values, const Dims& shape);

// A regular file opened read-only and closed on destruction. The constructor throws Error naming
// the path when it is missing, a directory (or not a regular file), or not readable.
class ReadOnlyFile {
 public:
  explicit ReadOnlyFile(const std::string& path);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  int descriptor() const { return descriptor_; }
  const std::string& path() const { return path_; }
  // The size in bytes when the file was opened.
  size_t size() const { return size_; }
  // The size now (fstat on the open descriptor), to detect a file changed after opening.
  size_t current_size() const;

 private:
  std::string path_;
  int descriptor_ = -1;
  size_t size_ = 0;
};

// A name for a temporary next to `path`, unique within this process: `<path>.tmp.<pid>.<n>`.
std::string temporary_path_for(const std::string& path);

}  // namespace fornace
