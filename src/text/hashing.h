// Fast non-cryptographic hashes for the tokenizer's tables (strings and id pairs).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace fornace::text {

inline uint64_t mix_bits(uint64_t value) {
  value ^= value >> 31;
  value *= 0xBF58476D1CE4E5B9ull;
  value ^= value >> 29;
  return value;
}

inline uint64_t hash_bytes(std::string_view bytes) {
  uint64_t hash = 0x9E3779B97F4A7C15ull ^ bytes.size();
  size_t index = 0;
  for (; index + 8 <= bytes.size(); index += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + index, 8);
    hash = mix_bits(hash ^ word);
  }
  if (index < bytes.size()) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + index, bytes.size() - index);
    hash = mix_bits(hash ^ word ^ 0xFF00000000000000ull);
  }
  return mix_bits(hash);
}

inline uint64_t hash_pair(uint32_t left, uint32_t right) {
  return mix_bits((static_cast<uint64_t>(left) << 32 | right) * 0x9E3779B97F4A7C15ull);
}

}  // namespace fornace::text
