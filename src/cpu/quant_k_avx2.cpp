// AVX2 kernels for Q4_K, Q5_K and Q6_K: levels unpacked in registers, vpmaddubsw against the
// int8 activations, sub-block scales applied by vpmaddwd; and the f32 kernel.
#include <immintrin.h>

#include <cstring>

#include "cpu/prefetch.h"
#include "cpu/quant_k_blocks.h"
#include "cpu/quant_k_f32_kernel.inl"

namespace fornace::cpu::kquant {
namespace {

inline __m256i bytes_of(uint8_t value) { return _mm256_set1_epi8(static_cast<char>(value)); }

inline __m256i load_32_bytes(const void* source) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source));
}

// Moves bit `From` of each byte to bit 4 (other bits cleared).
template <int From>
inline __m256i bit_to_4(__m256i bytes) {
  const __m256i moved =
      From <= 4 ? _mm256_slli_epi16(bytes, 4 - From) : _mm256_srli_epi16(bytes, From - 4);
  return _mm256_and_si256(moved, bytes_of(0x10));
}

// What one weight row contributes per block: its integer scales (Q4_K/Q5_K: 8 per 32 elements;
// Q6_K: 16 per 16) and mins (Q4_K/Q5_K) or offsets (Q6_K: -32 * scale per 16), and d, dmin.
struct RowBlock {
  int16_t scales[16];
  __m256i mins_or_offsets;  // Q4_K/Q5_K: 8 int16 mins in the lower 128 bits.
  float d;
  float dmin;
};

template <typename Block>
inline void prepare_scaled_min(const Block& block, RowBlock& row) {
  const ScalesAndMins packed = unpack_scales_and_mins(block.scales);
  for (int j = 0; j < 8; ++j) row.scales[j] = static_cast<uint8_t>(packed.scales >> (8 * j));
  row.mins_or_offsets = _mm256_zextsi128_si256(
      _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(packed.mins))));
  row.d = _cvtsh_ss(block.d);
  row.dmin = _cvtsh_ss(block.dmin);
}
inline void prepare(const BlockQ4K& block, RowBlock& row) { prepare_scaled_min(block, row); }
inline void prepare(const BlockQ5K& block, RowBlock& row) { prepare_scaled_min(block, row); }
inline void prepare(const BlockQ6K& block, RowBlock& row) {
  const __m256i scales16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(row.scales), scales16);
  row.mins_or_offsets = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(scales16, 5));
  row.d = _cvtsh_ss(block.d);
}

// The 32 levels of elements 32k..32k+31 as unsigned bytes, and their int16 scales.
inline __m256i levels_of(const BlockQ4K& block, int k) {
  const __m256i bytes = load_32_bytes(block.qs + 32 * (k / 2));
  return _mm256_and_si256(k % 2 == 0 ? bytes : _mm256_srli_epi16(bytes, 4), bytes_of(0x0F));
}
inline __m256i levels_of(const BlockQ5K& block, int k) {
  const __m256i bytes = load_32_bytes(block.qs + 32 * (k / 2));
  const __m256i nibbles =
      _mm256_and_si256(k % 2 == 0 ? bytes : _mm256_srli_epi16(bytes, 4), bytes_of(0x0F));
  const __m256i high = load_32_bytes(block.qh);
  __m256i fifth;
  switch (k) {  // Element 32k + i takes bit k of qh[i].
    case 0:
      fifth = bit_to_4<0>(high);
      break;
    case 1:
      fifth = bit_to_4<1>(high);
      break;
    case 2:
      fifth = bit_to_4<2>(high);
      break;
    case 3:
      fifth = bit_to_4<3>(high);
      break;
    case 4:
      fifth = bit_to_4<4>(high);
      break;
    case 5:
      fifth = bit_to_4<5>(high);
      break;
    case 6:
      fifth = bit_to_4<6>(high);
      break;
    default:
      fifth = bit_to_4<7>(high);
      break;
  }
  return _mm256_or_si256(nibbles, fifth);
}
inline __m256i levels_of(const BlockQ6K& block, int k) {
  const int h = k / 4, p = k % 4;
  const __m256i low = load_32_bytes(block.ql + 64 * h + 32 * (p % 2));
  const __m256i nibbles = _mm256_and_si256(p < 2 ? low : _mm256_srli_epi16(low, 4), bytes_of(0x0F));
  const __m256i high = load_32_bytes(block.qh + 32 * h);
  __m256i top;  // Bits 2p..2p+1 of qh moved to bits 4-5.
  switch (p) {
    case 0:
      top = _mm256_slli_epi16(high, 4);
      break;
    case 1:
      top = _mm256_slli_epi16(high, 2);
      break;
    case 2:
      top = high;
      break;
    default:
      top = _mm256_srli_epi16(high, 2);
      break;
  }
  return _mm256_or_si256(nibbles, _mm256_and_si256(top, bytes_of(0x30)));
}

