// dot_rows_f32 for Q4_K, Q5_K and Q6_K, written once over simd.h's vectors and included by
// quant_k_avx2.cpp and quant_k_avx512.cpp: levels widened to f32 in registers, one FMA each into
// their scale and min, then f32 FMAs against the unrounded activations.
#pragma once

#include "cpu/quant.h"
#include "cpu/quant_k_blocks.h"
#include "cpu/simd.h"

namespace fornace::cpu::kquant {
namespace {
namespace f32_kernel {

using simd::Int;
using simd::kWidth;
using simd::Vec;

#if defined(__AVX512F__)
inline Int load_bytes(const uint8_t* source) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(source)));
}
inline Int bits_and(Int a, int32_t mask) { return _mm512_and_si512(a, _mm512_set1_epi32(mask)); }
inline Int bits_or(Int a, Int b) { return _mm512_or_si512(a, b); }
template <int Shift>
inline Int shift_right(Int a) {
  return _mm512_srli_epi32(a, Shift);
}
template <int Shift>
inline Int shift_left(Int a) {
  return _mm512_slli_epi32(a, Shift);
}
inline Vec to_float(Int a) { return _mm512_cvtepi32_ps(a); }
#else
inline Int load_bytes(const uint8_t* source) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(source)));
}
inline Int bits_and(Int a, int32_t mask) { return _mm256_and_si256(a, _mm256_set1_epi32(mask)); }
inline Int bits_or(Int a, Int b) { return _mm256_or_si256(a, b); }
template <int Shift>
inline Int shift_right(Int a) {
  return _mm256_srli_epi32(a, Shift);
}
template <int Shift>
inline Int shift_left(Int a) {
  return _mm256_slli_epi32(a, Shift);
}
inline Vec to_float(Int a) { return _mm256_cvtepi32_ps(a); }
#endif

// Moves bit `From` of each lane to bit `To` (other bits cleared).
template <int From, int To>
inline Int move_bit(Int a) {
  if constexpr (From > To) {
    return bits_and(shift_right<From - To>(a), 1 << To);
  } else {
    return bits_and(shift_left<To - From>(a), 1 << To);
  }
}

// Level * scale - offset in one rounding: the product is exact in f32 (an f16 times a 6- or
// 8-bit scale times a 6-bit level), so these are dequantize_row's values.
inline Vec block_values(Int levels, float scale, float offset) {
  return simd::multiply_add(to_float(levels), simd::broadcast(scale), simd::broadcast(-offset));
}

// accumulate_block(block, consumer) hands the consumer the block's values kWidth at a time as
// consume(levels, element, scale, offset): weights = levels * scale - offset.

// The sums of one weight row against Columns activation rows, each in kChains registers (so
// consecutive FMAs do not wait on each other). The loops that call consume() are unrolled, so
// the chain index is a constant.
constexpr int kChains = 4;
template <int Columns>
struct Accumulators {
  Vec sums[Columns][kChains];
  const float* activations[Columns];

  // Weights = level * scale - offset, for elements [element, element + kWidth) of the block.
  void consume(Int levels, int element, float scale, float offset) {
    const Vec weights = block_values(levels, scale, offset);
    const int chain = (element / kWidth) % kChains;
    for (int c = 0; c < Columns; ++c) {
      sums[c][chain] =
          simd::multiply_add(weights, simd::load(activations[c] + element), sums[c][chain]);
    }
  }
};

template <typename Consumer>
void accumulate_block(const BlockQ4K& block, Consumer& acc) {
  const ScalesAndMins packed = unpack_scales_and_mins(block.scales);
  const float d = _cvtsh_ss(block.d), dmin = _cvtsh_ss(block.dmin);
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const float scale_low = d * static_cast<uint8_t>(packed.scales >> (16 * g));
    const float scale_high = d * static_cast<uint8_t>(packed.scales >> (16 * g + 8));
    const float min_low = dmin * static_cast<uint8_t>(packed.mins >> (16 * g));
    const float min_high = dmin * static_cast<uint8_t>(packed.mins >> (16 * g + 8));
#pragma GCC unroll 4
    for (int s = 0; s < 32; s += kWidth) {
      const Int bytes = load_bytes(block.qs + 32 * g + s);
      acc.consume(bits_and(bytes, 0xF), 64 * g + s, scale_low, min_low);
      acc.consume(shift_right<4>(bytes), 64 * g + 32 + s, scale_high, min_high);
    }
  }
}

