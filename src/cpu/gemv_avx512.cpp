// AVX-512 GEMV kernels: vdpbf16ps over bf16 weight rows, and FMA over f32/f16 weights.
#include <immintrin.h>

#include "cpu/gemm.h"
#include "cpu/gemm_kernels.h"

// GCC 12's AVX-512 headers start some intrinsics (reductions) from an "undefined" register and
// then warn about it; the warning is a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace fornace::cpu::kernels {
namespace {

// Weight rows are read one after another as one sequential stream (interleaving several rows
// makes several short streams, which the hardware prefetcher follows poorly). There is no
// software prefetch: with the weights in 2 MiB pages the hardware prefetcher is not stopped at
// every 4 KiB, and an L2 prefetch 8 KiB ahead measured 4-8 % below no prefetch, in the same
// process against a streaming read of the same bytes.

// Vector chunks per step, each with its own accumulator (256 bytes of bf16 weights per step).
constexpr int kChunks = 4;

template <int Rows, int Chunks>
inline void store_row_sums(const GemvArguments& arguments, int64_t column,
                           const __m512 (&acc)[Rows][Chunks]) {
  for (int row = 0; row < Rows; ++row) {
    __m512 total = acc[row][0];
    for (int chunk = 1; chunk < Chunks; ++chunk) total = _mm512_add_ps(total, acc[row][chunk]);
    float sum = _mm512_reduce_add_ps(total);
    if (arguments.bias) sum += arguments.bias[column];
    arguments.output[row * arguments.output_stride + column] = sum;
  }
}

// Widen 16 weights to f32, in full or under a mask.
struct LoadF32 {
  using Element = float;
  static __m512 full(const float* source) { return _mm512_loadu_ps(source); }
  static __m512 part(const float* source, __mmask16 mask) {
    return _mm512_maskz_loadu_ps(mask, source);
  }
};
struct LoadF16 {
  using Element = uint16_t;
  static __m512 full(const uint16_t* source) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(source)));
  }
  static __m512 part(const uint16_t* source, __mmask16 mask) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, source));
  }
};

// f32 input, weights widened to f32: kChunks 16-wide chunks per step.
template <int Rows, typename Load>
void fma_rows(const GemvArguments& arguments, int64_t begin, int64_t end) {
  using Element = typename Load::Element;
  const float* input = static_cast<const float*>(arguments.input);
  const int64_t depth = arguments.depth;
  for (int64_t column = begin; column < end; ++column) {
    const Element* weight =
        static_cast<const Element*>(arguments.weight) + column * arguments.weight_stride;
    __m512 acc[Rows][kChunks];
    for (int row = 0; row < Rows; ++row) {
      for (int chunk = 0; chunk < kChunks; ++chunk) acc[row][chunk] = _mm512_setzero_ps();
    }
    int64_t k = 0;
    for (; k + 16 * kChunks <= depth; k += 16 * kChunks) {
      for (int chunk = 0; chunk < kChunks; ++chunk) {
        __m512 weights = Load::full(weight + k + 16 * chunk);
        for (int row = 0; row < Rows; ++row) {
          __m512 value = _mm512_loadu_ps(input + row * arguments.input_stride + k + 16 * chunk);
          acc[row][chunk] = _mm512_fmadd_ps(value, weights, acc[row][chunk]);
        }
      }
    }
    for (; k < depth; k += 16) {
      int64_t left = depth - k < 16 ? depth - k : 16;
      __mmask16 mask = static_cast<__mmask16>((1u << left) - 1u);
      __m512 part = Load::part(weight + k, mask);
      for (int row = 0; row < Rows; ++row) {
        __m512 value = _mm512_maskz_loadu_ps(mask, input + row * arguments.input_stride + k);
        acc[row][0] = _mm512_fmadd_ps(value, part, acc[row][0]);
      }
    }
    store_row_sums(arguments, column, acc);
  }
}

