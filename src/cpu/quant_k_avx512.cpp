// AVX-512 VNNI kernels for Q4_K, Q5_K and Q6_K: levels unpacked in registers (Q4_K/Q5_K bits
// moved by gf2p8affineqb), vpdpbusd against the int8 activations, sub-block scales applied by
// vpdpwssd; and the f32 kernel.
#include <immintrin.h>

#include "cpu/prefetch.h"
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

// vpshufb indices for 32 int16 lanes: in 128-bit lane L, words 0-3 take source bytes (word & 0xFF,
// word >> 8) of first[L] and words 4-7 those of second[L] (0x80 gives a zero byte).
struct PairIndex {
  alignas(64) uint16_t words[32];
};
constexpr PairIndex pair_index(const uint16_t (&first)[4], const uint16_t (&second)[4]) {
  PairIndex index{};
  for (int lane = 0; lane < 4; ++lane) {
    for (int w = 0; w < 4; ++w) {
      index.words[8 * lane + w] = first[lane];
      index.words[8 * lane + 4 + w] = second[lane];
    }
  }
  return index;
}
inline __m512i load_index(const PairIndex& index) { return _mm512_load_si512(index.words); }

// Byte j zero-extended to a word, as a pair_index entry.
constexpr uint16_t byte_entry(int j) { return static_cast<uint16_t>(0x8000 | j); }
// Word w, as a pair_index entry.
constexpr uint16_t word_entry(int w) { return static_cast<uint16_t>((2 * w + 1) << 8 | 2 * w); }

// A gf2p8affineqb matrix that sets bit `to[i]` of each byte from bit `from[i]` (i < count) and
// clears the others: output bit j is the parity of the input bits in matrix byte 7 - j.
constexpr uint64_t bit_moves(const int (&from)[4], const int (&to)[4], int count) {
  uint64_t matrix = 0;
  for (int i = 0; i < count; ++i) matrix |= uint64_t{1} << (8 * (7 - to[i]) + from[i]);
  return matrix;
}
constexpr uint64_t kLowNibble = bit_moves({0, 1, 2, 3}, {0, 1, 2, 3}, 4);
constexpr uint64_t kHighNibble = bit_moves({4, 5, 6, 7}, {0, 1, 2, 3}, 4);
// Bit `bit` of each byte to bit 4, the others cleared.
constexpr uint64_t fifth_bit_from(int bit) { return bit_moves({bit}, {4}, 1); }

// `low` in the four qwords of the lower 256 bits, `high` in those of the upper ones.
inline __m512i matrix_halves(uint64_t low, uint64_t high) {
  return _mm512_inserti64x4(_mm512_set1_epi64(static_cast<int64_t>(low)),
                            _mm256_set1_epi64x(static_cast<int64_t>(high)), 1);
}

// The bytes of `source` moved bit by bit by the matrices of each half (matrix_halves).
inline __m512i move_bits(__m512i source, __m512i matrices) {
  return _mm512_gf2p8affine_epi64_epi8(source, matrices, 0);
}

// The 64 levels of elements 64g..64g+63 of a Q4_K/Q5_K block from its 32 bytes of nibbles.
inline __m512i nibbles_of_group(const uint8_t* qs, int g) {
  return move_bits(broadcast_32_bytes(qs + 32 * g), matrix_halves(kLowNibble, kHighNibble));
}

// What one weight block contributes: the sub-block scales as int16 pairs, one register per pair
// of 64-element groups, laid out as the packed products of that pair (see accumulate_block); and
// its mins (Q4_K/Q5_K, 8 int16) or offsets (Q6_K, -32 * scale per 16 elements as 16 int16).
struct RowBlock {
  __m512i scales[2];
  __m256i mins_or_offsets;
};

