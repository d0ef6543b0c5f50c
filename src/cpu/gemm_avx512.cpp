// AVX-512 GEMM micro-kernels (vdpbf16ps or AMX tiles for bf16 weights, FMA for f32 panels) and
// bf16 rounding.
#include <immintrin.h>

#include "cpu/amx_tiles.h"
#include "cpu/gemm_kernels.h"
#include "cpu/simd.h"  // Also silences GCC 12's false "uninitialized" warnings.

namespace fornace::cpu::kernels {
namespace {

constexpr int kRows = 12;

// The accumulator tile starts from c (accumulate), the bias row, or zero.
template <int kTileRows>
inline void load_tile(__m512 (&acc)[kTileRows][2], const float* c, int64_t c_stride,
                      bool accumulate, const float* bias) {
  __m512 first = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
  __m512 second = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int row = 0; row < kTileRows; ++row) {
    if (accumulate) {
      acc[row][0] = _mm512_loadu_ps(c + row * c_stride);
      acc[row][1] = _mm512_loadu_ps(c + row * c_stride + 16);
    } else {
      acc[row][0] = first;
      acc[row][1] = second;
    }
  }
}

template <int kTileRows>
inline void store_tile(const __m512 (&acc)[kTileRows][2], float* c, int64_t c_stride) {
#pragma GCC unroll 16
  for (int row = 0; row < kTileRows; ++row) {
    _mm512_storeu_ps(c + row * c_stride, acc[row][0]);
    _mm512_storeu_ps(c + row * c_stride + 16, acc[row][1]);
  }
}

// acc += the input rows' k pairs times the weight panel's, over `steps` pairs; with kPrefetch,
// also prefetches `ahead`, as many bytes a step (128) as the panel gives.
template <bool kPrefetch, int kTileRows = kRows>
[[gnu::always_inline]] inline void multiply_bf16_steps(int64_t steps, const int32_t* input,
                                                       int64_t row_words, const __m512i* weight,
                                                       const char* ahead,
                                                       __m512 (&acc)[kTileRows][2]) {
  for (int64_t step = 0; step < steps; ++step) {
    if constexpr (kPrefetch) {
      _mm_prefetch(ahead + step * 128, _MM_HINT_T0);
      _mm_prefetch(ahead + step * 128 + 64, _MM_HINT_T0);
    }
    __m512bh weight_low = (__m512bh)_mm512_load_si512(weight + 2 * step);
    __m512bh weight_high = (__m512bh)_mm512_load_si512(weight + 2 * step + 1);
#pragma GCC unroll 16
    for (int row = 0; row < kTileRows; ++row) {
      __m512bh pair = (__m512bh)_mm512_set1_epi32(input[row * row_words + step]);
      acc[row][0] = _mm512_dpbf16_ps(acc[row][0], pair, weight_low);
      acc[row][1] = _mm512_dpbf16_ps(acc[row][1], pair, weight_high);
    }
  }
}

// Transposes a 16 x 16 tile of 32-bit words in place.
inline void transpose_16x16(__m512i (&rows)[16]) {
  __m512i pairs[16];
  for (int index = 0; index < 16; index += 2) {
    pairs[index] = _mm512_unpacklo_epi32(rows[index], rows[index + 1]);
    pairs[index + 1] = _mm512_unpackhi_epi32(rows[index], rows[index + 1]);
  }
  // quads[4 * group + j] holds, per 128-bit lane L, word j + 4 L of rows 4 group .. 4 group + 3.
  __m512i quads[16];
  for (int group = 0; group < 4; ++group) {
    const __m512i* in = pairs + 4 * group;
    quads[4 * group + 0] = _mm512_unpacklo_epi64(in[0], in[2]);
    quads[4 * group + 1] = _mm512_unpackhi_epi64(in[0], in[2]);
    quads[4 * group + 2] = _mm512_unpacklo_epi64(in[1], in[3]);
    quads[4 * group + 3] = _mm512_unpackhi_epi64(in[1], in[3]);
  }
  // Gather lane L of the four groups into word j + 4 L.
  for (int j = 0; j < 4; ++j) {
    __m512i even_low = _mm512_shuffle_i32x4(quads[j], quads[4 + j], 0x88);
    __m512i odd_low = _mm512_shuffle_i32x4(quads[j], quads[4 + j], 0xdd);
    __m512i even_high = _mm512_shuffle_i32x4(quads[8 + j], quads[12 + j], 0x88);
    __m512i odd_high = _mm512_shuffle_i32x4(quads[8 + j], quads[12 + j], 0xdd);
    rows[j] = _mm512_shuffle_i32x4(even_low, even_high, 0x88);
    rows[j + 8] = _mm512_shuffle_i32x4(even_low, even_high, 0xdd);
    rows[j + 4] = _mm512_shuffle_i32x4(odd_low, odd_high, 0x88);
    rows[j + 12] = _mm512_shuffle_i32x4(odd_low, odd_high, 0xdd);
  }
}

}  // namespace

