// AVX2 loop behind probes.cpp: register-only 256-bit FMAs, the AVX2 GEMM's arithmetic.
#include <immintrin.h>

#include "roofs/probes_kernels.h"

namespace fornace::roofs::kernels {

float fma_loop_avx2(int64_t iterations) {
  constexpr int kAccumulators = 12;  // Enough to cover the instruction's latency on two pipes.
  __m256 accumulators[kAccumulators];
  for (__m256& value : accumulators) value = _mm256_setzero_ps();
  __m256 left = _mm256_set1_ps(1.0f);
  const __m256 right = _mm256_set1_ps(1.0f);
  for (int64_t iteration = 0; iteration < iterations; ++iteration) {
#pragma GCC unroll 12
    for (int index = 0; index < kAccumulators; ++index) {
      accumulators[index] = _mm256_fmadd_ps(left, right, accumulators[index]);
    }
    __asm__ volatile("" : "+x"(left));  // Keeps the loop from being folded.
  }
  __m256 total = accumulators[0];
  for (int index = 1; index < kAccumulators; ++index) {
    total = _mm256_add_ps(total, accumulators[index]);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, total);
  float sum = 0;
  for (float lane : lanes) sum += lane;
  return sum;
}

}  // namespace fornace::roofs::kernels