// Bytes 0-7 the eight 6-bit scales and bytes 8-15 the mins of a Q4_K/Q5_K block, unpacked with
// vector ops from the 12 bytes at `packed` (16 are read: the block continues past them).
inline __m128i scale_and_min_bytes(const uint8_t* packed) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  // Low parts: scales 0-3, the nibbles of scales 4-7, mins 0-3, the nibbles of mins 4-7.
  const __m128i low = _mm_shuffle_epi8(raw, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8,
                                                          9, 10, 11));
  // Top 2 bits of scales 4-7 (bytes 0-3) and mins 4-7 (bytes 4-7), in bits 6-7.
  const __m128i high = _mm_shuffle_epi8(raw, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1,
                                                           -1, 4, 5, 6, 7));
  const __m128i low_bits = _mm_and_si128(_mm_srlv_epi32(low, _mm_setr_epi32(0, 0, 0, 4)),
                                         _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f,
                                                        0x0f0f0f0f));
  return _mm_ternarylogic_epi32(low_bits, _mm_srli_epi32(high, 2), _mm_set1_epi8(0x30), 0xF8);
}

// Group g's products: sub-block 2g in 128-bit lanes 0-1, 2g + 1 in lanes 2-3.
constexpr PairIndex kScalePairs[2] = {
    pair_index({byte_entry(0), byte_entry(0), byte_entry(1), byte_entry(1)},
               {byte_entry(2), byte_entry(2), byte_entry(3), byte_entry(3)}),
    pair_index({byte_entry(4), byte_entry(4), byte_entry(5), byte_entry(5)},
               {byte_entry(6), byte_entry(6), byte_entry(7), byte_entry(7)})};
// Q6_K group k's products: sub-block 4k + L in 128-bit lane L (words 4k.. of the source lane).
constexpr PairIndex kSixBitScalePair = pair_index(
    {word_entry(0), word_entry(1), word_entry(2), word_entry(3)},
    {word_entry(4), word_entry(5), word_entry(6), word_entry(7)});

template <typename Block>
inline void prepare_scaled_min(const Block& block, RowBlock& row) {
  const __m128i bytes = scale_and_min_bytes(block.scales);
  const __m512i spread = _mm512_broadcast_i32x4(bytes);
  for (int pair = 0; pair < 2; ++pair) {
    row.scales[pair] = _mm512_shuffle_epi8(spread, load_index(kScalePairs[pair]));
  }
  row.mins_or_offsets = _mm256_castsi128_si256(_mm_cvtepu8_epi16(_mm_unpackhi_epi64(bytes, bytes)));
}

inline void prepare(const BlockQ4K& block, RowBlock& row) { prepare_scaled_min(block, row); }
inline void prepare(const BlockQ5K& block, RowBlock& row) { prepare_scaled_min(block, row); }
inline void prepare(const BlockQ6K& block, RowBlock& row) {
  const __m256i scales16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)));
  // Scales 0-7 (groups 0-1) and 8-15 (groups 2-3) in every 128-bit lane.
  const __m512i wide = _mm512_castsi256_si512(scales16);
  const __m512i index = load_index(kSixBitScalePair);
  row.scales[0] = _mm512_shuffle_epi8(_mm512_shuffle_i32x4(wide, wide, 0x00), index);
  row.scales[1] = _mm512_shuffle_epi8(_mm512_shuffle_i32x4(wide, wide, 0x55), index);
  row.mins_or_offsets = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(scales16, 5));
}

// d and dmin (Q6_K: d and 0) of a block as floats in lanes 0 and 1.
inline __m128 block_factors(const BlockQ4K& block) {
  return _mm_cvtph_ps(_mm_cvtsi32_si128(block.d | block.dmin << 16));
}
inline __m128 block_factors(const BlockQ5K& block) {
  return _mm_cvtph_ps(_mm_cvtsi32_si128(block.d | block.dmin << 16));
}
inline __m128 block_factors(const BlockQ6K& block) {
  return _mm_cvtph_ps(_mm_cvtsi32_si128(block.d));
}

// The levels of elements 64k..64k+63, as unsigned bytes.
inline __m512i levels_of(const BlockQ4K& block, int k) { return nibbles_of_group(block.qs, k); }

