// AVX2+FMA GEMV kernel over f32, bf16 or f16 weights widened to f32.
#include <immintrin.h>

#include "cpu/gemm.h"
#include "cpu/gemm_kernels.h"

namespace fornace::cpu::kernels {
namespace {

constexpr int kWeightRows = 4;

struct LoadF32 {
  using Element = float;
  static __m256 full(const float* source) { return _mm256_loadu_ps(source); }
  static float one(float value) { return value; }
};
struct LoadBf16 {
  using Element = uint16_t;
  static __m256 full(const uint16_t* source) {
    __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(source));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(values), 16));
  }
  static float one(uint16_t value) { return bf16_to_f32(value); }
};
struct LoadF16 {
  using Element = uint16_t;
  static __m256 full(const uint16_t* source) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(source)));
  }
  static float one(uint16_t value) { return f16_to_f32(value); }
};

inline float reduce(__m256 value) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(value), _mm256_extractf128_ps(value, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return _mm_cvtss_f32(sum);
}

template <int Rows, int WeightRows, typename Load>
void fma_block(const GemvArguments& arguments, int64_t column) {
  using Element = typename Load::Element;
  const float* input = static_cast<const float*>(arguments.input);
  const Element* weight =
      static_cast<const Element*>(arguments.weight) + column * arguments.weight_stride;
  const int64_t depth = arguments.depth;
  __m256 acc[Rows][WeightRows];
  for (int row = 0; row < Rows; ++row) {
    for (int index = 0; index < WeightRows; ++index) acc[row][index] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 8 <= depth; k += 8) {
    __m256 weights[WeightRows];
    for (int index = 0; index < WeightRows; ++index) {
      weights[index] = Load::full(weight + index * arguments.weight_stride + k);
    }
    for (int row = 0; row < Rows; ++row) {
      __m256 value = _mm256_loadu_ps(input + row * arguments.input_stride + k);
      for (int index = 0; index < WeightRows; ++index) {
        acc[row][index] = _mm256_fmadd_ps(value, weights[index], acc[row][index]);
      }
    }
  }
  for (int row = 0; row < Rows; ++row) {
    const float* input_row = input + row * arguments.input_stride;
    for (int index = 0; index < WeightRows; ++index) {
      const Element* weight_row = weight + index * arguments.weight_stride;
      float sum = reduce(acc[row][index]);
      for (int64_t tail = k; tail < depth; ++tail) sum += input_row[tail] * Load::one(weight_row[tail]);
      if (arguments.bias) sum += arguments.bias[column + index];
      arguments.output[row * arguments.output_stride + column + index] = sum;
    }
  }
}

template <int Rows, typename Load>
void walk_columns(const GemvArguments& arguments, int64_t begin, int64_t end) {
  int64_t column = begin;
  for (; column + kWeightRows <= end; column += kWeightRows) {
    fma_block<Rows, kWeightRows, Load>(arguments, column);
  }
  for (; column < end; ++column) fma_block<Rows, 1, Load>(arguments, column);
}

template <typename Load>
void dispatch_rows(const GemvArguments& arguments, int64_t begin, int64_t end) {
  static_assert(kGemvMaxRows == 4);
  switch (arguments.rows) {
    case 1:
      return walk_columns<1, Load>(arguments, begin, end);
    case 2:
      return walk_columns<2, Load>(arguments, begin, end);
    case 3:
      return walk_columns<3, Load>(arguments, begin, end);
    default:
      return walk_columns<4, Load>(arguments, begin, end);
  }
}

}  // namespace

void gemv_f32_avx2(const GemvArguments& arguments, int64_t begin, int64_t end) {
  switch (arguments.weight_dtype) {
    case DType::bf16:
      return dispatch_rows<LoadBf16>(arguments, begin, end);
    case DType::f16:
      return dispatch_rows<LoadF16>(arguments, begin, end);
    default:
      return dispatch_rows<LoadF32>(arguments, begin, end);
  }
}

}  // namespace fornace::cpu::kernels
