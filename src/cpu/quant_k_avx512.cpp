// AVX-512 VNNI kernels for Q4_K, Q5_K and Q6_K: levels unpacked in registers, vpdpbusd against
// the int8 activations, sub-block scales applied by vpdpwssd; and the f32 kernel.
#include <immintrin.h>

#include "cpu/quant_k_blocks.h"
#include "cpu/quant_k_f32_kernel.inl"

namespace fornace::cpu::kquant {
namespace {

inline __m512i bytes_of(uint8_t value) { return _mm512_set1_epi8(static_cast<char>(value)); }

// 16-bit lanes holding `low` in the lower 256 bits and `high` in the upper ones.
inline __m512i halves_of(int16_t low, int16_t high) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(low)), _mm256_set1_epi16(high),
                            1);
}

// 32 bytes in both halves of a register.
inline __m512i broadcast_32_bytes(const uint8_t* source) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(source)));
}

// a | (b & c), bitwise.
inline __m512i or_masked(__m512i a, __m512i b, __m512i c) {
  return _mm512_ternarylogic_epi32(a, b, c, 0xF8);
}

// The 64 levels of elements 64g..64g+63 of a Q4_K/Q5_K block from its 32 bytes of nibbles.
inline __m512i nibbles_of_group(const uint8_t* qs, int g) {
  return _mm512_and_si512(_mm512_srlv_epi16(broadcast_32_bytes(qs + 32 * g), halves_of(0, 4)),
                          bytes_of(0x0F));
}

// What one weight row contributes per block: the sub-block scales as 32-bit lanes (scale, 0),
// one register per 64-element group, for vpdpwssd; its d; and its mins or offset.
struct RowBlock {
  __m512i scales[4];
  __m512i mins;    // Q4_K/Q5_K: the 8 mins as int16 in the lowest 128 bits.
  __m512i offset;  // Q6_K: -32 * scale per 16 elements as int16, in the lower 256 bits.
  float d;
  float dmin;
};

// Lanes 0-7 take sub-block 2g's scale and lanes 8-15 sub-block 2g + 1's, from 8 scales in lanes.
inline void spread_scales_by_32(uint64_t scale_bytes, __m512i (&scales)[4]) {
  const __m512i scales32 =
      _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(scale_bytes)));
  for (int g = 0; g < 4; ++g) {
    const __m512i index = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * g)),
                                             _mm256_set1_epi32(2 * g + 1), 1);
    scales[g] = _mm512_permutexvar_epi32(index, scales32);
  }
}

template <typename Block>
inline void prepare_scaled_min(const Block& block, RowBlock& row) {
  const ScalesAndMins packed = unpack_scales_and_mins(block.scales);
  spread_scales_by_32(packed.scales, row.scales);
  row.mins = _mm512_zextsi128_si512(
      _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(packed.mins))));
  row.d = _cvtsh_ss(block.d);
  row.dmin = _cvtsh_ss(block.dmin);
}

inline void prepare(const BlockQ4K& block, RowBlock& row) { prepare_scaled_min(block, row); }
inline void prepare(const BlockQ5K& block, RowBlock& row) { prepare_scaled_min(block, row); }
inline void prepare(const BlockQ6K& block, RowBlock& row) {
  const __m256i scales16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)));
  // Zero-extended 16-bit scales: the upper half of each 32-bit lane is 0 for vpdpwssd.
  const __m512i scales32 = _mm512_cvtepu16_epi32(scales16);
  for (int k = 0; k < 4; ++k) {
    // Lanes 4i..4i+3 (16 elements) take the scale of sub-block 4k + i.
    const __m512i index = _mm512_cvtepu8_epi32(_mm_set_epi8(
        4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 3, 4 * k + 2, 4 * k + 2, 4 * k + 2, 4 * k + 2,
        4 * k + 1, 4 * k + 1, 4 * k + 1, 4 * k + 1, 4 * k, 4 * k, 4 * k, 4 * k));
    row.scales[k] = _mm512_permutexvar_epi32(index, scales32);
  }
  row.offset = _mm512_zextsi256_si512(
      _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(scales16, 5)));
  row.d = _cvtsh_ss(block.d);
}

