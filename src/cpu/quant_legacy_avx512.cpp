// AVX-512 kernels of the legacy block formats: vpdpbusd on pairs of blocks unpacked in registers,
// f32 FMA on blocks widened in registers, and vector activation rounding.
#include <immintrin.h>

#include "cpu/quant_legacy_kernels.h"

// GCC 12's AVX-512 headers start some intrinsics from an "undefined" register and then warn.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace fornace::cpu::legacy::avx512 {
namespace {

inline __m128i load_128(const uint8_t* source) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(source));
}
inline __m256i load_256(const uint8_t* source) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source));
}

// The unsigned weights q (Q8_0: value + 128) of a quad of 4 consecutive blocks, laid out as the
// activation quads: `low` holds elements 0-15 of blocks 0-3, `high` elements 16-31.
struct QuadWeights {
  __m512i low;
  __m512i high;
};

// 16 bytes at `offset` in each of the 4 blocks, one per 128-bit lane.
template <const BlockLayout& Layout>
inline __m512i gather_quad(const uint8_t* block, int offset) {
  __m512i gathered = _mm512_castsi128_si512(load_128(block + offset));
  gathered = _mm512_inserti32x4(gathered, load_128(block + Layout.bytes + offset), 1);
  gathered = _mm512_inserti32x4(gathered, load_128(block + 2 * Layout.bytes + offset), 2);
  return _mm512_inserti32x4(gathered, load_128(block + 3 * Layout.bytes + offset), 3);
}

template <const BlockLayout& Layout>
inline QuadWeights unsigned_quad(const uint8_t* block) {
  if constexpr (Layout.bits == 8) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    return {_mm512_xor_si512(gather_quad<Layout>(block, Layout.values_at), flip),
            _mm512_xor_si512(gather_quad<Layout>(block, Layout.values_at + 16), flip)};
  } else {
    const __m512i packed = gather_quad<Layout>(block, Layout.values_at);
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    QuadWeights q{_mm512_and_si512(packed, nibble),
                  _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble)};
    if constexpr (Layout.bits == 5) {
      // Bits 0-15 of each block's fifth bits go with `low`, bits 16-31 with `high`.
      uint64_t low_bits = 0;
      uint64_t high_bits = 0;
      for (int index = 0; index < 4; ++index) {
        const uint64_t bits = load_u32(block + index * Layout.bytes + Layout.high_bits_at);
        low_bits |= (bits & 0xffff) << (16 * index);
        high_bits |= (bits >> 16) << (16 * index);
      }
      const __m512i fifth = _mm512_set1_epi8(16);
      q.low = _mm512_mask_add_epi8(q.low, _cvtu64_mask64(low_bits), q.low, fifth);
      q.high = _mm512_mask_add_epi8(q.high, _cvtu64_mask64(high_bits), q.high, fifth);
    }
    return q;
  }
}

// The f16 field at `field` of a quad's 4 blocks as f32 lanes, 4 per block.
template <const BlockLayout& Layout>
inline __m512 quad_lanes(const uint8_t* field) {
  uint64_t bits = 0;
  for (int index = 0; index < 4; ++index) {
    bits |= static_cast<uint64_t>(load_u16(field + index * Layout.bytes)) << (16 * index);
  }
  const __m128 four = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(bits)));
  const __m512i lanes = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(four));
}

struct Lanes {
  static constexpr int kRowsPerPass = 4;
  using Vector = __m512;
  static Vector zero() { return _mm512_setzero_ps(); }
  static float sum(Vector value) { return _mm512_reduce_add_ps(value); }
};
template <int Rows, int Columns>
using TileBase = TileState<Lanes, Rows, Columns>;

// Integer dot products of Rows weight rows with Columns activation rows, a quad of blocks per
// step: per 32-bit lane, sum = correction + unsigned q . activation q (two vpdpbusd), then f32
// lanes accumulate sum x weight scale x activation scale (plus weight min x the activation's
// scaled sum).
template <const BlockLayout& Layout, int Rows, int Columns>
class IntegerTile : public TileBase<Rows, Columns> {
 public:
  using TileBase<Rows, Columns>::TileBase;

