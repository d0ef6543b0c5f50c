// AVX-512 GEMV kernels: vdpbf16ps over bf16 weight rows, and FMA over f32/bf16/f16 weights.
#include <immintrin.h>

// GCC 12's AVX-512 headers start some intrinsics (shifts, reductions) from an "undefined"
// register and then warn about it; the warning is a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "cpu/gemm.h"
#include "cpu/gemm_kernels.h"

namespace fornace::cpu::kernels {
namespace {

// Weight rows handled together, so each input load feeds several dot products.
constexpr int kWeightRows = 4;

// Loaders that widen 16 weights to f32, in full or under a mask.
struct LoadF32 {
  using Element = float;
  static __m512 full(const float* source) { return _mm512_loadu_ps(source); }
  static __m512 part(const float* source, __mmask16 mask) {
    return _mm512_maskz_loadu_ps(mask, source);
  }
};
inline __m512 widen_bf16(__m256i values) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(values), 16));
}
struct LoadBf16 {
  using Element = uint16_t;
  static __m512 full(const uint16_t* source) {
    return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(source)));
  }
  static __m512 part(const uint16_t* source, __mmask16 mask) {
    return widen_bf16(_mm256_maskz_loadu_epi16(mask, source));
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

template <int Rows, int WeightRows>
inline void store_sums(const GemvArguments& arguments, int64_t column,
                       const __m512 (&acc)[Rows][WeightRows]) {
  for (int row = 0; row < Rows; ++row) {
    for (int index = 0; index < WeightRows; ++index) {
      float sum = _mm512_reduce_add_ps(acc[row][index]);
      if (arguments.bias) sum += arguments.bias[column + index];
      arguments.output[row * arguments.output_stride + column + index] = sum;
    }
  }
}

template <int Rows, int WeightRows, typename Load>
void fma_block(const GemvArguments& arguments, int64_t column) {
  using Element = typename Load::Element;
  const float* input = static_cast<const float*>(arguments.input);
  const Element* weight =
      static_cast<const Element*>(arguments.weight) + column * arguments.weight_stride;
  const int64_t depth = arguments.depth;
  __m512 acc[Rows][WeightRows];
  for (int row = 0; row < Rows; ++row) {
    for (int index = 0; index < WeightRows; ++index) acc[row][index] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= depth; k += 16) {
    __m512 weights[WeightRows];
    for (int index = 0; index < WeightRows; ++index) {
      weights[index] = Load::full(weight + index * arguments.weight_stride + k);
    }
    for (int row = 0; row < Rows; ++row) {
      __m512 value = _mm512_loadu_ps(input + row * arguments.input_stride + k);
      for (int index = 0; index < WeightRows; ++index) {
        acc[row][index] = _mm512_fmadd_ps(value, weights[index], acc[row][index]);
      }
    }
  }
  if (k < depth) {
    __mmask16 mask = static_cast<__mmask16>((1u << (depth - k)) - 1u);
    __m512 weights[WeightRows];
    for (int index = 0; index < WeightRows; ++index) {
      weights[index] = Load::part(weight + index * arguments.weight_stride + k, mask);
    }
    for (int row = 0; row < Rows; ++row) {
      __m512 value = _mm512_maskz_loadu_ps(mask, input + row * arguments.input_stride + k);
      for (int index = 0; index < WeightRows; ++index) {
        acc[row][index] = _mm512_fmadd_ps(value, weights[index], acc[row][index]);
      }
    }
  }
  store_sums(arguments, column, acc);
}

template <int Rows, int WeightRows>
void dot_block(const GemvArguments& arguments, int64_t column) {
  const uint16_t* input = static_cast<const uint16_t*>(arguments.input);
  const uint16_t* weight =
      static_cast<const uint16_t*>(arguments.weight) + column * arguments.weight_stride;
  const int64_t depth = arguments.depth;
  __m512 acc[Rows][WeightRows];
  for (int row = 0; row < Rows; ++row) {
    for (int index = 0; index < WeightRows; ++index) acc[row][index] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 32 <= depth; k += 32) {
    __m512bh weights[WeightRows];
    for (int index = 0; index < WeightRows; ++index) {
      weights[index] = (__m512bh)_mm512_loadu_si512(weight + index * arguments.weight_stride + k);
    }
    for (int row = 0; row < Rows; ++row) {
      __m512bh value = (__m512bh)_mm512_loadu_si512(input + row * arguments.input_stride + k);
      for (int index = 0; index < WeightRows; ++index) {
        acc[row][index] = _mm512_dpbf16_ps(acc[row][index], value, weights[index]);
      }
    }
  }
  if (k < depth) {
    __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (depth - k)) - 1u);
    __m512bh weights[WeightRows];
    for (int index = 0; index < WeightRows; ++index) {
      weights[index] =
          (__m512bh)_mm512_maskz_loadu_epi16(mask, weight + index * arguments.weight_stride + k);
    }
    for (int row = 0; row < Rows; ++row) {
      __m512bh value =
          (__m512bh)_mm512_maskz_loadu_epi16(mask, input + row * arguments.input_stride + k);
      for (int index = 0; index < WeightRows; ++index) {
        acc[row][index] = _mm512_dpbf16_ps(acc[row][index], value, weights[index]);
      }
    }
  }
  store_sums(arguments, column, acc);
}

// Walks weight rows [begin, end) in groups of kWeightRows, then one at a time.
template <int Rows, template <int, int> class Block>
void walk_columns(const GemvArguments& arguments, int64_t begin, int64_t end) {
  int64_t column = begin;
  for (; column + kWeightRows <= end; column += kWeightRows) {
    Block<Rows, kWeightRows>::run(arguments, column);
  }
  for (; column < end; ++column) Block<Rows, 1>::run(arguments, column);
}

template <template <int, int> class Block>
void dispatch_rows(const GemvArguments& arguments, int64_t begin, int64_t end) {
  static_assert(kGemvMaxRows == 4);
  switch (arguments.rows) {
    case 1:
      return walk_columns<1, Block>(arguments, begin, end);
    case 2:
      return walk_columns<2, Block>(arguments, begin, end);
    case 3:
      return walk_columns<3, Block>(arguments, begin, end);
    default:
      return walk_columns<4, Block>(arguments, begin, end);
  }
}

template <typename Load>
struct FmaBlockOf {
  template <int Rows, int WeightRows>
  struct Block {
    static void run(const GemvArguments& arguments, int64_t column) {
      fma_block<Rows, WeightRows, Load>(arguments, column);
    }
  };
};

template <int Rows, int WeightRows>
struct DotBlock {
  static void run(const GemvArguments& arguments, int64_t column) {
    dot_block<Rows, WeightRows>(arguments, column);
  }
};

}  // namespace

void gemv_bf16_dot_avx512(const GemvArguments& arguments, int64_t begin, int64_t end) {
  dispatch_rows<DotBlock>(arguments, begin, end);
}

void gemv_f32_avx512(const GemvArguments& arguments, int64_t begin, int64_t end) {
  switch (arguments.weight_dtype) {
    case DType::bf16:
      return dispatch_rows<FmaBlockOf<LoadBf16>::Block>(arguments, begin, end);
    case DType::f16:
      return dispatch_rows<FmaBlockOf<LoadF16>::Block>(arguments, begin, end);
    default:
      return dispatch_rows<FmaBlockOf<LoadF32>::Block>(arguments, begin, end);
  }
}

}  // namespace fornace::cpu::kernels
