// AVX2 kernels of the legacy block formats: vpmaddubsw/vpmaddwd on pairs of blocks unpacked in
// registers, f32 FMA on blocks widened in registers, and vector activation rounding.
#include <immintrin.h>

#include "cpu/prefetch.h"
#include "cpu/quant_legacy_kernels.h"
#include "cpu/simd.h"

namespace fornace::cpu::legacy::avx2 {
namespace {

constexpr int kStepBlocks = 2;  // half an activation quad: 8 lanes of 32 bits

inline __m128i load_128(const uint8_t* source) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(source));
}
inline __m256i load_256(const void* source) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source));
}

// 16 bytes at `offset` in each of 2 consecutive blocks, one per 128-bit lane.
template <const BlockLayout& Layout>
inline __m256i gather_pair(const uint8_t* block, int offset) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(load_128(block + offset)),
                                 load_128(block + Layout.bytes + offset), 1);
}

// 0x10 in byte i where bit i of `bits` is set, else 0.
inline __m256i fifth_bit_bytes(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

// The weights of 2 consecutive blocks laid out as half an activation quad: `low` holds elements
// 0-15 of both, `high` elements 16-31. Unsigned q for 4 and 5 bits; Q8_0's signed values.
struct PairWeights {
  __m256i low;
  __m256i high;
};

// The fifth bits of half `Half` of an interleaved quad as bytes of 16 or 0: the plane in both
// lanes, each lane's bit shifted to bit 4 (lane L of the low elements holds block 2 Half + L's,
// bit 2 Half + L of the plane; of the high elements bit 4 + 2 Half + L). A 32-bit shift keeps
// each byte's bit 4 from the same byte, as every shift is under 8.
template <int Half>
inline void add_plane_bits(const uint8_t* plane, PairWeights& q) {
  const __m256i bits = _mm256_broadcastsi128_si256(load_128(plane));
  const __m256i fifth = _mm256_set1_epi8(16);
  const __m256i low = _mm256_sllv_epi32(
      bits, _mm256_set_epi32(3 - 2 * Half, 3 - 2 * Half, 3 - 2 * Half, 3 - 2 * Half,
                             4 - 2 * Half, 4 - 2 * Half, 4 - 2 * Half, 4 - 2 * Half));
  const __m256i high = _mm256_srlv_epi32(
      bits, _mm256_set_epi32(1 + 2 * Half, 1 + 2 * Half, 1 + 2 * Half, 1 + 2 * Half, 2 * Half,
                             2 * Half, 2 * Half, 2 * Half));
  q.low = _mm256_or_si256(q.low, _mm256_and_si256(low, fifth));
  q.high = _mm256_or_si256(q.high, _mm256_and_si256(high, fifth));
}

// The pair of blocks a step reads at `first`: stored blocks, or half `Half` of the interleaved
// quad at `first` (InterleavedQuad), whose fields load whole.
template <const BlockLayout& Layout, int Half>
struct PairSource {
  const uint8_t* first;  // Of the blocks, or of the quad.

  PairWeights weights() const {
    if constexpr (Layout.interleaved) {
      const uint8_t* values = first + 32 * Half;
      if constexpr (Layout.bits == 8) return {load_256(values), load_256(values + 64)};
      PairWeights q = nibbles(load_256(values));
      if constexpr (Layout.bits == 5) {
        add_plane_bits<Half>(first + InterleavedQuad<Layout>::kFifthBitsAt, q);
      }
      return q;
    } else if constexpr (Layout.bits == 8) {
      return {gather_pair<Layout>(first, Layout.values_at),
              gather_pair<Layout>(first, Layout.values_at + 16)};
    } else {
      PairWeights q = nibbles(gather_pair<Layout>(first, Layout.values_at));
      if constexpr (Layout.bits == 5) {
        const uint32_t first_bits = load_u32(first + Layout.high_bits_at);
        const uint32_t second_bits = load_u32(first + Layout.bytes + Layout.high_bits_at);
        q.low =
            _mm256_or_si256(q.low, fifth_bit_bytes((first_bits & 0xffff) | (second_bits << 16)));
        q.high = _mm256_or_si256(q.high,
                                 fifth_bit_bytes((first_bits >> 16) | (second_bits & 0xffff0000)));
      }
      return q;
    }
  }

  // The blocks' scales, and mins, as f32 lanes, 4 per block.
  __m256 scales() const {
    if constexpr (Layout.interleaved) {
      return pair_lanes(first + InterleavedQuad<Layout>::kScalesAt + 4 * Half, 2);
    } else {
      return pair_lanes(first, Layout.bytes);
    }
  }
  __m256 mins() const {
    if constexpr (Layout.interleaved) {
      return pair_lanes(first + InterleavedQuad<Layout>::kMinsAt + 4 * Half, 2);
    } else {
      return pair_lanes(first + Layout.min_at, Layout.bytes);
    }
  }

 private:
  static PairWeights nibbles(__m256i packed) {
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    return {_mm256_and_si256(packed, nibble),
            _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble)};
  }

  // The f16 values at `field` and `field + stride` as f32 lanes, 4 per value.
  static __m256 pair_lanes(const uint8_t* field, size_t stride) {
    const uint32_t bits = load_u16(field) | static_cast<uint32_t>(load_u16(field + stride)) << 16;
    const __m128 both = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(bits)));
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(both),
                                    _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0));
  }
};