void pack_bf16_pairs_avx512(const uint16_t* weight, int64_t weight_stride, int64_t columns_valid,
                            int64_t k_count, void* panel) {
  constexpr int kColumns = 32;
  uint32_t* destination = static_cast<uint32_t*>(panel);
  const int64_t pairs = k_count / 2;
  const int64_t steps = (k_count + 1) / 2;
  int64_t step = 0;
  // 16 k pairs x 16 columns at a time: a 16 x 16 word transpose.
  for (; step + 16 <= pairs; step += 16) {
    for (int half = 0; half < 2; ++half) {
      __m512i rows[16];
      for (int index = 0; index < 16; ++index) {
        int64_t column = half * 16 + index;
        rows[index] = column < columns_valid
                          ? _mm512_loadu_si512(weight + column * weight_stride + 2 * step)
                          : _mm512_setzero_si512();
      }
      transpose_16x16(rows);
      for (int index = 0; index < 16; ++index) {
        _mm512_store_si512(destination + (step + index) * kColumns + half * 16, rows[index]);
      }
    }
  }
  // The last pairs (and an odd last k, paired with zero) one word at a time.
  for (int column = 0; column < kColumns; ++column) {
    const uint16_t* row = weight + column * weight_stride;
    for (int64_t tail = step; tail < steps; ++tail) {
      uint32_t word = 0;
      if (column < columns_valid) {
        word = row[2 * tail];
        if (2 * tail + 1 < k_count) word |= static_cast<uint32_t>(row[2 * tail + 1]) << 16;
      }
      destination[tail * kColumns + column] = word;
    }
  }
}

void pack_f32_columns_avx512(const void* weight, DType weight_dtype, int64_t weight_stride,
                             int64_t columns_valid, int64_t k_count, void* panel) {
  constexpr int kColumns = 32;
  float* destination = static_cast<float*>(panel);
  const size_t element_bytes = weight_dtype == DType::f32 ? 4 : 2;
  const char* base = static_cast<const char*>(weight);
  // Sixteen k of one weight row, widened to f32 bits.
  auto load_row = [&](int64_t column, int64_t k) {
    const char* source = base + (column * weight_stride + k) * element_bytes;
    if (weight_dtype == DType::f32) return _mm512_loadu_si512(source);
    __m256i halves = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source));
    if (weight_dtype == DType::f16) return _mm512_castps_si512(_mm512_cvtph_ps(halves));
    return _mm512_slli_epi32(_mm512_cvtepu16_epi32(halves), 16);
  };
  int64_t k = 0;
  for (; k + 16 <= k_count; k += 16) {
    for (int half = 0; half < 2; ++half) {
      __m512i rows[16];
      for (int index = 0; index < 16; ++index) {
        int64_t column = half * 16 + index;
        rows[index] = column < columns_valid ? load_row(column, k) : _mm512_setzero_si512();
      }
      transpose_16x16(rows);
      for (int index = 0; index < 16; ++index) {
        _mm512_store_si512(destination + (k + index) * kColumns + half * 16, rows[index]);
      }
    }
  }
  pack_f32_columns_scalar(weight, weight_dtype, weight_stride, columns_valid, kColumns, k, k_count,
                          destination);
}

void gemm_bf16_12x32_avx512(int64_t steps, const void* input_panel, int64_t input_row_stride,
                            const void* weight_panel, float* c, int64_t c_stride, bool accumulate,
                            const float* bias, const void* prefetch) {
  // Input rows are bf16 (an even stride); one 32-bit word holds a k pair.
  const int64_t row_words = input_row_stride / 2;
  const int32_t* input = static_cast<const int32_t*>(input_panel);
  const __m512i* weight = static_cast<const __m512i*>(weight_panel);
  __m512 acc[kRows][2];
  load_tile(acc, c, c_stride, accumulate, bias);
  if (prefetch == nullptr) {
    multiply_bf16_steps<false>(steps, input, row_words, weight, nullptr, acc);
  } else {
    multiply_bf16_steps<true>(steps, input, row_words, weight,
                              static_cast<const char*>(prefetch), acc);
  }
  store_tile(acc, c, c_stride);
}

