// AVX-512 kernels of the legacy block formats: vpdpbusd on pairs of blocks unpacked in registers,
// f32 FMA on blocks widened in registers, and vector activation rounding.
#include <immintrin.h>

#include <array>
#include <cstring>

#include "cpu/prefetch.h"
#include "cpu/quant_legacy_kernels.h"
#include "cpu/simd.h"  // Also silences GCC 12's false "uninitialized" warnings.

namespace fornace::cpu::legacy::avx512 {
namespace {

inline __m128i load_128(const uint8_t* source) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(source));
}

inline __m256i load_256(const uint8_t* source) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source));
}

// A quad of nibble blocks (at most 32 bytes each) is read as two block pairs, each block at the
// start of a 256-bit half: blocks 0 and 1 in the first register, 2 and 3 in the second. 512-bit
// loads that straddle cache lines, as loads of a whole quad would, run far slower on Zen 5.
// vpermt2w then picks 16-bit words out of the pair (index < 32: the first register), every
// field sitting at an even offset.
using WordIndex = std::array<int16_t, 32>;

// For each of 32 words: the index of the word at byte(word) of block block(word) in the pair.
template <typename Block, typename Byte>
constexpr WordIndex pair_index(Block block, Byte byte) {
  WordIndex index{};
  for (int word = 0; word < 32; ++word)
    index[word] = static_cast<int16_t>(16 * block(word) + byte(word) / 2);
  return index;
}

// The word indices of a nibble format: its 16 nibble bytes, block k in 128-bit lane k; its f16
// scales (words 0-15) and mins (words 16-31), 4 per block; and its 32-bit fifth bits at the
// start of lane k.
template <const BlockLayout& Layout>
struct PairIndex {
  static_assert(Layout.bytes <= 32 && Layout.values_at % 2 == 0);
  static constexpr WordIndex kValues =
      pair_index([](int word) { return word / 8; },
                 [](int word) { return Layout.values_at + 2 * (word % 8); });
  static constexpr WordIndex kScales =
      pair_index([](int word) { return word % 16 / 4; },
                 [](int word) { return word < 16 || !has_min(Layout) ? 0 : Layout.min_at; });
  static constexpr WordIndex kHighBits =
      pair_index([](int word) { return word / 8; },
                 [](int word) { return Layout.high_bits_at + 2 * (word % 2); });
};

inline __m512i load_index(const WordIndex& index) { return _mm512_loadu_si512(index.data()); }

// The unsigned weights q (Q8_0: value + 128) of a quad, laid out as the activation quads: `low`
// holds elements 0-15 of blocks 0-3, `high` elements 16-31; and the blocks' scales and mins as
// f32 lanes, 4 per block.
struct QuadWeights {
  __m512i low;
  __m512i high;
  __m512 scales;
  __m512 mins;
};

// Four f16 values (bits 16i to 16i + 15 of `bits`) as f32 lanes, 4 per value.
inline __m512 lanes_of_four_halves(uint64_t bits) {
  const __m128 four = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits)));
  const __m512i lanes = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(four));
}

// The f16 scales of a quad's 4 stored blocks (`bytes` apart) as f32 lanes, 4 per block.
inline __m512 scale_lanes(const uint8_t* first, size_t bytes) {
  uint64_t bits = 0;
  for (int index = 0; index < 4; ++index) {
    bits |= static_cast<uint64_t>(load_u16(first + index * bytes)) << (16 * index);
  }
  return lanes_of_four_halves(bits);
}

// The 4 adjacent f16 values of an interleaved quad's scales (or mins) as f32 lanes, 4 per block.
inline __m512 adjacent_scale_lanes(const uint8_t* scales) {
  uint64_t bits;
  std::memcpy(&bits, scales, sizeof bits);
  return lanes_of_four_halves(bits);
}