struct Lanes {
  static constexpr Isa kIsa = Isa::avx2;
  static constexpr int kRowsPerPass = 2;
  using Vector = __m256;
  static Vector zero() { return _mm256_setzero_ps(); }
  static float sum(Vector value) { return simd::sum_of_8(value); }
  static void sum_four(const Vector (&sums)[4], float* out) {
    // Pairs, then quads, of adjacent lanes: a0123 b0123 c0123 d0123 | a4567 b4567 c4567 d4567.
    const __m256 quads = _mm256_hadd_ps(_mm256_hadd_ps(sums[0], sums[1]),
                                        _mm256_hadd_ps(sums[2], sums[3]));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(quads), _mm256_extractf128_ps(quads, 1)));
  }
};
template <int Rows, int Columns>
using TileBase = TileState<Lanes, Rows, Columns>;

// Integer dot products, 2 blocks per step: per 32-bit lane, the int16 pair sums of
// vpmaddubsw (unsigned 4/5-bit q x activation q, or |Q8_0 value| x activation q with the
// value's sign) summed by vpmaddwd, plus the correction; then f32 lanes accumulate
// sum x weight scale x activation scale (plus weight min x the activation's scaled sum).
template <const BlockLayout& Layout, int Rows, int Columns>
class IntegerTile : public TileBase<Rows, Columns> {
 public:
  using TileBase<Rows, Columns>::TileBase;

  void run(int64_t n) {
    const StreamPrefetch prefetch = stream_prefetch(Isa::avx2, 0);
    // Interleaved rows go a quad at a time (its fields lie across it), in two pairs.
    constexpr int kBlocks = Layout.interleaved ? kQuadBlocks : kStepBlocks;
    this->template run_steps<kBlocks, Layout.bytes>(
        n, [this, prefetch](const uint8_t* first, size_t row_stride, int64_t block) {
          if constexpr (Layout.interleaved) {
            step<0>(first, row_stride, block, prefetch);
            step<1>(first, row_stride, block + kStepBlocks, prefetch);
          } else {
            step<0>(first, row_stride, block, prefetch);
          }
        });
  }

 private:
  // One column's activations for a step.
  struct Activations {
    __m256i low;
    __m256i high;
    __m256i correction;
    __m256 scale;
  };
  Activations activations(int column, int64_t block) const {
    ActivationBlock activation = activation_block(this->activation_row(column), block);
    return {load_256(activation.low), load_256(activation.high), load_256(activation.correction),
            _mm256_loadu_ps(activation.scale)};
  }

  // One column (decode) takes each row in turn, so that few registers stay live; several
  // columns unpack every row's weights once, then take each column.
  template <int Half>
  void step(const uint8_t* first, size_t row_stride, int64_t block,
            const StreamPrefetch& prefetch) {
    PairWeights q[Rows];
    __m256 scales[Rows];
    __m256 mins[Rows];
    auto unpack = [&](int row) {
      const uint8_t* source = first + row * row_stride;
      prefetch.lines<kStepBlocks * Layout.bytes>(source + Half * kStepBlocks * Layout.bytes);
      const PairSource<Layout, Half> pair{source};
      q[row] = pair.weights();
      scales[row] = pair.scales();
      if constexpr (has_min(Layout)) mins[row] = pair.mins();
    };
    if constexpr (Columns == 1) {
      const Activations a = activations(0, block);
      for (int row = 0; row < Rows; ++row) {
        unpack(row);
        accumulate(q[row], scales[row], mins[row], a, this->sums_[row][0]);
      }
    } else {
      for (int row = 0; row < Rows; ++row) unpack(row);
      for (int column = 0; column < Columns; ++column) {
        const Activations a = activations(column, block);
        for (int row = 0; row < Rows; ++row) {
          accumulate(q[row], scales[row], mins[row], a, this->sums_[row][column]);
        }
      }
    }
  }