void gemm_f32_12x32_avx512(int64_t steps, const void* input_panel, int64_t input_row_stride,
                           const void* weight_panel, float* c, int64_t c_stride, bool accumulate,
                           const float* bias, const void* /*prefetch*/) {
  const float* input = static_cast<const float*>(input_panel);
  const float* weight = static_cast<const float*>(weight_panel);
  __m512 acc[kRows][2];
  load_tile(acc, c, c_stride, accumulate, bias);
  for (int64_t step = 0; step < steps; ++step) {
    __m512 weight_low = _mm512_load_ps(weight + 32 * step);
    __m512 weight_high = _mm512_load_ps(weight + 32 * step + 16);
#pragma GCC unroll 12
    for (int row = 0; row < kRows; ++row) {
      __m512 value = _mm512_set1_ps(input[row * input_row_stride + step]);
      acc[row][0] = _mm512_fmadd_ps(value, weight_low, acc[row][0]);
      acc[row][1] = _mm512_fmadd_ps(value, weight_high, acc[row][1]);
    }
  }
  store_tile(acc, c, c_stride);
}

void gemm_bf16_32x32_amx(int64_t steps, const void* input_panel, int64_t input_row_stride,
                         const void* weight_panel, float* c, int64_t c_stride, bool accumulate,
                         const float* bias, const void* prefetch) {
  // Tiles: 0-3 the sums of rows 16i.. by columns 16j.. (tile 2i + j), 4-5 16 input rows by 16 k
  // pairs, 6-7 16 k pairs by 16 columns (a panel's step is 32 columns x 2 bf16: 128 bytes).
  static constexpr AmxTileConfig kConfig = full_amx_tiles();
  _tile_loadconfig(&kConfig);
  const auto* input = static_cast<const char*>(input_panel);
  const int64_t input_bytes = input_row_stride * 2;
  const auto* weight = static_cast<const char*>(weight_panel);
  const auto* ahead = static_cast<const char*>(prefetch);
  const int64_t c_bytes = c_stride * 4;
  if (accumulate) {
    _tile_loadd(0, c, c_bytes);
    _tile_loadd(1, c + 16, c_bytes);
    _tile_loadd(2, c + 16 * c_stride, c_bytes);
    _tile_loadd(3, c + 16 * c_stride + 16, c_bytes);
  } else if (bias) {
    // Every row the bias: a stride of 0.
    _tile_loadd(0, bias, 0);
    _tile_loadd(1, bias + 16, 0);
    _tile_loadd(2, bias, 0);
    _tile_loadd(3, bias + 16, 0);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  int64_t step = 0;
  for (; step + 16 <= steps; step += 16) {
    if (ahead) {
      for (int line = 0; line < 32; ++line) {
        _mm_prefetch(ahead + step * 128 + 64 * line, _MM_HINT_T0);
      }
    }
    _tile_loadd(4, input + step * 4, input_bytes);
    _tile_loadd(5, input + 16 * input_bytes + step * 4, input_bytes);
    _tile_loadd(6, weight + step * 128, 128);
    _tile_loadd(7, weight + step * 128 + 64, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, c_bytes);
  _tile_stored(1, c + 16, c_bytes);
  _tile_stored(2, c + 16 * c_stride, c_bytes);
  _tile_stored(3, c + 16 * c_stride + 16, c_bytes);
  _tile_release();
  if (step == steps) return;
  // The last pairs (fewer than a tile's 16) on vdpbf16ps, 16 rows at a time.
  const auto* input_words = reinterpret_cast<const int32_t*>(input + step * 4);
  const auto* weight_steps = reinterpret_cast<const __m512i*>(weight + step * 128);
  for (int half = 0; half < 2; ++half) {
    __m512 acc[16][2];
    float* rows = c + 16 * half * c_stride;
    load_tile(acc, rows, c_stride, true, nullptr);
    multiply_bf16_steps<false, 16>(steps - step, input_words + 16 * half * (input_bytes / 4),
                                   input_bytes / 4, weight_steps, nullptr, acc);
    store_tile(acc, rows, c_stride);
  }
}

void convert_f32_to_bf16_avx512(const float* source, uint16_t* destination, int64_t count) {
  int64_t index = 0;
  for (; index + 32 <= count; index += 32) {
    __m512bh packed =
        _mm512_cvtne2ps_pbh(_mm512_loadu_ps(source + index + 16), _mm512_loadu_ps(source + index));
    _mm512_storeu_si512(destination + index, (__m512i)packed);
  }
  for (; index < count; index += 16) {
    int64_t left = count - index < 16 ? count - index : 16;
    __mmask16 mask = static_cast<__mmask16>((1u << left) - 1u);
    __m256bh packed = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, source + index));
    _mm256_mask_storeu_epi16(destination + index, mask, (__m256i)packed);
  }
}

}  // namespace fornace::cpu::kernels
