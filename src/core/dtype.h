// Element types, their sizes and names, and exact bf16/f16 conversions.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace fornace {

enum class DType : uint8_t { f32, bf16, f16, i32, u32 };

constexpr size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::bf16:
    case DType::f16:
      return 2;
    default:
      return 4;
  }
}

const char* dtype_name(DType dtype);
// Parses "f32", "bf16", "f16", "i32", "u32" (any case); throws Error otherwise.
DType parse_dtype(std::string_view name);
bool is_float(DType dtype);

// bf16: the top 16 bits of an f32, rounded to nearest even. NaN stays NaN (quiet), Inf stays Inf.
inline uint16_t f32_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float bf16_to_f32(uint16_t value) {
  return std::bit_cast<float>(static_cast<uint32_t>(value) << 16);
}

// IEEE binary16, rounded to nearest even, with subnormals, Inf and NaN.
uint16_t f32_to_f16(float value);

inline float f16_to_f32(uint16_t value) {
  uint32_t sign = static_cast<uint32_t>(value & 0x8000u) << 16;
  uint32_t exponent = (value >> 10) & 0x1fu;
  uint32_t mantissa = value & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in f32.
    float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace fornace
