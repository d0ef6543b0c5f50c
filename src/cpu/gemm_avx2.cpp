// AVX2+FMA GEMM micro-kernel over f32 panels (6 rows x 16 columns), and its weight packing.
#include <immintrin.h>

#include "cpu/gemm_kernels.h"

namespace fornace::cpu::kernels {
namespace {

// Transposes an 8 x 8 tile of floats in place.
inline void transpose_8x8(__m256 (&rows)[8]) {
  __m256 pairs[8];
  for (int index = 0; index < 8; index += 2) {
    pairs[index] = _mm256_unpacklo_ps(rows[index], rows[index + 1]);
    pairs[index + 1] = _mm256_unpackhi_ps(rows[index], rows[index + 1]);
  }
  // quads[4 * group + j] holds, per 128-bit lane, element j of rows 4 group .. 4 group + 3.
  __m256 quads[8];
  for (int group = 0; group < 2; ++group) {
    const __m256* in = pairs + 4 * group;
    quads[4 * group + 0] = _mm256_shuffle_ps(in[0], in[2], 0x44);
    quads[4 * group + 1] = _mm256_shuffle_ps(in[0], in[2], 0xee);
    quads[4 * group + 2] = _mm256_shuffle_ps(in[1], in[3], 0x44);
    quads[4 * group + 3] = _mm256_shuffle_ps(in[1], in[3], 0xee);
  }
  for (int j = 0; j < 4; ++j) {
    rows[j] = _mm256_permute2f128_ps(quads[j], quads[4 + j], 0x20);
    rows[j + 4] = _mm256_permute2f128_ps(quads[j], quads[4 + j], 0x31);
  }
}

}  // namespace

void pack_f32_columns_avx2(const void* weight, DType weight_dtype, int64_t weight_stride,
                           int64_t columns_valid, int64_t k_count, void* panel) {
  constexpr int kColumns = 16;
  float* destination = static_cast<float*>(panel);
  const size_t element_bytes = weight_dtype == DType::f32 ? 4 : 2;
  const char* base = static_cast<const char*>(weight);
  // Eight k of one weight row, widened to f32.
  auto load_row = [&](int64_t column, int64_t k) {
    const char* source = base + (column * weight_stride + k) * element_bytes;
    if (weight_dtype == DType::f32) return _mm256_loadu_ps(reinterpret_cast<const float*>(source));
    __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(source));
    if (weight_dtype == DType::f16) return _mm256_cvtph_ps(halves);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16));
  };
  int64_t k = 0;
  for (; k + 8 <= k_count; k += 8) {
    for (int half = 0; half < 2; ++half) {
      __m256 rows[8];
      for (int index = 0; index < 8; ++index) {
        int64_t column = half * 8 + index;
        rows[index] = column < columns_valid ? load_row(column, k) : _mm256_setzero_ps();
      }
      transpose_8x8(rows);
      for (int index = 0; index < 8; ++index) {
        _mm256_store_ps(destination + (k + index) * kColumns + half * 8, rows[index]);
      }
    }
  }
  pack_f32_columns_scalar(weight, weight_dtype, weight_stride, columns_valid, kColumns, k, k_count,
                          destination);
}

void gemm_f32_6x16_avx2(int64_t steps, const void* input_panel, int64_t input_row_stride,
                        const void* weight_panel, float* c, int64_t c_stride, bool accumulate,
                        const float* bias, const void* /*prefetch*/) {
  constexpr int kRows = 6;
  const float* input = static_cast<const float*>(input_panel);
  const float* weight = static_cast<const float*>(weight_panel);
  __m256 acc[kRows][2];
  __m256 first = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  __m256 second = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int row = 0; row < kRows; ++row) {
    acc[row][0] = accumulate ? _mm256_loadu_ps(c + row * c_stride) : first;
    acc[row][1] = accumulate ? _mm256_loadu_ps(c + row * c_stride + 8) : second;
  }
  for (int64_t step = 0; step < steps; ++step) {
    __m256 weight_low = _mm256_load_ps(weight + 16 * step);
    __m256 weight_high = _mm256_load_ps(weight + 16 * step + 8);
#pragma GCC unroll 6
    for (int row = 0; row < kRows; ++row) {
      __m256 value = _mm256_broadcast_ss(input + row * input_row_stride + step);
      acc[row][0] = _mm256_fmadd_ps(value, weight_low, acc[row][0]);
      acc[row][1] = _mm256_fmadd_ps(value, weight_high, acc[row][1]);
    }
  }
#pragma GCC unroll 6
  for (int row = 0; row < kRows; ++row) {
    _mm256_storeu_ps(c + row * c_stride, acc[row][0]);
    _mm256_storeu_ps(c + row * c_stride + 8, acc[row][1]);
  }
}

}  // namespace fornace::cpu::kernels