inline __m512i levels_of(const BlockQ5K& block, int k) {
  // Bit 2k of qh[i] goes to bit 4 of element i (lower half), bit 2k + 1 to element 32 + i.
  const __m512i fifth = move_bits(broadcast_32_bytes(block.qh),
                                  matrix_halves(fifth_bit_from(2 * k), fifth_bit_from(2 * k + 1)));
  return _mm512_or_si512(nibbles_of_group(block.qs, k), fifth);
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

// Per activation row: f32 lanes summing to the row's dot, d-scaled (two chains, alternate
// blocks) and, for Q4_K/Q5_K, dmin-scaled mins, reduced once at the end.
template <int Columns>
struct Accumulators {
  __m512 sums[2][Columns];
  __m128 mins[Columns];
};

// Adds block `b` of one weight row against Columns activation rows into chain `Chain`.
template <typename Block, int Columns, int Chain>
inline void accumulate_block(const Block& block, const char* activations,
                             int64_t activation_row_bytes, int64_t b, Accumulators<Columns>& acc) {
  constexpr bool kHasMins = has_mins<Block>;
  RowBlock row;
  prepare(block, row);
  const __m128 factors = block_factors(block);
  const ActivationBlock* a[Columns];
  __m512i dots[Columns];
  for (int c = 0; c < Columns; ++c) {
    a[c] = reinterpret_cast<const ActivationBlock*>(activations + c * activation_row_bytes) + b;
    if constexpr (kHasMins) {
      dots[c] = _mm512_setzero_si512();
    } else {
      const __m512i sums16 = _mm512_zextsi256_si512(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c]->sums16)));
      dots[c] = _mm512_dpwssd_epi32(_mm512_setzero_si512(),
                                    _mm512_zextsi256_si512(row.mins_or_offsets), sums16);
    }
  }
  // Groups 2p and 2p + 1: their int32 products fit int16 (at most 4 * 63 * 127), so one vpackssdw
  // joins them and one vpdpwssd applies both groups' scales.
  for (int pair = 0; pair < 2; ++pair) {
    const __m512i even = levels_of(block, 2 * pair);
    const __m512i odd = levels_of(block, 2 * pair + 1);
    for (int c = 0; c < Columns; ++c) {
      const int8_t* q = a[c]->q + 128 * pair;
      const __m512i even_products =
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), even, _mm512_loadu_si512(q));
      const __m512i odd_products =
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), odd, _mm512_loadu_si512(q + 64));
      dots[c] = _mm512_dpwssd_epi32(dots[c], _mm512_packs_epi32(even_products, odd_products),
                                    row.scales[pair]);
    }
  }
  for (int c = 0; c < Columns; ++c) {
    // Lane 0: d * activation scale; lane 1: dmin * activation scale.
    const __m128 scaled = _mm_mul_ps(factors, _mm_broadcast_ss(&a[c]->scale));
    acc.sums[Chain][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[c]),
                                         _mm512_broadcastss_ps(scaled), acc.sums[Chain][c]);
    if constexpr (kHasMins) {
      // The int16 pairs zero in the upper lanes of the 256-bit zero-extension.
      const __m128i min_dots = _mm_madd_epi16(
          _mm256_castsi256_si128(row.mins_or_offsets),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(a[c]->sums32)));
      acc.mins[c] = _mm_fmadd_ps(_mm_cvtepi32_ps(min_dots), _mm_shuffle_ps(scaled, scaled, 0x55),
                                 acc.mins[c]);
    }
  }
}

// The dot of column c: both chains of d-scaled sums less the dmin-scaled mins.
template <typename Block, int Columns>
inline float total_of(const Accumulators<Columns>& acc, int c) {
  float total = _mm512_reduce_add_ps(_mm512_add_ps(acc.sums[0][c], acc.sums[1][c]));
  if constexpr (has_mins<Block>) {
    const __m128 m = acc.mins[c];
    const __m128 pairs = _mm_add_ps(m, _mm_movehl_ps(m, m));
    total -= _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
  }
  return total;
}

