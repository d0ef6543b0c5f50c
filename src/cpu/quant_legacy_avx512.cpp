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

// The unsigned weights q (Q8_0: value + 128) of `Count` consecutive blocks (1 or 2), in element
// order: block 0 in bytes 0-31, block 1 (or zeros) in bytes 32-63.
template <const BlockLayout& Layout, int Count>
inline __m512i unsigned_weights(const uint8_t* block) {
  if constexpr (Layout.bits == 8) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    __m256i first = _mm256_xor_si256(load_256(block + Layout.values_at), flip);
    if constexpr (Count == 1) return _mm512_zextsi256_si512(first);
    __m256i second = _mm256_xor_si256(load_256(block + Layout.bytes + Layout.values_at), flip);
    return _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1);
  } else {
    // Each 16 nibble bytes into two 128-bit lanes, the second shifted by 4: low then high nibbles.
    __m512i packed = _mm512_maskz_broadcast_i32x4(0x00ff, load_128(block + Layout.values_at));
    if constexpr (Count == 2) {
      packed = _mm512_mask_broadcast_i32x4(packed, 0xff00,
                                           load_128(block + Layout.bytes + Layout.values_at));
    }
    constexpr int64_t kByFour = 0x0004000400040004;
    const __m512i shift_words = _mm512_set_epi64(kByFour, kByFour, 0, 0, kByFour, kByFour, 0, 0);
    __m512i q = _mm512_and_si512(_mm512_srlv_epi16(packed, shift_words), _mm512_set1_epi8(0x0f));
    if constexpr (Layout.bits == 5) {
      uint64_t high_bits = load_u32(block + Layout.high_bits_at);
      if constexpr (Count == 2) {
        high_bits |= static_cast<uint64_t>(load_u32(block + Layout.bytes + Layout.high_bits_at))
                     << 32;
      }
      q = _mm512_mask_add_epi8(q, _cvtu64_mask64(high_bits), q, _mm512_set1_epi8(16));
    }
    return q;
  }
}

// An f16 field of `Count` consecutive blocks as f32 lanes: the first block's in lanes 0-7, the
// second's (or 0) in lanes 8-15.
template <const BlockLayout& Layout, int Count>
inline __m512 f16_lanes(const uint8_t* field) {
  uint32_t bits = load_u16(field);
  if constexpr (Count == 2) bits |= static_cast<uint32_t>(load_u16(field + Layout.bytes)) << 16;
  const __m128 both = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(bits)));
  const __m512i lanes = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(both));
}

// Integer dot products of Rows weight rows with Columns activation rows, two blocks per step:
// sum = vpdpbusd(correction, unsigned q, activation q) per lane, then f32 lanes accumulate
// sum x weight scale x activation scale (plus weight min x the activation's scaled sum).
struct Lanes {
  using Vector = __m512;
  static Vector zero() { return _mm512_setzero_ps(); }
  static float sum(Vector value) { return _mm512_reduce_add_ps(value); }
};
template <int Rows, int Columns>
using TileBase = TileState<Lanes, Rows, Columns>;

// Integer dot products of Rows weight rows with Columns activation rows, two blocks per step:
// sum = vpdpbusd(correction, unsigned q, activation q) per lane, then f32 lanes accumulate
// sum x weight scale x activation scale (plus weight min x the activation's scaled sum).
template <const BlockLayout& Layout>
struct IntegerTile {
  template <int Rows, int Columns>
  class Tile : public TileBase<Rows, Columns> {
   public:
    static constexpr int kRowsPerPass = 4;
    using TileBase<Rows, Columns>::TileBase;

    void run(int64_t n) {
      this->clear();
      const int64_t blocks = block_count(n);
      int64_t block = 0;
      for (; block + 2 <= blocks; block += 2) step<2>(block);
      if (block < blocks) step<1>(block);
    }

   private:
    template <int Count>
    void step(int64_t block) {
      __m512i q[Rows];
      __m512 scales[Rows];
      __m512 mins[Rows];
      for (int row = 0; row < Rows; ++row) {
        const uint8_t* source = this->weight_row(row) + block * Layout.bytes;
        q[row] = unsigned_weights<Layout, Count>(source);
        scales[row] = f16_lanes<Layout, Count>(source);
        if constexpr (has_min(Layout)) mins[row] = f16_lanes<Layout, Count>(source + Layout.min_at);
      }
      for (int column = 0; column < Columns; ++column) {
        const auto& pair = reinterpret_cast<const ActivationPair*>(
            this->activation_row(column))[block / 2];
        const __m512i values = _mm512_loadu_si512(pair.values);
        const __m512i correction = _mm512_loadu_si512(pair.correction);
        const __m512 activation_scale = _mm512_loadu_ps(pair.scale);
        for (int row = 0; row < Rows; ++row) {
          __m512& sum = this->sums_[row][column];
          const __m512 scale = _mm512_mul_ps(scales[row], activation_scale);
          if constexpr (has_min(Layout)) {
            __m512i products = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[row], values);
            sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(products), scale, sum);
            sum = _mm512_fmadd_ps(mins[row], _mm512_castsi512_ps(correction), sum);
          } else {
            __m512i products = _mm512_dpbusd_epi32(correction, q[row], values);
            sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(products), scale, sum);
          }
        }
      }
    }
  };
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
template <const BlockLayout& Layout>
struct FloatTile {
  template <int Rows, int Columns>
  class Tile : public TileBase<Rows, Columns> {
   public:
    static constexpr int kRowsPerPass = 4;
    using TileBase<Rows, Columns>::TileBase;