// ScalarMasks: the fifth bits' masks from general registers (pext), which leaves the vector
// pipes to the products of several columns; else from vector shuffles (faster for one column).
template <const BlockLayout& Layout, bool ScalarMasks>
inline QuadWeights unpack_quad(const uint8_t* quad) {
  QuadWeights q;
  if constexpr (Layout.interleaved) {
    // Every field loads whole (InterleavedQuad); Q8_0's values flipped to value + 128; a nibble
    // format's q = (nibble & 0x0f) + 16 where the fifth bit is set.
    using Quad = InterleavedQuad<Layout>;
    q.scales = adjacent_scale_lanes(quad + Quad::kScalesAt);
    if constexpr (Layout.bits == 8) {
      const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
      q.low = _mm512_xor_si512(_mm512_loadu_si512(quad), flip);
      q.high = _mm512_xor_si512(_mm512_loadu_si512(quad + 64), flip);
      return q;
    }
    const __m512i packed = _mm512_loadu_si512(quad);
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    q.low = _mm512_and_si512(packed, nibble);
    q.high = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
    if constexpr (Layout.bits == 5) {
      // The plane in every lane; lane k tests bit k (elements 0-15 of block k) and bit 4 + k.
      const __m512i plane = _mm512_broadcast_i32x4(load_128(quad + Quad::kFifthBitsAt));
      const __m512i low_bit =
          _mm512_set_epi32(0x08080808, 0x08080808, 0x08080808, 0x08080808, 0x04040404, 0x04040404,
                           0x04040404, 0x04040404, 0x02020202, 0x02020202, 0x02020202, 0x02020202,
                           0x01010101, 0x01010101, 0x01010101, 0x01010101);
      const __m512i fifth = _mm512_set1_epi8(16);
      q.low = _mm512_mask_add_epi8(q.low, _mm512_test_epi8_mask(plane, low_bit), q.low, fifth);
      q.high = _mm512_mask_add_epi8(
          q.high, _mm512_test_epi8_mask(plane, _mm512_slli_epi32(low_bit, 4)), q.high, fifth);
    }
    if constexpr (has_min(Layout)) q.mins = adjacent_scale_lanes(quad + Quad::kMinsAt);
    return q;
  } else if constexpr (Layout.bits == 8) {
    // Each block's 32 values in a 256-bit half, then their 128-bit halves interleaved.
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const uint8_t* values = quad + Layout.values_at;
    const __m512i pair01 = _mm512_inserti64x4(_mm512_castsi256_si512(load_256(values)),
                                              load_256(values + Layout.bytes), 1);
    const __m512i pair23 =
        _mm512_inserti64x4(_mm512_castsi256_si512(load_256(values + 2 * Layout.bytes)),
                           load_256(values + 3 * Layout.bytes), 1);
    q.low = _mm512_xor_si512(_mm512_shuffle_i64x2(pair01, pair23, 0x88), flip);
    q.high = _mm512_xor_si512(_mm512_shuffle_i64x2(pair01, pair23, 0xdd), flip);
    q.scales = scale_lanes(quad, Layout.bytes);
    return q;
  } else {
    using Index = PairIndex<Layout>;
    // The last block's load stops at the quad's end, so that no load runs past a row.
    const __mmask32 last_block = static_cast<__mmask32>((uint64_t{1} << Layout.bytes) - 1);
    const __m512i pair01 = _mm512_inserti64x4(_mm512_castsi256_si512(load_256(quad)),
                                              load_256(quad + Layout.bytes), 1);
    const __m512i pair23 =
        _mm512_inserti64x4(_mm512_castsi256_si512(load_256(quad + 2 * Layout.bytes)),
                           _mm256_maskz_loadu_epi8(last_block, quad + 3 * Layout.bytes), 1);
    const __m512i halves = _mm512_permutex2var_epi16(pair01, load_index(Index::kScales), pair23);
    q.scales = _mm512_cvtph_ps(_mm512_castsi512_si256(halves));
    if constexpr (has_min(Layout)) q.mins = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(halves, 1));
    const __m512i packed = _mm512_permutex2var_epi16(pair01, load_index(Index::kValues), pair23);
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    const __m512i shifted = _mm512_srli_epi16(packed, 4);
    if constexpr (Layout.bits == 5) {
      // Byte b of `low` takes bit b % 16 of its block's fifth bits, of `high` bit 16 + b % 16;
      // then 16 or 0 is or-ed in (ternary logic: q = (nibbles & 0x0f) | fifth).
      __mmask64 low_set, high_set;
      if constexpr (ScalarMasks) {
        // Gathered by pext from two blocks' bits at a time.
        auto pair_bits = [quad](int first) {
          return static_cast<uint64_t>(
                     load_u32(quad + first * Layout.bytes + Layout.high_bits_at)) |
                 static_cast<uint64_t>(
                     load_u32(quad + (first + 1) * Layout.bytes + Layout.high_bits_at))
                     << 32;
        };
        const uint64_t bits01 = pair_bits(0);
        const uint64_t bits23 = pair_bits(2);
        constexpr uint64_t kLowHalves = 0x0000ffff0000ffff;
        low_set = _pext_u64(bits01, kLowHalves) | _pext_u64(bits23, kLowHalves) << 32;
        high_set = _pext_u64(bits01, ~kLowHalves) | _pext_u64(bits23, ~kLowHalves) << 32;
      } else {
        // The byte that holds each bit spread over 8 lanes, then tested.
        const __m512i bits =
            _mm512_permutex2var_epi16(pair01, load_index(Index::kHighBits), pair23);
        const __m512i low_bytes = _mm512_set4_epi64(0x0101010101010101, 0, 0x0101010101010101, 0);
        const __m512i high_bytes = _mm512_set4_epi64(0x0303030303030303, 0x0202020202020202,
                                                     0x0303030303030303, 0x0202020202020202);
        const __m512i bit = _mm512_set1_epi64(static_cast<long long>(0x8040201008040201));
        low_set = _mm512_test_epi8_mask(_mm512_shuffle_epi8(bits, low_bytes), bit);
        high_set = _mm512_test_epi8_mask(_mm512_shuffle_epi8(bits, high_bytes), bit);
      }
      const __m512i fifth = _mm512_set1_epi8(16);
      // 0xea: a & b | c.
      q.low =
          _mm512_ternarylogic_epi32(packed, nibble, _mm512_maskz_mov_epi8(low_set, fifth), 0xea);
      q.high =
          _mm512_ternarylogic_epi32(shifted, nibble, _mm512_maskz_mov_epi8(high_set, fifth), 0xea);
    } else {
      q.low = _mm512_and_si512(packed, nibble);
      q.high = _mm512_and_si512(shifted, nibble);
    }
    return q;
  }
}

