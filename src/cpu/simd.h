// A thin vector layer over the widest float vectors the including translation unit is compiled
// for: AVX-512 (16 lanes), AVX2 with FMA (8), SSE2 (4, the x86-64 baseline) or plain floats
// elsewhere. Kernels are written once against it and compiled per ISA (see *_avx512.cpp).
// Everything has internal linkage, so no function compiled for one ISA is linked into another.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__) && !defined(__clang__)
// GCC 12 reports its own _mm512_undefined_* placeholders inside the AVX-512 intrinsics as
// uninitialized (a known false positive); silence it for the translation units that include this
// header (clang has neither the false positive nor the warning group).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace fornace::cpu {
namespace {
namespace simd {

#if defined(__AVX2__)
// Reductions of 8 lanes, shared by the AVX2 and AVX-512 versions.
inline float sum_of_8(__m256 value) {
  __m128 half = _mm_add_ps(_mm256_castps256_ps128(value), _mm256_extractf128_ps(value, 1));
  half = _mm_add_ps(half, _mm_movehl_ps(half, half));
  half = _mm_add_ss(half, _mm_shuffle_ps(half, half, 1));
  return _mm_cvtss_f32(half);
}
inline float max_of_8(__m256 value) {
  __m128 half = _mm_max_ps(_mm256_castps256_ps128(value), _mm256_extractf128_ps(value, 1));
  half = _mm_max_ps(half, _mm_movehl_ps(half, half));
  half = _mm_max_ss(half, _mm_shuffle_ps(half, half, 1));
  return _mm_cvtss_f32(half);
}
#endif

#if defined(__AVX512F__)
using Vec = __m512;
using Int = __m512i;
constexpr int kWidth = 16;
inline Vec load(const float* source) { return _mm512_loadu_ps(source); }
// kWidth bf16 values widened to f32 (the bf16 bits are the high half of the f32).
inline Vec load_bf16(const uint16_t* source) {
  __m256i halves = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16));
}
inline void store(float* destination, Vec value) { _mm512_storeu_ps(destination, value); }
inline Vec broadcast(float value) { return _mm512_set1_ps(value); }
inline Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline Vec subtract(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
inline Vec multiply(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
inline Vec divide(Vec a, Vec b) { return _mm512_div_ps(a, b); }
inline Vec multiply_add(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
// Lane-wise max/min that return `b` when either is NaN.
inline Vec maximum(Vec a, Vec b) { return _mm512_max_ps(a, b); }
inline Vec minimum(Vec a, Vec b) { return _mm512_min_ps(a, b); }
inline __m256 upper_half(Vec value) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(value), 1));
}
inline float sum(Vec value) {
  return sum_of_8(_mm256_add_ps(_mm512_castps512_ps256(value), upper_half(value)));
}
inline float max_lane(Vec value) {
  return max_of_8(_mm256_max_ps(_mm512_castps512_ps256(value), upper_half(value)));
}
inline Int to_int(Vec value) { return _mm512_cvtps_epi32(value); }
inline Int add_int(Int a, Int b) { return _mm512_add_epi32(a, b); }
inline Int subtract_int(Int a, Int b) { return _mm512_sub_epi32(a, b); }
inline Int halve_int(Int a) { return _mm512_srai_epi32(a, 1); }
inline Int broadcast_int(int32_t value) { return _mm512_set1_epi32(value); }
inline Vec exponent_bits(Int biased) { return _mm512_castsi512_ps(_mm512_slli_epi32(biased, 23)); }
// value where x is not below limit (NaN counts as not below), else 0.
// Bit i set where lane i of a equals lane i of b (ordered: NaN equals nothing).
inline uint32_t equal_lanes(Vec a, Vec b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
inline Vec zero_below(Vec x, Vec limit, Vec value) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, limit, _CMP_NLT_UQ), value);
}
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
using Int = __m256i;
constexpr int kWidth = 8;
inline Vec load(const float* source) { return _mm256_loadu_ps(source); }
inline Vec load_bf16(const uint16_t* source) {
  __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(source));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16));
}
inline void store(float* destination, Vec value) { _mm256_storeu_ps(destination, value); }
inline Vec broadcast(float value) { return _mm256_set1_ps(value); }
inline Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec subtract(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
inline Vec multiply(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec divide(Vec a, Vec b) { return _mm256_div_ps(a, b); }
inline Vec multiply_add(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec maximum(Vec a, Vec b) { return _mm256_max_ps(a, b); }
inline Vec minimum(Vec a, Vec b) { return _mm256_min_ps(a, b); }
inline float sum(Vec value) { return sum_of_8(value); }
inline float max_lane(Vec value) { return max_of_8(value); }
inline Int to_int(Vec value) { return _mm256_cvtps_epi32(value); }
inline Int add_int(Int a, Int b) { return _mm256_add_epi32(a, b); }
inline Int subtract_int(Int a, Int b) { return _mm256_sub_epi32(a, b); }
inline Int halve_int(Int a) { return _mm256_srai_epi32(a, 1); }
inline Int broadcast_int(int32_t value) { return _mm256_set1_epi32(value); }
inline Vec exponent_bits(Int biased) { return _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23)); }
inline uint32_t equal_lanes(Vec a, Vec b) {
  return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ)));
}
inline Vec zero_below(Vec x, Vec limit, Vec value) {
  return _mm256_and_ps(_mm256_cmp_ps(x, limit, _CMP_NLT_UQ), value);
}
#elif defined(__SSE2__)
using Vec = __m128;
using Int = __m128i;
constexpr int kWidth = 4;
inline Vec load(const float* source) { return _mm_loadu_ps(source); }
inline Vec load_bf16(const uint16_t* source) {
  __m128i halves = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(source));
  return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), halves));
}
inline void store(float* destination, Vec value) { _mm_storeu_ps(destination, value); }
inline Vec broadcast(float value) { return _mm_set1_ps(value); }
inline Vec add(Vec a, Vec b) { return _mm_add_ps(a, b); }
inline Vec subtract(Vec a, Vec b) { return _mm_sub_ps(a, b); }
inline Vec multiply(Vec a, Vec b) { return _mm_mul_ps(a, b); }
inline Vec divide(Vec a, Vec b) { return _mm_div_ps(a, b); }
inline Vec multiply_add(Vec a, Vec b, Vec c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
inline Vec maximum(Vec a, Vec b) { return _mm_max_ps(a, b); }
inline Vec minimum(Vec a, Vec b) { return _mm_min_ps(a, b); }
inline float sum(Vec value) {
  value = _mm_add_ps(value, _mm_movehl_ps(value, value));
  value = _mm_add_ss(value, _mm_shuffle_ps(value, value, 1));
  return _mm_cvtss_f32(value);
}
inline float max_lane(Vec value) {
  value = _mm_max_ps(value, _mm_movehl_ps(value, value));
  value = _mm_max_ss(value, _mm_shuffle_ps(value, value, 1));
  return _mm_cvtss_f32(value);
}
inline Int to_int(Vec value) { return _mm_cvtps_epi32(value); }
inline Int add_int(Int a, Int b) { return _mm_add_epi32(a, b); }
inline Int subtract_int(Int a, Int b) { return _mm_sub_epi32(a, b); }
inline Int halve_int(Int a) { return _mm_srai_epi32(a, 1); }
inline Int broadcast_int(int32_t value) { return _mm_set1_epi32(value); }
inline Vec exponent_bits(Int biased) { return _mm_castsi128_ps(_mm_slli_epi32(biased, 23)); }
inline uint32_t equal_lanes(Vec a, Vec b) {
  return static_cast<uint32_t>(_mm_movemask_ps(_mm_cmpeq_ps(a, b)));
}
inline Vec zero_below(Vec x, Vec limit, Vec value) {
  return _mm_and_ps(_mm_cmpnlt_ps(x, limit), value);
}
#else
// One float per "vector": the same kernels, unvectorized.
using Vec = float;
using Int = int32_t;
constexpr int kWidth = 1;
inline Vec load(const float* source) { return *source; }
inline Vec load_bf16(const uint16_t* source) {
  uint32_t bits = static_cast<uint32_t>(*source) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}
inline void store(float* destination, Vec value) { *destination = value; }
inline Vec broadcast(float value) { return value; }
inline Vec add(Vec a, Vec b) { return a + b; }
inline Vec subtract(Vec a, Vec b) { return a - b; }
inline Vec multiply(Vec a, Vec b) { return a * b; }
inline Vec divide(Vec a, Vec b) { return a / b; }
inline Vec multiply_add(Vec a, Vec b, Vec c) { return a * b + c; }
inline Vec maximum(Vec a, Vec b) { return a > b ? a : b; }
inline Vec minimum(Vec a, Vec b) { return a < b ? a : b; }
inline float sum(Vec value) { return value; }
inline float max_lane(Vec value) { return value; }
inline Int to_int(Vec value) { return value == value ? static_cast<Int>(value) : 0; }
inline Int add_int(Int a, Int b) { return a + b; }
inline Int subtract_int(Int a, Int b) { return a - b; }
inline Int halve_int(Int a) { return a >> 1; }
inline Int broadcast_int(int32_t value) { return value; }
inline Vec exponent_bits(Int biased) {
  uint32_t bits = static_cast<uint32_t>(biased) << 23;
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}
inline Vec zero_below(Vec x, Vec limit, Vec value) { return x < limit ? 0.0f : value; }
inline uint32_t equal_lanes(Vec a, Vec b) { return a == b ? 1u : 0u; }
#endif

// e^r for x = n ln2 + r (n: x log2 e rounded to an integer, so |r| <= ln2/2), by r's degree-6
// Taylor polynomial; ln 2 is split so that n * high is exact.
inline Vec exp_of_remainder(Vec x, Vec n) {
  Vec r = subtract(x, multiply(n, broadcast(0.693359375f)));
  r = subtract(r, multiply(n, broadcast(-2.12194440e-4f)));
  Vec polynomial = broadcast(1.0f / 720.0f);
  polynomial = multiply_add(polynomial, r, broadcast(1.0f / 120.0f));
  polynomial = multiply_add(polynomial, r, broadcast(1.0f / 24.0f));
  polynomial = multiply_add(polynomial, r, broadcast(1.0f / 6.0f));
  polynomial = multiply_add(polynomial, r, broadcast(0.5f));
  polynomial = multiply_add(polynomial, r, broadcast(1.0f));
  return multiply_add(polynomial, r, broadcast(1.0f));
}

// e^x to about 2 ulp: e^r by exp_of_remainder, 2^n from exponent bits (in two halves, so that
// n = 128 still builds). Below -87.3 (outside the normal range) it gives 0; above about 88.72
// the product overflows to +inf; NaN stays NaN.
inline Vec exp(Vec x) {
  const Vec low = broadcast(-87.3f);
  Vec clamped = minimum(broadcast(89.0f), maximum(low, x));
  const Vec rounding_shift = broadcast(12582912.0f);  // 1.5 * 2^23: adding it rounds.
  Vec n = subtract(multiply_add(clamped, broadcast(1.44269504088896341f), rounding_shift),
                   rounding_shift);
  Vec polynomial = exp_of_remainder(clamped, n);
  Int exponent = to_int(n);
  Int first = halve_int(exponent);
  Int second = subtract_int(exponent, first);
  const Int bias = broadcast_int(127);
  Vec result = multiply(multiply(polynomial, exponent_bits(add_int(first, bias))),
                        exponent_bits(add_int(second, bias)));
  return zero_below(x, low, result);
}

#if defined(__AVX512F__)
// e^x for x in [-87, 88], where it is a normal float: exp's arithmetic with 2^n by one scalef,
// about half its instructions. (Where scalef's result would be subnormal, each lane costs a slow
// microcode assist: callers clamp.)
inline Vec exp_normal_range(Vec x) {
  Vec n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_scalef_ps(exp_of_remainder(x, n), n);
}
#endif

// out[i] = function(in[i]) for Vec -> Vec functions; the tail goes through a padded buffer.
template <typename Function>
inline void transform(const float* in, float* out, int64_t count, Function function) {
  int64_t i = 0;
  for (; i + kWidth <= count; i += kWidth) store(out + i, function(load(in + i)));
  if (i < count) {
    float buffer[kWidth] = {};
    std::memcpy(buffer, in + i, (count - i) * sizeof(float));
    store(buffer, function(load(buffer)));
    std::memcpy(out + i, buffer, (count - i) * sizeof(float));
  }
}

// out[i] = function(left[i], right[i]).
template <typename Function>
inline void transform(const float* left, const float* right, float* out, int64_t count,
                      Function function) {
  int64_t i = 0;
  for (; i + kWidth <= count; i += kWidth) {
    store(out + i, function(load(left + i), load(right + i)));
  }
  for (; i < count; ++i) {
    float left_buffer[kWidth] = {left[i]};
    float right_buffer[kWidth] = {right[i]};
    store(left_buffer, function(load(left_buffer), load(right_buffer)));
    out[i] = left_buffer[0];
  }
}

inline float dot(const float* left, const float* right, int64_t count) {
  Vec first = broadcast(0.0f);
  Vec second = broadcast(0.0f);
  int64_t i = 0;
  for (; i + 2 * kWidth <= count; i += 2 * kWidth) {
    first = multiply_add(load(left + i), load(right + i), first);
    second = multiply_add(load(left + i + kWidth), load(right + i + kWidth), second);
  }
  for (; i + kWidth <= count; i += kWidth) first = multiply_add(load(left + i), load(right + i), first);
  float total = sum(add(first, second));
  for (; i < count; ++i) total += left[i] * right[i];
  return total;
}

inline float sum(const float* values, int64_t count) {
  Vec total = broadcast(0.0f);
  int64_t i = 0;
  for (; i + kWidth <= count; i += kWidth) total = add(total, load(values + i));
  float result = sum(total);
  for (; i < count; ++i) result += values[i];
  return result;
}

// The largest value; NaN is skipped; -inf for an empty run.
inline float max_value(const float* values, int64_t count) {
  const float lowest = -__builtin_inff();
  Vec best = broadcast(lowest);
  int64_t i = 0;
  // maximum() returns its second operand for NaN: keep `best` second so NaN never enters it.
  for (; i + kWidth <= count; i += kWidth) best = maximum(load(values + i), best);
  float result = max_lane(best);
  for (; i < count; ++i) result = values[i] > result ? values[i] : result;
  return result;
}

// The first index whose value equals `value`, or count where none does.
inline int64_t first_index_of(const float* values, int64_t count, float value) {
  const Vec target = broadcast(value);
  int64_t i = 0;
  for (; i + kWidth <= count; i += kWidth) {
    const uint32_t equal = equal_lanes(load(values + i), target);
    if (equal != 0) return i + __builtin_ctz(equal);
  }
  for (; i < count; ++i) {
    if (values[i] == value) return i;
  }
  return count;
}

}  // namespace simd
}  // namespace
}  // namespace fornace::cpu
