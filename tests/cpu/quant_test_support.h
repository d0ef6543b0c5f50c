// Shared by the block-quantization tests: the ISAs to run, deterministic data, an f16 decoder
// written from the IEEE fields, and the bound that 8-bit activations put on a dot product.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cpu/cpu_features.h"

namespace fornace::quant_test {

// portable, then avx2 and avx512 where this CPU has them.
inline std::vector<cpu::Isa> supported_isas() {
  std::vector<cpu::Isa> isas;
  for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (isa <= cpu::detected_isa()) isas.push_back(isa);
  }
  return isas;
}

// Uniform values in [low, high).
inline std::vector<float> uniform(size_t count, float low, float high, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(generator);
  return values;
}

inline std::vector<uint8_t> random_bytes(size_t count, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<uint8_t> bytes(count);
  for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(generator() >> 56);
  return bytes;
}

// The value of binary16 `bits`: (-1)^sign x significand x 2^(exponent - 25), where the
// significand carries the implicit 1024 unless the exponent field is 0 (subnormal: exponent 1).
inline double f16_value(uint16_t bits) {
  const int exponent_field = (bits >> 10) & 0x1f;
  const int fraction = bits & 0x3ff;
  const double sign = (bits >> 15) ? -1.0 : 1.0;
  if (exponent_field == 0x1f) return fraction ? NAN : sign * INFINITY;
  const int significand = exponent_field ? 1024 + fraction : fraction;
  return sign * std::ldexp(static_cast<double>(significand), std::max(exponent_field, 1) - 25);
}

// How far a dot product with activations rounded to 8 bits per block can be from the exact one:
// each activation moves by at most half its block's step, max |x in block| / 127 / 2, so
// |error| <= sum over blocks of max|x in block| / 254 x sum of |w| in the block.
inline double activation_rounding_bound(const double* weights, const float* x, int64_t n,
                                        int64_t block_elements) {
  double bound = 0;
  for (int64_t start = 0; start < n; start += block_elements) {
    double max_magnitude = 0;
    double weight_norm = 0;
    for (int64_t k = start; k < start + block_elements; ++k) {
      max_magnitude = std::max(max_magnitude, std::fabs(static_cast<double>(x[k])));
      weight_norm += std::fabs(weights[k]);
    }
    bound += max_magnitude / 254.0 * weight_norm;
  }
  return bound;
}

}  // namespace fornace::quant_test