// Decode prefetches the weight stream into L1 this many bytes ahead on Zen 5 (one row from
// memory: about +10 % over the hardware prefetchers alone; 1-4 KiB ahead was slower).
constexpr int kPrefetchDistance = 8192;

// The lane sums of a, b, c and d, in that order.
inline __m128 reduce_four(__m512 a, __m512 b, __m512 c, __m512 d) {
  // 256-bit halves added: ab holds a in 128-bit lanes 0 and 1, b in 2 and 3; cd likewise.
  const __m512 ab =
      _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
  const __m512 cd =
      _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xee));
  // Then 128-bit lanes added: 128-bit lane k holds 4 partial sums of the k-th of a, b, c, d.
  const __m512 all =
      _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xdd));
  // Within each 128-bit lane: pairs, then halves.
  const __m512 pairs = _mm512_add_ps(all, _mm512_permute_ps(all, 0xb1));
  const __m512 sums = _mm512_add_ps(pairs, _mm512_permute_ps(pairs, 0x4e));
  const __m512i first_lanes = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(first_lanes, sums));
}

struct Lanes {
  static constexpr Isa kIsa = Isa::avx512;
  static constexpr int kRowsPerPass = 4;
  using Vector = __m512;
  static Vector zero() { return _mm512_setzero_ps(); }
  static float sum(Vector value) { return _mm512_reduce_add_ps(value); }
  static void sum_four(const Vector (&sums)[4], float* out) {
    _mm_storeu_ps(out, reduce_four(sums[0], sums[1], sums[2], sums[3]));
  }
};
template <int Rows, int Columns>
using TileBase = TileState<Lanes, Rows, Columns>;

// Integer dot products of Rows weight rows with Columns activation rows, a quad of blocks per
// step: per 32-bit lane, sum = correction + unsigned q . activation q (two vpdpbusd), then f32
// lanes accumulate sum x weight scale x activation scale (plus weight min x the activation's
// scaled sum). A single row and column (decode) runs two quads per step into chains of their own
// (and the min's share into two more), so that no FMA waits on the one before.
template <const BlockLayout& Layout, int Rows, int Columns>
class IntegerTile : public TileBase<Rows, Columns> {
  static constexpr bool kChained = Rows * Columns == 1;
  static constexpr int kChains = kChained ? (has_min(Layout) ? 4 : 2) : 1;

 public:
  using TileBase<Rows, Columns>::TileBase;