template <int Columns>
inline void zero(Accumulators<Columns>& acc) {
  for (int c = 0; c < Columns; ++c) {
    acc.sums[0][c] = acc.sums[1][c] = _mm512_setzero_ps();
    acc.mins[c] = _mm_setzero_ps();
  }
}

// out[c * out_stride] for one weight row and Columns activation rows.
template <typename Block, int Columns>
struct RowDot {
  static void run(const Block* weights, const char* activations, int64_t activation_row_bytes,
                  int64_t blocks, float* out, int64_t out_stride) {
    Accumulators<Columns> acc;
    zero(acc);
    // micro-quant-k, ffn_down streamed, 1 column: Q4_K 154-169 -> 86-92 us, Q6_K 209 -> 105 us
    // (Zen 5, into L1 16 KiB ahead); on Intel model 167 into L2 4 KiB ahead (now 3, prefetch.h)
    // against L1 16 KiB: 10.4-10.9 -> 11.4-13.0 GB/s for Q4_K, Q5_K and Q6_K.
    const StreamPrefetch prefetch = stream_prefetch(Isa::avx512, 16 << 10);
    int64_t b = 0;
    for (; b + 1 < blocks; b += 2) {
      prefetch.lines<2 * sizeof(Block)>(weights + b);
      accumulate_block<Block, Columns, 0>(weights[b], activations, activation_row_bytes, b, acc);
      accumulate_block<Block, Columns, 1>(weights[b + 1], activations, activation_row_bytes, b + 1,
                                          acc);
    }
    if (b < blocks) {
      accumulate_block<Block, Columns, 0>(weights[b], activations, activation_row_bytes, b, acc);
    }
    for (int c = 0; c < Columns; ++c) out[c * out_stride] = total_of<Block>(acc, c);
  }
};

// One row's running dot for StreamRowDotOf, even and odd blocks in chains of their own.
template <typename Block>
struct RowSum {
  static constexpr Isa kIsa = Isa::avx512;
  Accumulators<1> acc;
  RowSum() { zero(acc); }
  void add(const Block& block, const char* activations, int64_t b) {
    if (b % 2 == 0) {
      accumulate_block<Block, 1, 0>(block, activations, 0, b, acc);
    } else {
      accumulate_block<Block, 1, 1>(block, activations, 0, b, acc);
    }
  }
  float total() const { return total_of<Block>(acc, 0); }
};
template <typename Block>
using StreamRowDot = StreamRowDotOf<Block, RowSum<Block>>;

// Stores each kWidth values of a block as bf16 (nearest even) at their element.
struct WidenToBf16 {
  uint16_t* out;
  void consume(__m512i levels, int element, float scale, float offset) {
    const __m512 weights = f32_kernel::block_values(levels, scale, offset);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + element),
                        (__m256i)_mm512_cvtneps_pbh(weights));
  }
};

}  // namespace

FORNACE_KQUANT_ENTRY_POINTS(avx512, StreamRowDot)

template <BlockType Type>
void widen_row_bf16_avx512(const void* blocks, uint16_t* out, int64_t n) {
  f32_kernel::widen_row<BlockOf<Type>, WidenToBf16>(blocks, out, n);
}
template void widen_row_bf16_avx512<BlockType::q4_k>(const void*, uint16_t*, int64_t);
template void widen_row_bf16_avx512<BlockType::q5_k>(const void*, uint16_t*, int64_t);
template void widen_row_bf16_avx512<BlockType::q6_k>(const void*, uint16_t*, int64_t);

template <BlockType Type>
void widen_row_f32_avx512(const void* blocks, float* out, int64_t n) {
  f32_kernel::widen_row<BlockOf<Type>, f32_kernel::WidenToF32>(blocks, out, n);
}
template void widen_row_f32_avx512<BlockType::q4_k>(const void*, float*, int64_t);
template void widen_row_f32_avx512<BlockType::q5_k>(const void*, float*, int64_t);
template void widen_row_f32_avx512<BlockType::q6_k>(const void*, float*, int64_t);

}  // namespace fornace::cpu::kquant
