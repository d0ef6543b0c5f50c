// The memory the system can still give (MemAvailable), for the tools' KV cache size checks.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace fornace::tools {

// Bytes of /proc/meminfo's MemAvailable, or -1 when it cannot be read.
inline int64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

}  // namespace fornace::tools