// Scales of elements 32k..32k+31 as int16 lanes.
inline __m256i scales_of(const BlockQ6K*, const RowBlock& row, int k) {
  return _mm256_set_m128i(_mm_set1_epi16(row.scales[2 * k + 1]), _mm_set1_epi16(row.scales[2 * k]));
}
inline __m256i scales_of(const void*, const RowBlock& row, int k) {
  return _mm256_set1_epi16(row.scales[k]);
}

// Adds block `b` of one weight row against Columns activation rows into sums.
template <typename Block, int Columns>
inline void accumulate_block(const Block& block, const char* activations,
                             int64_t activation_row_bytes, int64_t b, __m256 (&sums)[Columns]) {
  constexpr bool kHasMins = has_mins<Block>;
  const ActivationBlock* a[Columns];
  for (int c = 0; c < Columns; ++c) {
    a[c] = reinterpret_cast<const ActivationBlock*>(activations + c * activation_row_bytes) + b;
  }
  RowBlock row;
  prepare(block, row);
  __m256i dots[Columns];
  __m256i min_dots[Columns];
  for (int c = 0; c < Columns; ++c) {
    // Q4_K/Q5_K: sum(min * a) per 32 (4 lanes); Q6_K: the offset, folded into the dots.
    const __m256i sums = kHasMins ? _mm256_zextsi128_si256(_mm_loadu_si128(
                                        reinterpret_cast<const __m128i*>(a[c]->sums32)))
                                  : load_32_bytes(a[c]->sums16);
    min_dots[c] = _mm256_madd_epi16(row.mins_or_offsets, sums);
    dots[c] = kHasMins ? _mm256_setzero_si256() : min_dots[c];
  }
  for (int k = 0; k < 8; ++k) {
    const __m256i levels = levels_of(block, k);
    const __m256i scales = scales_of(&block, row, k);
    for (int c = 0; c < Columns; ++c) {
      const __m256i products = _mm256_maddubs_epi16(levels, load_32_bytes(a[c]->q + 32 * k));
      dots[c] = _mm256_add_epi32(dots[c], _mm256_madd_epi16(products, scales));
    }
  }
  for (int c = 0; c < Columns; ++c) {
    const float activation_scale = a[c]->scale;
    sums[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[c]),
                              _mm256_set1_ps(row.d * activation_scale), sums[c]);
    if constexpr (kHasMins) {
      sums[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(min_dots[c]),
                                 _mm256_set1_ps(row.dmin * activation_scale), sums[c]);
    }
  }
}

// out[c * out_stride] for one weight row and Columns activation rows.
template <typename Block, int Columns>
struct RowDot {
  static void run(const Block* weights, const char* activations, int64_t activation_row_bytes,
                  int64_t blocks, float* out, int64_t out_stride) {
    const StreamPrefetch prefetch = stream_prefetch(Isa::avx2, 0);
    __m256 sums[Columns];
    for (__m256& sum : sums) sum = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      prefetch.lines<sizeof(Block)>(weights + b);
      accumulate_block<Block, Columns>(weights[b], activations, activation_row_bytes, b, sums);
    }
    for (int c = 0; c < Columns; ++c) out[c * out_stride] = simd::sum_of_8(sums[c]);
  }
};