template <typename Consumer>
void accumulate_block(const BlockQ5K& block, Consumer& acc) {
  const ScalesAndMins packed = unpack_scales_and_mins(block.scales);
  const float d = _cvtsh_ss(block.d), dmin = _cvtsh_ss(block.dmin);
  auto group = [&]<int G>() {
    const float scale_low = d * static_cast<uint8_t>(packed.scales >> (16 * G));
    const float scale_high = d * static_cast<uint8_t>(packed.scales >> (16 * G + 8));
    const float min_low = dmin * static_cast<uint8_t>(packed.mins >> (16 * G));
    const float min_high = dmin * static_cast<uint8_t>(packed.mins >> (16 * G + 8));
#pragma GCC unroll 4
    for (int s = 0; s < 32; s += kWidth) {
      const Int bytes = load_bytes(block.qs + 32 * G + s);
      const Int high = load_bytes(block.qh + s);
      acc.consume(bits_or(bits_and(bytes, 0xF), move_bit<2 * G, 4>(high)), 64 * G + s, scale_low,
                  min_low);
      acc.consume(bits_or(shift_right<4>(bytes), move_bit<2 * G + 1, 4>(high)), 64 * G + 32 + s,
                  scale_high, min_high);
    }
  };
  group.template operator()<0>();
  group.template operator()<1>();
  group.template operator()<2>();
  group.template operator()<3>();
}

template <typename Consumer>
void accumulate_block(const BlockQ6K& block, Consumer& acc) {
  const float d = _cvtsh_ss(block.d);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
    for (int s = 0; s < 32; s += kWidth) {
      const Int low_a = load_bytes(block.ql + 64 * h + s);
      const Int low_b = load_bytes(block.ql + 64 * h + 32 + s);
      const Int high = load_bytes(block.qh + 32 * h + s);
      const Int levels[4] = {bits_or(bits_and(low_a, 0xF), bits_and(shift_left<4>(high), 0x30)),
                             bits_or(bits_and(low_b, 0xF), bits_and(shift_left<2>(high), 0x30)),
                             bits_or(shift_right<4>(low_a), bits_and(high, 0x30)),
                             bits_or(shift_right<4>(low_b), bits_and(shift_right<2>(high), 0x30))};
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        const int element = 128 * h + 32 * p + s;
        const float scale = d * block.scales[element / 16];
        acc.consume(levels[p], element, scale, 32 * scale);
      }
    }
  }
}

// Stores a block's values as f32 at their element.
struct WidenToF32 {
  float* out;
  void consume(Int levels, int element, float scale, float offset) {
    simd::store(out + element, block_values(levels, scale, offset));
  }
};

// One row widened block by block, each block's values stored by Store{its first output}
// (WidenToF32, or an ISA's own).
template <typename Block, typename Store, typename Out>
void widen_row(const void* blocks, Out* out, int64_t n) {
  const auto* row = static_cast<const Block*>(blocks);
  for (int64_t b = 0; b < n / kBlockElements; ++b) {
    Store store{out + b * kBlockElements};
    accumulate_block(row[b], store);
  }
}

// out[c * out_stride] for one weight row and Columns activation rows.
template <typename Block, int Columns>
struct RowDot {
  static void run(const Block* weights, const float* activations, int64_t activation_stride,
                  int64_t blocks, float* out, int64_t out_stride) {
    Accumulators<Columns> acc;
    for (auto& column : acc.sums) {
      for (Vec& sum : column) sum = simd::broadcast(0.f);
    }
    for (int64_t b = 0; b < blocks; ++b) {
      for (int c = 0; c < Columns; ++c) {
        acc.activations[c] = activations + c * activation_stride + b * kBlockElements;
      }
      accumulate_block(weights[b], acc);
    }
    for (int c = 0; c < Columns; ++c) {
      const Vec* chains = acc.sums[c];
      out[c * out_stride] =
          simd::sum(simd::add(simd::add(chains[0], chains[1]), simd::add(chains[2], chains[3])));
    }
  }
};

}  // namespace f32_kernel
}  // namespace
}  // namespace fornace::cpu::kquant