  void run(int64_t n) {
    this->template run_steps<kQuadBlocks, Layout.bytes>(
        n, [this](const uint8_t* first, size_t row_stride, int64_t block) {
          step(first, row_stride, block / kQuadBlocks);
        });
  }

 private:
  void step(const uint8_t* first, size_t row_stride, int64_t quad_index) {
    QuadWeights q[Rows];
    __m512 scales[Rows];
    __m512 mins[Rows];
    for (int row = 0; row < Rows; ++row) {
      const uint8_t* source = first + row * row_stride;
      q[row] = unsigned_quad<Layout>(source);
      scales[row] = quad_lanes<Layout>(source);
      if constexpr (has_min(Layout)) mins[row] = quad_lanes<Layout>(source + Layout.min_at);
    }
    for (int column = 0; column < Columns; ++column) {
      const ActivationQuad& quad =
          reinterpret_cast<const ActivationQuad*>(this->activation_row(column))[quad_index];
      const __m512i low = _mm512_loadu_si512(quad.low);
      const __m512i high = _mm512_loadu_si512(quad.high);
      const __m512i correction = _mm512_loadu_si512(quad.correction);
      const __m512 activation_scale = _mm512_loadu_ps(quad.scale);
      for (int row = 0; row < Rows; ++row) {
        __m512& sum = this->sums_[row][column];
        __m512i products = has_min(Layout) ? _mm512_setzero_si512() : correction;
        products = _mm512_dpbusd_epi32(products, q[row].low, low);
        products = _mm512_dpbusd_epi32(products, q[row].high, high);
        sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(products),
                              _mm512_mul_ps(scales[row], activation_scale), sum);
        if constexpr (has_min(Layout)) {
          sum = _mm512_fmadd_ps(mins[row], _mm512_castsi512_ps(correction), sum);
        }
      }
    }
  }
};

// One block widened to f32 in registers, exactly as dequantize_row gives it: elements 0-15 in
// `low`, 16-31 in `high`.
template <const BlockLayout& Layout>
inline void widen_block(const uint8_t* block, __m512& low, __m512& high) {
  const float scale_value = _cvtsh_ss(load_u16(block));
  const __m512 scale = _mm512_set1_ps(scale_value);
  if constexpr (Layout.bits == 8) {
    low = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load_128(block + Layout.values_at))),
                        scale);
    high = _mm512_mul_ps(
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load_128(block + Layout.values_at + 16))), scale);
    return;
  }
  const __m128i packed = load_128(block + Layout.values_at);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  __m512i low_q = _mm512_cvtepu8_epi32(_mm_and_si128(packed, nibble));
  __m512i high_q = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(packed, 4), nibble));
  if constexpr (Layout.bits == 5) {
    const uint32_t high_bits = load_u32(block + Layout.high_bits_at);
    const __m512i fifth = _mm512_set1_epi32(16);
    low_q = _mm512_mask_add_epi32(low_q, static_cast<__mmask16>(high_bits), low_q, fifth);
    high_q = _mm512_mask_add_epi32(high_q, static_cast<__mmask16>(high_bits >> 16), high_q, fifth);
  }
  // scale * q + (min, or -offset * scale, which is exact): one rounding, as dequantize_row.
  const __m512 shift = has_min(Layout) ? _mm512_set1_ps(_cvtsh_ss(load_u16(block + Layout.min_at)))
                                       : _mm512_set1_ps(-static_cast<float>(Layout.offset) * scale_value);
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
          widen_block<Layout>(weights, low, high);
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

}  // namespace

const BlockKernels* kernels(BlockType type) {
  return vector_kernels<IntegerTile, FloatTile, RoundActivations>(type);
}

}  // namespace fornace::cpu::legacy::avx512