// bf16 input and weights: vdpbf16ps, Chunks 32-wide chunks per step. Up to 4 rows take 4 chunks;
// 5 to 8 rows take 2, so that the accumulators, a weight and an input vector fit the 32 registers.
template <int Rows, int Chunks = (Rows <= 4 ? kChunks : 2)>
void dot_rows(const GemvArguments& arguments, int64_t begin, int64_t end) {
  const uint16_t* input = static_cast<const uint16_t*>(arguments.input);
  const int64_t depth = arguments.depth;
  for (int64_t column = begin; column < end; ++column) {
    const uint16_t* weight =
        static_cast<const uint16_t*>(arguments.weight) + column * arguments.weight_stride;
    __m512 acc[Rows][Chunks];
    for (int row = 0; row < Rows; ++row) {
      for (int chunk = 0; chunk < Chunks; ++chunk) acc[row][chunk] = _mm512_setzero_ps();
    }
    int64_t k = 0;
    for (; k + 32 * Chunks <= depth; k += 32 * Chunks) {
      for (int chunk = 0; chunk < Chunks; ++chunk) {
        __m512bh weights = (__m512bh)_mm512_loadu_si512(weight + k + 32 * chunk);
        for (int row = 0; row < Rows; ++row) {
          __m512bh value =
              (__m512bh)_mm512_loadu_si512(input + row * arguments.input_stride + k + 32 * chunk);
          acc[row][chunk] = _mm512_dpbf16_ps(acc[row][chunk], value, weights);
        }
      }
    }
    for (int chunk = 0; k < depth; k += 32, chunk = (chunk + 1) % Chunks) {
      int64_t left = depth - k < 32 ? depth - k : 32;
      __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << left) - 1u);
      __m512bh part = (__m512bh)_mm512_maskz_loadu_epi16(mask, weight + k);
      for (int row = 0; row < Rows; ++row) {
        __m512bh value =
            (__m512bh)_mm512_maskz_loadu_epi16(mask, input + row * arguments.input_stride + k);
        acc[row][chunk] = _mm512_dpbf16_ps(acc[row][chunk], value, part);
      }
    }
    store_row_sums(arguments, column, acc);
  }
}

// bf16 input and weights for 4 rows, two weight rows (output columns) at a time: each input
// vector loaded serves both, so a step loads 2 + Rows vectors for 2 x Rows vdpbf16ps, where
// dot_rows loads 1 + Rows for Rows (down_proj at 8 rows, as two passes of 4: 444 -> 338 us in
// micro-matmul). Eight rows this way (with the row loops unrolled, accumulators in registers)
// measured 2.3x slower than dot_rows<8> in micro-matmul, so they stay there.
constexpr int64_t kPairedMinDepth = 2048;

