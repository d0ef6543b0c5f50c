// DType names and the f32 -> f16 conversion.
#include "core/dtype.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace fornace {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    case DType::i32:
      return "i32";
    case DType::u32:
      return "u32";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::u32}) {
    if (lower == dtype_name(dtype)) return dtype;
  }
  fail("unknown dtype '", name, "' (expected f32, bf16, f16, i32 or u32)");
}

bool is_float(DType dtype) {
  return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16;
}

uint16_t f32_to_f16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((bits >> 13) & 0x3ffu);
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // Rounds to or beyond Inf.
  int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent >= -14) {
    // Normal f16: keep 10 mantissa bits, round the dropped 13 to nearest even.
    uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
  }
  if (exponent < -25) return sign;  // Below half the smallest subnormal: rounds to zero.
  // Subnormal f16: shift the full 24-bit significand, round to nearest even.
  uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  int shift = -exponent - 1;  // 14 + (-exponent - 15) + ... keeps units of 2^-24.
  uint32_t truncated = significand >> shift;
  uint32_t remainder = significand & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (remainder > half || (remainder == half && (truncated & 1u))) ++truncated;
  return sign | static_cast<uint16_t>(truncated);
}

}  // namespace fornace
