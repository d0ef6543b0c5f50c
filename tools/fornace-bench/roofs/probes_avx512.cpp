// AVX-512 loops behind probes.cpp: a 64-byte-load streaming sum, register-only vdpbf16ps and
// AMX tile products.
#include <immintrin.h>

#include <array>

#include "cpu/amx_tiles.h"
#include "roofs/probes_kernels.h"
#include "cpu/simd.h"  // Also silences GCC 12's false "uninitialized" warnings.

namespace fornace::roofs::kernels {

uint64_t sum_words_avx512(const uint64_t* words, int64_t count) {
  __m512i sums[8];
  for (__m512i& sum : sums) sum = _mm512_setzero_si512();
  int64_t index = 0;
  for (; index + 64 <= count; index += 64) {
    for (int lane = 0; lane < 8; ++lane) {
      sums[lane] = _mm512_add_epi64(sums[lane], _mm512_loadu_si512(words + index + 8 * lane));
    }
  }
  for (int lane = 1; lane < 8; ++lane) sums[0] = _mm512_add_epi64(sums[0], sums[lane]);
  // Summed as unsigned words: the reduce intrinsic adds as signed and may overflow.
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, sums[0]);
  uint64_t total = 0;
  for (uint64_t lane : lanes) total += lane;
  for (; index < count; ++index) total += words[index];
  return total;
}

float bf16_dot_loop_avx512(int64_t iterations) {
  constexpr int kAccumulators = 24;  // Enough to cover the instruction's latency.
  __m512 accumulators[kAccumulators];
  for (__m512& value : accumulators) value = _mm512_setzero_ps();
  __m512bh left = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  __m512bh right = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  for (int64_t iteration = 0; iteration < iterations; ++iteration) {
#pragma GCC unroll 24
    for (int index = 0; index < kAccumulators; ++index) {
      accumulators[index] = _mm512_dpbf16_ps(accumulators[index], left, right);
    }
    __asm__ volatile("" : "+v"(left));  // Keeps the loop from being folded.
  }
  __m512 total = accumulators[0];
  for (int index = 1; index < kAccumulators; ++index) {
    total = _mm512_add_ps(total, accumulators[index]);
  }
  return _mm512_reduce_add_ps(total);
}

float amx_dot_loop_avx512(int64_t iterations) {
  // Tiles 0-3 the sums, 4-5 A and 6-7 B: every tile 16 rows of 64 bytes.
  static constexpr cpu::AmxTileConfig kConfig = cpu::full_amx_tiles();
  alignas(64) static constexpr auto kOnes = [] {
    std::array<uint16_t, 16 * 32> ones{};
    ones.fill(0x3f80);  // bf16 1.0
    return ones;
  }();
  _tile_loadconfig(&kConfig);
  _tile_loadd(4, kOnes.data(), 64);
  _tile_loadd(5, kOnes.data(), 64);
  _tile_loadd(6, kOnes.data(), 64);
  _tile_loadd(7, kOnes.data(), 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t iteration = 0; iteration < iterations; ++iteration) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float sums[4][16 * 16];
  _tile_stored(0, sums[0], 64);
  _tile_stored(1, sums[1], 64);
  _tile_stored(2, sums[2], 64);
  _tile_stored(3, sums[3], 64);
  _tile_release();
  return sums[0][0] + sums[1][0] + sums[2][0] + sums[3][0];
}

}  // namespace fornace::roofs::kernels