// The levels of elements 64k..64k+63, as unsigned bytes.
inline __m512i levels_of(const BlockQ4K& block, int k) { return nibbles_of_group(block.qs, k); }

inline __m512i levels_of(const BlockQ5K& block, int k) {
  // Bit 2k of qh[i] goes to bit 4 of element i (lower half), bit 2k + 1 to element 32 + i.
  const __m512i high = broadcast_32_bytes(block.qh);
  const __m512i moved = k < 2 ? _mm512_sllv_epi16(high, halves_of(4 - 2 * k, 3 - 2 * k))
                              : _mm512_srlv_epi16(high, halves_of(2 * k - 4, 2 * k - 3));
  return or_masked(nibbles_of_group(block.qs, k), moved, bytes_of(0x10));
}

inline __m512i levels_of(const BlockQ6K& block, int k) {
  const int h = k / 2;
  const __m512i low = _mm512_loadu_si512(block.ql + 64 * h);
  const __m512i high = broadcast_32_bytes(block.qh + 32 * h);
  // Elements 128h + 0..63 take low nibbles and qh bits 0-1 (lower half) or 2-3 (upper half);
  // elements 128h + 64..127 take high nibbles and bits 4-5 or 6-7. All land in bits 4-5.
  const __m512i nibbles =
      _mm512_and_si512(k % 2 == 0 ? low : _mm512_srli_epi16(low, 4), bytes_of(0x0F));
  const __m512i moved = k % 2 == 0 ? _mm512_sllv_epi16(high, halves_of(4, 2))
                                   : _mm512_srlv_epi16(high, halves_of(0, 2));
  return or_masked(nibbles, moved, bytes_of(0x30));
}

// out[c * out_stride] for one weight row and Columns activation rows.
template <typename Block, int Columns>
struct RowDot {
  static void run(const Block* weights, const char* activations, int64_t activation_row_bytes,
                  int64_t blocks, float* out, int64_t out_stride) {
    constexpr bool kHasMins = has_mins<Block>;
    __m512 sums[Columns];
    for (__m512& sum : sums) sum = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const Block& block = weights[b];
      RowBlock row;
      prepare(block, row);
      const ActivationBlock* a[Columns];
      __m512i dots[Columns];
      __m512i min_dots[Columns];  // Q4_K/Q5_K: sum(min * a) per 32 elements, in lanes 0-3.
      for (int c = 0; c < Columns; ++c) {
        a[c] = reinterpret_cast<const ActivationBlock*>(activations + c * activation_row_bytes) + b;
        if constexpr (kHasMins) {
          dots[c] = _mm512_setzero_si512();
          min_dots[c] = _mm512_madd_epi16(
              row.mins, _mm512_zextsi128_si512(
                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(a[c]->sums32))));
        } else {
          const __m512i sums16 = _mm512_zextsi256_si512(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c]->sums16)));
          dots[c] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), row.offset, sums16);
        }
      }
      for (int k = 0; k < 4; ++k) {
        const __m512i levels = levels_of(block, k);
        for (int c = 0; c < Columns; ++c) {
          const __m512i products = _mm512_dpbusd_epi32(_mm512_setzero_si512(), levels,
                                                       _mm512_loadu_si512(a[c]->q + 64 * k));
          dots[c] = _mm512_dpwssd_epi32(dots[c], products, row.scales[k]);
        }
      }
      for (int c = 0; c < Columns; ++c) {
        const __m512 activation_scale = _mm512_set1_ps(a[c]->scale);
        sums[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[c]),
                                  _mm512_mul_ps(_mm512_set1_ps(row.d), activation_scale), sums[c]);
        if constexpr (kHasMins) {
          sums[c] =
              _mm512_fnmadd_ps(_mm512_cvtepi32_ps(min_dots[c]),
                               _mm512_mul_ps(_mm512_set1_ps(row.dmin), activation_scale), sums[c]);
        }
      }
    }
    for (int c = 0; c < Columns; ++c) out[c * out_stride] = _mm512_reduce_add_ps(sums[c]);
  }
};

}  // namespace

FORNACE_KQUANT_ENTRY_POINTS(avx512)

}  // namespace fornace::cpu::kquant