  static void accumulate(const PairWeights& q, __m256 scales, __m256 mins, const Activations& a,
                         __m256& sum) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i products;
    if constexpr (Layout.bits == 8) {
      // |w| x (a with w's sign): at most 2 x 128 x 127 per int16 pair, no saturation.
      const __m256i low_pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(q.low, q.low),
                                                     _mm256_sign_epi8(a.low, q.low));
      const __m256i high_pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(q.high, q.high),
                                                      _mm256_sign_epi8(a.high, q.high));
      products = _mm256_add_epi32(_mm256_madd_epi16(low_pairs, ones),
                                  _mm256_madd_epi16(high_pairs, ones));
    } else {
      // q < 32: two pairs sum to at most 4 x 31 x 128 in int16.
      const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(q.low, a.low),
                                             _mm256_maddubs_epi16(q.high, a.high));
      products = _mm256_madd_epi16(pairs, ones);
      if constexpr (!has_min(Layout)) products = _mm256_add_epi32(products, a.correction);
    }
    sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(products), _mm256_mul_ps(scales, a.scale), sum);
    if constexpr (has_min(Layout)) {
      sum = _mm256_fmadd_ps(mins, _mm256_castsi256_ps(a.correction), sum);
    }
  }
};

// 8 q from 8 bytes, as 32-bit lanes.
inline __m256i widen_bytes(__m128i bytes, bool is_signed) {
  return is_signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
}
// 16 in lane i where bit i of `bits` (8 bits) is set.
inline __m256i fifth_bit_lanes(uint32_t bits) {
  const __m256i select = _mm256_set_epi32(128, 64, 32, 16, 8, 4, 2, 1);
  const __m256i set = _mm256_cmpeq_epi32(
      _mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits)), select), select);
  return _mm256_and_si256(set, _mm256_set1_epi32(16));
}

// One block widened to f32 in registers, exactly as dequantize_row gives it, 8 elements a vector.
template <const BlockLayout& Layout>
inline void widen_block(const uint8_t* block, __m256 (&widened)[4]) {
  const float scale_value = _cvtsh_ss(load_u16(block));
  const __m256 scale = _mm256_set1_ps(scale_value);
  __m256i q[4];
  if constexpr (Layout.bits == 8) {
    const __m128i first = load_128(block + Layout.values_at);
    const __m128i second = load_128(block + Layout.values_at + 16);
    q[0] = widen_bytes(first, true);
    q[1] = widen_bytes(_mm_unpackhi_epi64(first, first), true);
    q[2] = widen_bytes(second, true);
    q[3] = widen_bytes(_mm_unpackhi_epi64(second, second), true);
    for (int group = 0; group < 4; ++group) {
      widened[group] = _mm256_mul_ps(_mm256_cvtepi32_ps(q[group]), scale);
    }
    return;
  }
  const __m128i packed = load_128(block + Layout.values_at);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m128i low = _mm_and_si128(packed, nibble);
  const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);
  q[0] = widen_bytes(low, false);
  q[1] = widen_bytes(_mm_unpackhi_epi64(low, low), false);
  q[2] = widen_bytes(high, false);
  q[3] = widen_bytes(_mm_unpackhi_epi64(high, high), false);
  if constexpr (Layout.bits == 5) {
    const uint32_t high_bits = load_u32(block + Layout.high_bits_at);
    for (int group = 0; group < 4; ++group) {
      q[group] = _mm256_add_epi32(q[group], fifth_bit_lanes((high_bits >> (8 * group)) & 0xff));
    }
  }
  // scale * q + (min, or -offset * scale, which is exact): one rounding, as dequantize_row.
  const __m256 shift = has_min(Layout)
                           ? _mm256_set1_ps(_cvtsh_ss(load_u16(block + Layout.min_at)))
                           : _mm256_set1_ps(-static_cast<float>(Layout.offset) * scale_value);
  for (int group = 0; group < 4; ++group) {
    widened[group] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q[group]), scale, shift);
  }
}

// f32 dot products of Rows weight rows, widened block by block, with Columns f32 rows.
template <const BlockLayout& Layout, int Rows, int Columns>
class FloatTile : public TileBase<Rows, Columns> {
 public:
  using TileBase<Rows, Columns>::TileBase;

  void run(int64_t n) {
    this->template run_blocks<Layout.bytes>(
        n, [this](int row, const uint8_t* weights, int64_t block) {
          __m256 widened[4];
          widen_block<Layout>(weights, widened);
          for (int column = 0; column < Columns; ++column) {
            const float* x = reinterpret_cast<const float*>(this->activation_row(column)) +
                             block * kBlockElements;
            __m256& sum = this->sums_[row][column];
            for (int group = 0; group < 4; ++group) {
              sum = _mm256_fmadd_ps(widened[group], _mm256_loadu_ps(x + 8 * group), sum);
            }
          }
        });
  }
};

// The portable rounding (same scale, same f32 product, round to nearest even), 8 lanes at once.
template <const BlockLayout& Layout>
struct RoundActivations {
  static void run(const float* in, void* out, int64_t n);
};