  // With 4 rows, each column's 4 sums reduce together into the 4 adjacent outputs: fewer
  // shuffles than 4 reductions, which count at short rows (896 wide: 7 quads a tile).
  void store(float* out, int64_t out_stride) const {
    if constexpr (Rows != 4) {
      TileBase<Rows, Columns>::store(out, out_stride);
    } else {
      for (int column = 0; column < Columns; ++column) {
        _mm_storeu_ps(out + column * out_stride,
                      reduce_four(this->sums_[0][column], this->sums_[1][column],
                                  this->sums_[2][column], this->sums_[3][column]));
      }
    }
  }

  void run(int64_t n) {
    constexpr size_t kQuadStride = kQuadBlocks * Layout.bytes;
    auto step = [this](const uint8_t* first, size_t row_stride, int64_t block) {
      this->step(first, row_stride, block / kQuadBlocks, 0);
    };
    // Two quads at a time while two fit, each row's stream prefetched ahead.
    const StreamPrefetch prefetch = stream_prefetch(Isa::avx512, kPrefetchDistance);
    auto pair_step = [this, prefetch](const uint8_t* first, size_t row_stride, int64_t block) {
      for (int row = 0; row < Rows; ++row) {
        prefetch.lines<2 * kQuadStride>(first + row * row_stride);
      }
      this->step(first, row_stride, block / kQuadBlocks, 0);
      this->step(first + kQuadStride, row_stride, block / kQuadBlocks + 1, kChained ? 1 : 0);
    };
    if constexpr (kChained) {
      for (auto& chain : chains_) chain = _mm512_setzero_ps();
    }
    this->template run_step_pairs<kQuadBlocks, Layout.bytes>(n, pair_step, step);
    if constexpr (kChained) {
      __m512& sum = this->sums_[0][0];
      for (const __m512& chain : chains_) sum = _mm512_add_ps(sum, chain);
    }
  }

 private:
  void step(const uint8_t* first, size_t row_stride, int64_t quad_index, int chain) {
    QuadWeights q[Rows];
    for (int row = 0; row < Rows; ++row)
      q[row] = unpack_quad<Layout, !kChained>(first + row * row_stride);
    for (int column = 0; column < Columns; ++column) {
      const ActivationQuad& quad =
          reinterpret_cast<const ActivationQuad*>(this->activation_row(column))[quad_index];
      const __m512i low = _mm512_loadu_si512(quad.low);
      const __m512i high = _mm512_loadu_si512(quad.high);
      const __m512i correction = _mm512_loadu_si512(quad.correction);
      const __m512 activation_scale = _mm512_loadu_ps(quad.scale);
      for (int row = 0; row < Rows; ++row) {
        __m512& sum = kChained ? chains_[chain] : this->sums_[row][column];
        __m512i products = has_min(Layout) ? _mm512_setzero_si512() : correction;
        products = _mm512_dpbusd_epi32(products, q[row].low, low);
        products = _mm512_dpbusd_epi32(products, q[row].high, high);
        sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(products),
                              _mm512_mul_ps(q[row].scales, activation_scale), sum);
        if constexpr (has_min(Layout)) {
          __m512& min_sum = kChained ? chains_[2 + chain] : sum;
          min_sum = _mm512_fmadd_ps(q[row].mins, _mm512_castsi512_ps(correction), min_sum);
        }
      }
    }
  }

  __m512 chains_[kChains];
};

// The fields of one block, wherever its layout keeps them: 16 bytes of nibbles (element j < 16
// the low nibble of byte j, j + 16 its high nibble) or Q8_0's int8 elements 0-15 and 16-31, the
// fifth bits (bit j is element j's), the scale and the min.
struct BlockFields {
  const uint8_t* values;
  const uint8_t* high_values;  // Q8_0's elements 16-31
  uint32_t high_bits = 0;
  float scale;
  float min = 0.0f;
};

// A stored block's fields.
template <const BlockLayout& Layout>
inline BlockFields stored_fields(const uint8_t* block) {
  const uint8_t* values = block + Layout.values_at;
  BlockFields fields{values, values + 16, 0, _cvtsh_ss(load_u16(block))};
  if constexpr (Layout.bits == 5) fields.high_bits = load_u32(block + Layout.high_bits_at);
  if constexpr (has_min(Layout)) fields.min = _cvtsh_ss(load_u16(block + Layout.min_at));
  return fields;
}

