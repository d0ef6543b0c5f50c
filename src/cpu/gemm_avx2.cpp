// AVX2+FMA GEMM micro-kernel over f32 panels (6 rows x 16 columns).
#include <immintrin.h>

#include "cpu/gemm_kernels.h"

namespace fornace::cpu::kernels {

void gemm_f32_6x16_avx2(int64_t steps, const void* input_panel, int64_t input_row_stride,
                        const void* weight_panel, float* c, int64_t c_stride, bool accumulate,
                        const float* bias) {
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
