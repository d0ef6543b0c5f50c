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
  size_t remaining = bytes.size() - index;
  if (remaining > 0) {
    // The tail in at most two fixed-size loads (overlapping when short), not a byte loop.
    const char* tail = bytes.data() + index;
    uint64_t word;
    if (remaining >= 4) {
      uint32_t head_half, tail_half;
      std::memcpy(&head_half, tail, 4);
      std::memcpy(&tail_half, tail + remaining - 4, 4);
      word = static_cast<uint64_t>(head_half) << 32 | tail_half;
    } else {
      word = static_cast<uint64_t>(static_cast<uint8_t>(tail[0])) << 16 |
             static_cast<uint64_t>(static_cast<uint8_t>(tail[remaining / 2])) << 8 |
             static_cast<uint8_t>(tail[remaining - 1]);
    }
    hash = mix_bits(hash ^ word ^ 0xFF00000000000000ull);
  }
  return mix_bits(hash);
}

inline uint64_t hash_pair(uint32_t left, uint32_t right) {
  return mix_bits((static_cast<uint64_t>(left) << 32 | right) * 0x9E3779B97F4A7C15ull);
}

}  // namespace fornace::text