// The fields of block `index` of an interleaved quad (InterleavedQuad): Q8_0's values as stored
// (elements 0-15 at byte 16 index, 16-31 at 64 + 16 index), a nibble block's 16 bytes at 16 index.
template <const BlockLayout& Layout>
inline BlockFields interleaved_fields(const uint8_t* quad, int index) {
  using Quad = InterleavedQuad<Layout>;
  const uint8_t* values = quad + 16 * index;
  BlockFields fields{values, values + 64, 0,
                     _cvtsh_ss(load_u16(quad + Quad::kScalesAt + 2 * index))};
  if constexpr (Layout.bits == 5) {
    const __m128i plane = load_128(quad + Quad::kFifthBitsAt);
    fields.high_bits = static_cast<uint32_t>(_mm_test_epi8_mask(
                           plane, _mm_set1_epi8(static_cast<char>(1 << index)))) |
                       static_cast<uint32_t>(
                           _mm_test_epi8_mask(plane, _mm_set1_epi8(static_cast<char>(16 << index))))
                           << 16;
  }
  if constexpr (has_min(Layout)) {
    fields.min = _cvtsh_ss(load_u16(quad + Quad::kMinsAt + 2 * index));
  }
  return fields;
}

// One block widened to f32 in registers, exactly as dequantize_row gives it: elements 0-15 in
// `low`, 16-31 in `high`.
template <const BlockLayout& Layout>
inline void widen_block(const BlockFields& fields, __m512& low, __m512& high) {
  const __m512 scale = _mm512_set1_ps(fields.scale);
  if constexpr (Layout.bits == 8) {
    low = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load_128(fields.values))), scale);
    high = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load_128(fields.high_values))),
                         scale);
    return;
  }
  const __m128i packed = load_128(fields.values);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  __m512i low_q = _mm512_cvtepu8_epi32(_mm_and_si128(packed, nibble));
  __m512i high_q = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(packed, 4), nibble));
  if constexpr (Layout.bits == 5) {
    const __m512i fifth = _mm512_set1_epi32(16);
    low_q = _mm512_mask_add_epi32(low_q, static_cast<__mmask16>(fields.high_bits), low_q, fifth);
    high_q = _mm512_mask_add_epi32(high_q, static_cast<__mmask16>(fields.high_bits >> 16), high_q,
                                   fifth);
  }
  // scale * q + (min, or -offset * scale, which is exact): one rounding, as dequantize_row.
  const __m512 shift = has_min(Layout)
                           ? _mm512_set1_ps(fields.min)
                           : _mm512_set1_ps(-static_cast<float>(Layout.offset) * fields.scale);
  low = _mm512_fmadd_ps(_mm512_cvtepi32_ps(low_q), scale, shift);
  high = _mm512_fmadd_ps(_mm512_cvtepi32_ps(high_q), scale, shift);
}

// f32 dot products of Rows weight rows, widened block by block, with Columns f32 rows.
template <const BlockLayout& Layout, int Rows, int Columns>
class FloatTile : public TileBase<Rows, Columns> {
 public:
  using TileBase<Rows, Columns>::TileBase;

  void run(int64_t n) {
    this->template run_blocks<Layout.bytes>(
        n, [this](int row, const uint8_t* weights, int64_t block) {
          __m512 low, high;
          widen_block<Layout>(stored_fields<Layout>(weights), low, high);
          for (int column = 0; column < Columns; ++column) {
            const float* x = reinterpret_cast<const float*>(this->activation_row(column)) +
                             block * kBlockElements;
            __m512& sum = this->sums_[row][column];
            sum = _mm512_fmadd_ps(low, _mm512_loadu_ps(x), sum);
            sum = _mm512_fmadd_ps(high, _mm512_loadu_ps(x + 16), sum);
          }
        });
  }
};

// The portable rounding (same scale, same f32 product, round to nearest even), 32 lanes at once.
template <const BlockLayout& Layout>
struct RoundActivations {
  static void run(const float* in, void* out, int64_t n);
};

template <const BlockLayout& Layout>
void RoundActivations<Layout>::run(const float* in, void* out, int64_t n) {
  auto* quads = static_cast<ActivationQuad*>(out);
  for (int64_t block = 0; block < block_count(n); ++block) {
    const __m512 low = _mm512_loadu_ps(in + block * kBlockElements);
    const __m512 high = _mm512_loadu_ps(in + block * kBlockElements + 16);
    const float scale = activation_scale(
        _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(low), _mm512_abs_ps(high))));
    const __m512 inverse = _mm512_set1_ps(activation_inverse_scale(scale));
    const __m512i low_q = _mm512_cvtps_epi32(_mm512_mul_ps(low, inverse));
    const __m512i high_q = _mm512_cvtps_epi32(_mm512_mul_ps(high, inverse));
    ActivationOutput destination = ActivationOutput::of(quads, block);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(destination.low), _mm512_cvtepi32_epi8(low_q));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(destination.high), _mm512_cvtepi32_epi8(high_q));
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(low_q, high_q));
    store_activation_lanes<Layout>(destination, scale, sum);
  }
  finish_activation_row(quads, block_count(n));
}

