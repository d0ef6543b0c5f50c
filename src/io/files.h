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

// Calls `write` with a stream on `<path>.tmp.<pid>` in the same directory, flushes and fsyncs
// it, then renames it over `path`. On any error the temporary is removed and Error is thrown.
void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write);

// A little-endian float32 .npy file of `shape`, written atomically.
void write_npy(const std::string& path, const std::vector<float>& values, const Dims& shape);

}  // namespace fornace
