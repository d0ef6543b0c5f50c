// Reductions and exp written so that GCC vectorizes them at -O3 without -ffast-math: sums keep
// kLanes independent partial sums, and exp is a branch-free polynomial. Internal linkage, so
// that each ISA-specific translation unit keeps its own copy.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace fornace::cpu {
namespace {

constexpr int kLanes = 16;

// a * b + c, fused where the translation unit is compiled with FMA (ISO C++ mode does not
// contract on its own); plain otherwise, never the slow library fma.
inline float multiply_add(float a, float b, float c) {
#ifdef __FMA__
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

// Adds the kLanes partial sums pairwise (the same order every time).
inline float sum_lanes(float* lanes) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int lane = 0; lane < width; ++lane) lanes[lane] += lanes[lane + width];
  }
  return lanes[0];
}

inline float dot(const float* left, const float* right, int64_t count) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (int lane = 0; lane < kLanes; ++lane) {
      lanes[lane] = multiply_add(left[i + lane], right[i + lane], lanes[lane]);
    }
  }
  for (int lane = 0; lane < kLanes && i + lane < count; ++lane) {
    lanes[lane] = multiply_add(left[i + lane], right[i + lane], lanes[lane]);
  }
  return sum_lanes(lanes);
}

inline float sum(const float* values, int64_t count) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (int lane = 0; lane < kLanes; ++lane) lanes[lane] += values[i + lane];
  }
  for (int lane = 0; lane < kLanes && i + lane < count; ++lane) lanes[lane] += values[i + lane];
  return sum_lanes(lanes);
}

// The largest value (-inf for an empty run; NaN is skipped).
inline float max_value(const float* values, int64_t count) {
  float lanes[kLanes];
  for (float& lane : lanes) lane = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (int lane = 0; lane < kLanes; ++lane) {
      lanes[lane] = values[i + lane] > lanes[lane] ? values[i + lane] : lanes[lane];
    }
  }
  for (int lane = 0; lane < kLanes && i + lane < count; ++lane) {
    lanes[lane] = values[i + lane] > lanes[lane] ? values[i + lane] : lanes[lane];
  }
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int lane = 0; lane < width; ++lane) {
      lanes[lane] = lanes[lane + width] > lanes[lane] ? lanes[lane + width] : lanes[lane];
    }
  }
  return lanes[0];
}

// e^x to about 2 ulp: x = n ln2 + r with |r| <= ln2/2, e^r by its degree-6 Taylor polynomial,
// 2^n by building the exponent bits. Below -87.3 (where e^x leaves the normal range) it returns
// 0, above 88.7 +inf; NaN stays NaN.
inline float exp_approx(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693359375f;  // ln 2 split so that n * kLn2High is exact.
  constexpr float kLn2Low = -2.12194440e-4f;
  constexpr float kRoundingShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer.
  float clamped = x < -87.3f ? -87.3f : x;
  clamped = clamped > 88.7f ? 88.7f : clamped;
  float n = (clamped * kLog2e + kRoundingShift) - kRoundingShift;
  float r = clamped - n * kLn2High - n * kLn2Low;
  float polynomial = 1.0f / 720.0f;
  polynomial = polynomial * r + 1.0f / 120.0f;
  polynomial = polynomial * r + 1.0f / 24.0f;
  polynomial = polynomial * r + 1.0f / 6.0f;
  polynomial = polynomial * r + 0.5f;
  polynomial = polynomial * r + 1.0f;
  polynomial = polynomial * r + 1.0f;
  // 2^n in two halves so that n = 128 (x near 88.7) does not overflow the exponent field.
  int32_t exponent = static_cast<int32_t>(n == n ? n : 0.0f);  // NaN carries on in r.
  int32_t first = exponent >> 1;
  float scale_first = std::bit_cast<float>((first + 127) << 23);
  float scale_second = std::bit_cast<float>((exponent - first + 127) << 23);
  float result = polynomial * scale_first * scale_second;
  result = x < -87.3f ? 0.0f : result;
  result = x > 88.7f ? std::numeric_limits<float>::infinity() : result;
  return result;
}

}  // namespace
}  // namespace fornace::cpu