template <int Rows, int Chunks = 2>
void dot_rows_paired(const GemvArguments& arguments, int64_t begin, int64_t end) {
  const uint16_t* input = static_cast<const uint16_t*>(arguments.input);
  const int64_t depth = arguments.depth;
  int64_t column = begin;
  for (; column + 2 <= end; column += 2) {
    const uint16_t* weight0 =
        static_cast<const uint16_t*>(arguments.weight) + column * arguments.weight_stride;
    const uint16_t* weight1 = weight0 + arguments.weight_stride;
    __m512 acc0[Rows][Chunks];
    __m512 acc1[Rows][Chunks];
    for (int row = 0; row < Rows; ++row) {
      for (int chunk = 0; chunk < Chunks; ++chunk) {
        acc0[row][chunk] = _mm512_setzero_ps();
        acc1[row][chunk] = _mm512_setzero_ps();
      }
    }
    int64_t k = 0;
    for (; k + 32 * Chunks <= depth; k += 32 * Chunks) {
#pragma GCC unroll 2
      for (int chunk = 0; chunk < Chunks; ++chunk) {
        __m512bh w0 = (__m512bh)_mm512_loadu_si512(weight0 + k + 32 * chunk);
        __m512bh w1 = (__m512bh)_mm512_loadu_si512(weight1 + k + 32 * chunk);
#pragma GCC unroll 8
        for (int row = 0; row < Rows; ++row) {
          __m512bh value =
              (__m512bh)_mm512_loadu_si512(input + row * arguments.input_stride + k + 32 * chunk);
          acc0[row][chunk] = _mm512_dpbf16_ps(acc0[row][chunk], value, w0);
          acc1[row][chunk] = _mm512_dpbf16_ps(acc1[row][chunk], value, w1);
        }
      }
    }
    for (; k < depth; k += 32) {
      int64_t left = depth - k < 32 ? depth - k : 32;
      __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << left) - 1u);
      __m512bh w0 = (__m512bh)_mm512_maskz_loadu_epi16(mask, weight0 + k);
      __m512bh w1 = (__m512bh)_mm512_maskz_loadu_epi16(mask, weight1 + k);
#pragma GCC unroll 8
      for (int row = 0; row < Rows; ++row) {
        __m512bh value =
            (__m512bh)_mm512_maskz_loadu_epi16(mask, input + row * arguments.input_stride + k);
        acc0[row][0] = _mm512_dpbf16_ps(acc0[row][0], value, w0);
        acc1[row][0] = _mm512_dpbf16_ps(acc1[row][0], value, w1);
      }
    }
    store_row_sums(arguments, column, acc0);
    store_row_sums(arguments, column + 1, acc1);
  }
  if (column < end) dot_rows<Rows>(arguments, column, end);
}

template <template <int> class Rows>
void dispatch_rows(const GemvArguments& arguments, int64_t begin, int64_t end) {
  static_assert(kGemvMaxRows == 4);
  switch (arguments.rows) {
    case 1:
      return Rows<1>::run(arguments, begin, end);
    case 2:
      return Rows<2>::run(arguments, begin, end);
    case 3:
      return Rows<3>::run(arguments, begin, end);
    default:
      return Rows<4>::run(arguments, begin, end);
  }
}

template <int Rows>
struct DotRows {
  static void run(const GemvArguments& arguments, int64_t begin, int64_t end) {
    dot_rows<Rows>(arguments, begin, end);
  }
};
template <typename Load>
struct FmaRowsOf {
  template <int Rows>
  struct Kernel {
    static void run(const GemvArguments& arguments, int64_t begin, int64_t end) {
      fma_rows<Rows, Load>(arguments, begin, end);
    }
  };
};

}  // namespace

void gemv_bf16_dot_avx512(const GemvArguments& arguments, int64_t begin, int64_t end) {
  static_assert(kGemvBf16DotMaxRows == 8);
  switch (arguments.rows) {
    case 4:
      // Paired weight rows are two streams, which the prefetcher follows worse than one (gate_proj
      // at 4 rows: 274 us paired against 250 us at 8 rows one at a time); they pay off where the
      // rows are deep, as down_proj's 4,864 read in passes of four.
      if (arguments.depth > kPairedMinDepth) return dot_rows_paired<4>(arguments, begin, end);
      return dot_rows<4>(arguments, begin, end);
    case 5:
      return dot_rows<5>(arguments, begin, end);
    case 6:
      return dot_rows<6>(arguments, begin, end);
    case 7:
      return dot_rows<7>(arguments, begin, end);
    case 8:
      return dot_rows<8>(arguments, begin, end);
    default:
      return dispatch_rows<DotRows>(arguments, begin, end);
  }
}

void gemv_f32_avx512(const GemvArguments& arguments, int64_t begin, int64_t end) {
  if (arguments.weight_dtype == DType::f16) {
    return dispatch_rows<FmaRowsOf<LoadF16>::Kernel>(arguments, begin, end);
  }
  return dispatch_rows<FmaRowsOf<LoadF32>::Kernel>(arguments, begin, end);
}

}  // namespace fornace::cpu::kernels