// A block widened (widen_block) into `out`: rounded to bf16 (vcvtne2ps2bf16: nearest even), or
// as f32.
template <const BlockLayout& Layout>
inline void store_widened_block(const BlockFields& fields, uint16_t* out) {
  __m512 low, high;
  widen_block<Layout>(fields, low, high);
  _mm512_storeu_si512(out, (__m512i)_mm512_cvtne2ps_pbh(high, low));
}
template <const BlockLayout& Layout>
inline void store_widened_block(const BlockFields& fields, float* out) {
  __m512 low, high;
  widen_block<Layout>(fields, low, high);
  _mm512_storeu_ps(out, low);
  _mm512_storeu_ps(out + 16, high);
}

// A stored row widened block by block (to bf16 or f32, as Out).
template <const BlockLayout& Layout, typename Out>
void widen_row(const void* blocks, Out* out, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(blocks);
  for (int64_t block = 0; block < block_count(n); ++block) {
    store_widened_block<Layout>(stored_fields<Layout>(bytes + block * Layout.bytes),
                                out + block * kBlockElements);
  }
}

// An interleaved row widened block by block, each quad's fields read where they are.
template <const BlockLayout& Layout, typename Out>
void widen_interleaved_row(const void* quads, Out* out, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(quads);
  for (int64_t block = 0; block < block_count(n); ++block) {
    const uint8_t* quad = bytes + block / kQuadBlocks * (kQuadBlocks * Layout.bytes);
    store_widened_block<Layout>(
        interleaved_fields<Layout>(quad, static_cast<int>(block % kQuadBlocks)),
        out + block * kBlockElements);
  }
}

template <const BlockLayout& Layout>
BlockKernels kernels_with_widening(BlockType type) {
  BlockKernels kernels = *vector_kernels<IntegerTile, FloatTile, RoundActivations>(type);
  kernels.widen_row_bf16 = widen_row<Layout, uint16_t>;
  kernels.widen_row_f32 = widen_row<Layout, float>;
  return kernels;
}

// The interleaved kernels, with prefill's widening on the quads as they are.
template <BlockType Type, const BlockLayout& Layout, const BlockLayout& Interleaved>
BlockKernels interleaved_kernels_with_widening() {
  BlockKernels kernels = interleaved_kernels_of<IntegerTile, Type, Layout, Interleaved>(
      *vector_kernels<IntegerTile, FloatTile, RoundActivations>(Type));
  kernels.widen_row_bf16 = widen_interleaved_row<Layout, uint16_t>;
  kernels.widen_row_f32 = widen_interleaved_row<Layout, float>;
  return kernels;
}

}  // namespace

const BlockKernels* interleaved_kernels(BlockType type) {
  static const BlockKernels table[5] = {
      interleaved_kernels_with_widening<BlockType::q4_0, kQ4_0, kQ4_0Interleaved>(),
      interleaved_kernels_with_widening<BlockType::q4_1, kQ4_1, kQ4_1Interleaved>(),
      interleaved_kernels_with_widening<BlockType::q5_0, kQ5_0, kQ5_0Interleaved>(),
      interleaved_kernels_with_widening<BlockType::q5_1, kQ5_1, kQ5_1Interleaved>(),
      interleaved_kernels_with_widening<BlockType::q8_0, kQ8_0, kQ8_0Interleaved>()};
  return pick(type, table);
}

const BlockKernels* kernels(BlockType type) {
  static const BlockKernels table[5] = {
      kernels_with_widening<kQ4_0>(BlockType::q4_0), kernels_with_widening<kQ4_1>(BlockType::q4_1),
      kernels_with_widening<kQ5_0>(BlockType::q5_0), kernels_with_widening<kQ5_1>(BlockType::q5_1),
      kernels_with_widening<kQ8_0>(BlockType::q8_0)};
  return pick(type, table);
}

}  // namespace fornace::cpu::legacy::avx512
