// AVX2+FMA GEMV kernel over f32, bf16 or f16 weights widened to f32.
#include <immintrin.h>

#include "cpu/gemm.h"
#include "cpu/gemm_kernels.h"

namespace fornace::cpu::kernels {
namespace {

// Weight rows are read one after another as one sequential stream, prefetched this far ahead.
constexpr int kPrefetchBytes = 8192;

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

// Each row's sum runs in kChains independent chains of FMAs over successive 8-value slices, so
// that one or two rows (decode) do not wait on the FMA latency; three or four rows have chains
// enough across the rows (and the registers allow no more).
template <int Rows, typename Load>
void fma_rows(const GemvArguments& arguments, int64_t begin, int64_t end) {
  using Element = typename Load::Element;
  constexpr int kChains = Rows <= 2 ? 4 : 2;
  constexpr int kStep = 8 * kChains;
  const float* input = static_cast<const float*>(arguments.input);
  const int64_t depth = arguments.depth;
  for (int64_t column = begin; column < end; ++column) {
    const Element* weight =
        static_cast<const Element*>(arguments.weight) + column * arguments.weight_stride;
    __m256 acc[Rows][kChains];
    for (int row = 0; row < Rows; ++row) {
      for (int chain = 0; chain < kChains; ++chain) acc[row][chain] = _mm256_setzero_ps();
    }
    int64_t k = 0;
    for (; k + kStep <= depth; k += kStep) {
      const char* ahead = reinterpret_cast<const char*>(weight + k) + kPrefetchBytes;
      for (int offset = 0; offset < static_cast<int>(kStep * sizeof(Element)); offset += 64) {
        _mm_prefetch(ahead + offset, _MM_HINT_T2);
      }
      __m256 slices[kChains];
      for (int chain = 0; chain < kChains; ++chain) {
        slices[chain] = Load::full(weight + k + 8 * chain);
      }
      for (int row = 0; row < Rows; ++row) {
        const float* input_row = input + row * arguments.input_stride + k;
        for (int chain = 0; chain < kChains; ++chain) {
          acc[row][chain] = _mm256_fmadd_ps(_mm256_loadu_ps(input_row + 8 * chain),
                                            slices[chain], acc[row][chain]);
        }
      }
    }
    for (; k + 8 <= depth; k += 8) {
      __m256 slice = Load::full(weight + k);
      for (int row = 0; row < Rows; ++row) {
        acc[row][0] = _mm256_fmadd_ps(_mm256_loadu_ps(input + row * arguments.input_stride + k),
                                      slice, acc[row][0]);
      }
    }
    for (int row = 0; row < Rows; ++row) {
      const float* input_row = input + row * arguments.input_stride;
      __m256 total = acc[row][0];
      for (int chain = 1; chain < kChains; ++chain) total = _mm256_add_ps(total, acc[row][chain]);
      float sum = reduce(total);
      for (int64_t tail = k; tail < depth; ++tail) sum += input_row[tail] * Load::one(weight[tail]);
      if (arguments.bias) sum += arguments.bias[column];
      arguments.output[row * arguments.output_stride + column] = sum;
    }
  }
}

template <typename Load>
void dispatch_rows(const GemvArguments& arguments, int64_t begin, int64_t end) {
  static_assert(kGemvMaxRows == 4);
  switch (arguments.rows) {
    case 1:
      return fma_rows<1, Load>(arguments, begin, end);
    case 2:
      return fma_rows<2, Load>(arguments, begin, end);
    case 3:
      return fma_rows<3, Load>(arguments, begin, end);
    default:
      return fma_rows<4, Load>(arguments, begin, end);
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