    void run(int64_t n) {
      this->clear();
      for (int64_t block = 0; block < block_count(n); ++block) {
        for (int row = 0; row < Rows; ++row) {
          __m512 low, high;
          widen_block<Layout>(this->weight_row(row) + block * Layout.bytes, low, high);
          for (int column = 0; column < Columns; ++column) {
            const float* x = reinterpret_cast<const float*>(this->activation_row(column)) +
                             block * kBlockElements;
            __m512& sum = this->sums_[row][column];
            sum = _mm512_fmadd_ps(low, _mm512_loadu_ps(x), sum);
            sum = _mm512_fmadd_ps(high, _mm512_loadu_ps(x + 16), sum);
          }
        }
      }
    }
  };
};

template <const BlockLayout& Layout>
void dot_rows(const void* weights, size_t weight_row_bytes, int64_t rows, const void* activations,
              size_t activation_row_bytes, int64_t columns, int64_t n, float* out,
              int64_t out_stride) {
  dot_tiles<IntegerTile<Layout>::template Tile>(weights, weight_row_bytes, rows, activations,
                                                activation_row_bytes, columns, n, out, out_stride);
}

template <const BlockLayout& Layout>
void dot_rows_f32(const void* weights, size_t weight_row_bytes, int64_t rows,
                  const float* activations, int64_t activation_stride, int64_t columns, int64_t n,
                  float* out, int64_t out_stride) {
  dot_tiles<FloatTile<Layout>::template Tile>(weights, weight_row_bytes, rows, activations,
                                              activation_stride * sizeof(float), columns, n, out,
                                              out_stride);
}

// The portable rounding (same scale, same f32 product, round to nearest even), 32 lanes at once.
template <const BlockLayout& Layout>
void quantize_activations(const float* in, void* out, int64_t n) {
  auto* pairs = static_cast<ActivationPair*>(out);
  for (int64_t block = 0; block < block_count(n); ++block) {
    const __m512 first = _mm512_loadu_ps(in + block * kBlockElements);
    const __m512 second = _mm512_loadu_ps(in + block * kBlockElements + 16);
    const float scale = activation_scale(
        _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(first), _mm512_abs_ps(second))));
    const __m512 inverse = _mm512_set1_ps(activation_inverse_scale(scale));
    const __m512i first_q = _mm512_cvtps_epi32(_mm512_mul_ps(first, inverse));
    const __m512i second_q = _mm512_cvtps_epi32(_mm512_mul_ps(second, inverse));
    int8_t* values = pairs[block / 2].values + (block % 2) * kBlockElements;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(values), _mm512_cvtepi32_epi8(first_q));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(values + 16), _mm512_cvtepi32_epi8(second_q));
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(first_q, second_q));
    store_activation_lanes<Layout>(pairs[block / 2], static_cast<int>(block % 2), scale, sum);
  }
  finish_activation_row(pairs, block_count(n));
}

template <const BlockLayout& Layout>
BlockKernels kernels_of(BlockType type) {
  BlockKernels kernels = *portable::kernels(type);
  kernels.quantize_activations = quantize_activations<Layout>;
  kernels.dot_rows = dot_rows<Layout>;
  kernels.dot_rows_f32 = dot_rows_f32<Layout>;
  return kernels;
}

}  // namespace

const BlockKernels* kernels(BlockType type) {
  static const BlockKernels q4_0 = kernels_of<kQ4_0>(BlockType::q4_0);
  static const BlockKernels q4_1 = kernels_of<kQ4_1>(BlockType::q4_1);
  static const BlockKernels q5_0 = kernels_of<kQ5_0>(BlockType::q5_0);
  static const BlockKernels q5_1 = kernels_of<kQ5_1>(BlockType::q5_1);
  static const BlockKernels q8_0 = kernels_of<kQ8_0>(BlockType::q8_0);
  switch (type) {
    case BlockType::q4_0:
      return &q4_0;
    case BlockType::q4_1:
      return &q4_1;
    case BlockType::q5_0:
      return &q5_0;
    case BlockType::q5_1:
      return &q5_1;
    case BlockType::q8_0:
      return &q8_0;
    default:
      return nullptr;
  }
}

}  // namespace fornace::cpu::legacy::avx512
