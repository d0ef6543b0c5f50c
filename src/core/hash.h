// FNV-1a, the 64-bit string hash that names stable things (synthetic weight streams, cache files).
#pragma once

#include <cstdint>
#include <string_view>

namespace fornace {

inline uint64_t fnv1a_hash(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char character : text) hash = (hash ^ character) * 0x100000001b3ull;
  return hash;
}

}  // namespace fornace