template <const BlockLayout& Layout>
void RoundActivations<Layout>::run(const float* in, void* out, int64_t n) {
  auto* quads = static_cast<ActivationQuad*>(out);
  const __m256 magnitude_bits = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t block = 0; block < block_count(n); ++block) {
    __m256 x[4];
    __m256 max_magnitude = _mm256_setzero_ps();
    for (int group = 0; group < 4; ++group) {
      x[group] = _mm256_loadu_ps(in + block * kBlockElements + 8 * group);
      max_magnitude = _mm256_max_ps(max_magnitude, _mm256_and_ps(x[group], magnitude_bits));
    }
    const float scale = activation_scale(simd::max_of_8(max_magnitude));
    const __m256 inverse = _mm256_set1_ps(activation_inverse_scale(scale));
    __m256i q[4];
    for (int group = 0; group < 4; ++group) {
      q[group] = _mm256_cvtps_epi32(_mm256_mul_ps(x[group], inverse));
    }
    // Saturating packs interleave 128-bit lanes: 0-3 8-11 4-7 12-15 per 16; a dword permute
    // restores element order.
    const __m256i low = _mm256_packs_epi32(q[0], q[1]);
    const __m256i high = _mm256_packs_epi32(q[2], q[3]);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(low, high),
                                                      _mm256_set_epi32(7, 3, 6, 2, 5, 1, 4, 0));
    ActivationOutput destination = ActivationOutput::of(quads, block);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(destination.low), _mm256_castsi256_si128(bytes));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(destination.high),
                     _mm256_extracti128_si256(bytes, 1));
    const __m256i sums =
        _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0x4e));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0xb1));
    store_activation_lanes<Layout>(destination, scale, _mm_cvtsi128_si32(sum));
  }
  finish_activation_row(quads, block_count(n));
}

// A stored row widened to f32 block by block (prefill's f32 GEMM packs it).
template <const BlockLayout& Layout>
void widen_row_f32(const void* blocks, float* out, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(blocks);
  for (int64_t block = 0; block < block_count(n); ++block) {
    __m256 widened[4];
    widen_block<Layout>(bytes + block * Layout.bytes, widened);
    for (int group = 0; group < 4; ++group) {
      _mm256_storeu_ps(out + block * kBlockElements + 8 * group, widened[group]);
    }
  }
}

template <const BlockLayout& Layout>
BlockKernels kernels_with_widening(BlockType type) {
  BlockKernels kernels = *vector_kernels<IntegerTile, FloatTile, RoundActivations>(type);
  kernels.widen_row_f32 = widen_row_f32<Layout>;
  return kernels;
}

// The interleaved kernels; prefill widens each quad put back as stored blocks.
template <BlockType Type, const BlockLayout& Layout, const BlockLayout& Interleaved>
BlockKernels interleaved_kernels_with_widening(const BlockKernels& stored) {
  BlockKernels kernels = interleaved_kernels_of<IntegerTile, Type, Layout, Interleaved>(stored);
  kernels.widen_row_f32 = [](const void* quads, float* out, int64_t n) {
    for_each_deinterleaved_quad<Layout>(quads, out, n, widen_row_f32<Layout>);
  };
  return kernels;
}

}  // namespace

const BlockKernels* kernels(BlockType type) {
  static const BlockKernels table[5] = {
      kernels_with_widening<kQ4_0>(BlockType::q4_0), kernels_with_widening<kQ4_1>(BlockType::q4_1),
      kernels_with_widening<kQ5_0>(BlockType::q5_0), kernels_with_widening<kQ5_1>(BlockType::q5_1),
      kernels_with_widening<kQ8_0>(BlockType::q8_0)};
  return pick(type, table);
}

const BlockKernels* interleaved_kernels(BlockType type) {
  static const BlockKernels table[5] = {
      interleaved_kernels_with_widening<BlockType::q4_0, kQ4_0, kQ4_0Interleaved>(
          *kernels(BlockType::q4_0)),
      interleaved_kernels_with_widening<BlockType::q4_1, kQ4_1, kQ4_1Interleaved>(
          *kernels(BlockType::q4_1)),
      interleaved_kernels_with_widening<BlockType::q5_0, kQ5_0, kQ5_0Interleaved>(
          *kernels(BlockType::q5_0)),
      interleaved_kernels_with_widening<BlockType::q5_1, kQ5_1, kQ5_1Interleaved>(
          *kernels(BlockType::q5_1)),
      interleaved_kernels_with_widening<BlockType::q8_0, kQ8_0, kQ8_0Interleaved>(
          *kernels(BlockType::q8_0))};
  return pick(type, table);
}

}  // namespace fornace::cpu::legacy::avx2