// One row's running dot for StreamRowDotOf.
template <typename Block>
struct RowSum {
  static constexpr Isa kIsa = Isa::avx2;
  __m256 sum[1] = {_mm256_setzero_ps()};
  void add(const Block& block, const char* activations, int64_t b) {
    accumulate_block<Block, 1>(block, activations, 0, b, sum);
  }
  float total() const { return simd::sum_of_8(sum[0]); }
};
template <typename Block>
using StreamRowDot = StreamRowDotOf<Block, RowSum<Block>>;

}  // namespace

FORNACE_KQUANT_ENTRY_POINTS(avx2, StreamRowDot)

void quantize_activations_avx2(const float* in, void* out, int64_t n) {
  auto* blocks = static_cast<ActivationBlock*>(out);
  const __m256 magnitude_bits = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i largest_q = _mm256_set1_epi32(127);
  const __m256i smallest_q = _mm256_set1_epi32(-127);
  for (int64_t b = 0; b < n / kBlockElements; ++b) {
    const float* x = in + b * kBlockElements;
    ActivationBlock& block = blocks[b];
    __m256 largest = _mm256_setzero_ps();
    for (int i = 0; i < kBlockElements; i += 8) {
      // The running max second: a NaN is passed over, as std::max(amax, |x|) does.
      largest = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), magnitude_bits), largest);
    }
    const float amax = simd::max_of_8(largest);
    const __m256 inverse = _mm256_set1_ps(amax > 0 ? 127.f / amax : 0.f);
    block.scale = amax / 127.f;
    // Per 32 elements: 4 vectors of q (vcvtps2dq rounds to nearest even, as nearest_int), packed
    // to bytes in order, and the 8-lane sums of each 16 (sums[2k], sums[2k + 1]).
    __m256i sums[16];
    for (int group = 0; group < kBlockElements / 32; ++group) {
      __m256i q[4];
      for (int part = 0; part < 4; ++part) {
        const __m256 scaled = _mm256_mul_ps(_mm256_loadu_ps(x + 32 * group + 8 * part), inverse);
        q[part] =
            _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(scaled), largest_q), smallest_q);
      }
      const __m256i bytes = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
          _mm256_set_epi32(7, 3, 6, 2, 5, 1, 4, 0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.q + 32 * group), bytes);
      sums[2 * group] = _mm256_add_epi32(q[0], q[1]);
      sums[2 * group + 1] = _mm256_add_epi32(q[2], q[3]);
    }
    // Horizontal sums, 4 at a time: lanes k of the hadd tree's halves are sums[first + k]'s.
    __m128i sums16[4];
    for (int first = 0; first < 16; first += 4) {
      const __m256i tree = _mm256_hadd_epi32(_mm256_hadd_epi32(sums[first], sums[first + 1]),
                                             _mm256_hadd_epi32(sums[first + 2], sums[first + 3]));
      sums16[first / 4] =
          _mm_add_epi32(_mm256_castsi256_si128(tree), _mm256_extracti128_si256(tree, 1));
    }
    const __m128i low = _mm_packs_epi32(sums16[0], sums16[1]);
    const __m128i high = _mm_packs_epi32(sums16[2], sums16[3]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(block.sums16), low);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(block.sums16 + 8), high);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(block.sums32), _mm_hadd_epi16(low, high));
    std::memset(block.padding, 0, sizeof(block.padding));
  }
}

template <BlockType Type>
void widen_row_f32_avx2(const void* blocks, float* out, int64_t n) {
  f32_kernel::widen_row<BlockOf<Type>, f32_kernel::WidenToF32>(blocks, out, n);
}
template void widen_row_f32_avx2<BlockType::q4_k>(const void*, float*, int64_t);
template void widen_row_f32_avx2<BlockType::q5_k>(const void*, float*, int64_t);
template void widen_row_f32_avx2<BlockType::q6_k>(const void*, float*, int64_t);

}  // namespace fornace::cpu::kquant
