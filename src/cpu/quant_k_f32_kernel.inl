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
inline Int shift_right(Int a) { return _mm512_srli_epi32(a, Shift); }
template <int Shift>
inline Int shift_left(Int a) { return _mm512_slli_epi32(a, Shift); }
inline Vec to_float(Int a) { return _mm512_cvtepi32_ps(a); }
#else
inline Int load_bytes(const uint8_t* source) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(source)));
}
inline Int bits_and(Int a, int32_t mask) { return _mm256_and_si256(a, _mm256_set1_epi32(mask)); }
inline Int bits_or(Int a, Int b) { return _mm256_or_si256(a, b); }
template <int Shift>
inline Int shift_right(Int a) { return _mm256_srli_epi32(a, Shift); }
template <int Shift>
inline Int shift_left(Int a) { return _mm256_slli_epi32(a, Shift); }
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

// Rows x Columns accumulators; each consume() adds kWidth weights of one row.
template <int Rows, int Columns>
struct Accumulators {
  Vec sums[Rows][Columns];
  const float* activations[Columns];

  // Weights = level * scale - offset, for elements [element, element + kWidth) of the block.
  void consume(int row, Int levels, int element, float scale, float offset) {
    const Vec weights =
        simd::multiply_add(to_float(levels), simd::broadcast(scale), simd::broadcast(-offset));
    for (int c = 0; c < Columns; ++c) {
      sums[row][c] = simd::multiply_add(weights, simd::load(activations[c] + element), sums[row][c]);
    }
  }
};

template <int Rows, int Columns>
void accumulate_block(const BlockQ4K* blocks[Rows], Accumulators<Rows, Columns>& acc) {
  for (int r = 0; r < Rows; ++r) {
    const BlockQ4K& block = *blocks[r];
    const ScalesAndMins packed = unpack_scales_and_mins(block.scales);
    const float d = _cvtsh_ss(block.d), dmin = _cvtsh_ss(block.dmin);
    for (int g = 0; g < 4; ++g) {
      const float scale_low = d * static_cast<uint8_t>(packed.scales >> (16 * g));
      const float scale_high = d * static_cast<uint8_t>(packed.scales >> (16 * g + 8));
      const float min_low = dmin * static_cast<uint8_t>(packed.mins >> (16 * g));
      const float min_high = dmin * static_cast<uint8_t>(packed.mins >> (16 * g + 8));
      for (int s = 0; s < 32; s += kWidth) {
        const Int bytes = load_bytes(block.qs + 32 * g + s);
        acc.consume(r, bits_and(bytes, 0xF), 64 * g + s, scale_low, min_low);
        acc.consume(r, shift_right<4>(bytes), 64 * g + 32 + s, scale_high, min_high);
      }
    }
  }
}

template <int Rows, int Columns>
void accumulate_block(const BlockQ5K* blocks[Rows], Accumulators<Rows, Columns>& acc) {
  for (int r = 0; r < Rows; ++r) {
    const BlockQ5K& block = *blocks[r];
    const ScalesAndMins packed = unpack_scales_and_mins(block.scales);
    const float d = _cvtsh_ss(block.d), dmin = _cvtsh_ss(block.dmin);
    auto group = [&]<int G>() {
      const float scale_low = d * static_cast<uint8_t>(packed.scales >> (16 * G));
      const float scale_high = d * static_cast<uint8_t>(packed.scales >> (16 * G + 8));
      const float min_low = dmin * static_cast<uint8_t>(packed.mins >> (16 * G));
      const float min_high = dmin * static_cast<uint8_t>(packed.mins >> (16 * G + 8));
      for (int s = 0; s < 32; s += kWidth) {
        const Int bytes = load_bytes(block.qs + 32 * G + s);
        const Int high = load_bytes(block.qh + s);
        acc.consume(r, bits_or(bits_and(bytes, 0xF), move_bit<2 * G, 4>(high)), 64 * G + s,
                    scale_low, min_low);
        acc.consume(r, bits_or(shift_right<4>(bytes), move_bit<2 * G + 1, 4>(high)),
                    64 * G + 32 + s, scale_high, min_high);
      }
    };
    group.template operator()<0>();
    group.template operator()<1>();
    group.template operator()<2>();
    group.template operator()<3>();
  }
}

template <int Rows, int Columns>
void accumulate_block(const BlockQ6K* blocks[Rows], Accumulators<Rows, Columns>& acc) {
  for (int r = 0; r < Rows; ++r) {
    const BlockQ6K& block = *blocks[r];
    const float d = _cvtsh_ss(block.d);
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 32; s += kWidth) {
        const Int low_a = load_bytes(block.ql + 64 * h + s);
        const Int low_b = load_bytes(block.ql + 64 * h + 32 + s);
        const Int high = load_bytes(block.qh + 32 * h + s);
        const Int levels[4] = {
            bits_or(bits_and(low_a, 0xF), bits_and(shift_left<4>(high), 0x30)),
            bits_or(bits_and(low_b, 0xF), bits_and(shift_left<2>(high), 0x30)),
            bits_or(shift_right<4>(low_a), bits_and(high, 0x30)),
            bits_or(shift_right<4>(low_b), bits_and(shift_right<2>(high), 0x30))};
        for (int p = 0; p < 4; ++p) {
          const int element = 128 * h + 32 * p + s;
          const float scale = d * block.scales[element / 16];
          acc.consume(r, levels[p], element, scale, 32 * scale);
        }
      }
    }
  }
}

template <typename Block, int Rows, int Columns>
void dot_tile(const char* weights, size_t weight_row_bytes, const float* activations,
              int64_t activation_stride, int64_t blocks, float* out, int64_t out_stride) {
  Accumulators<Rows, Columns> acc;
  for (auto& row : acc.sums) {
    for (Vec& sum : row) sum = simd::broadcast(0.f);
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const Block* row_blocks[Rows];
    for (int r = 0; r < Rows; ++r) {
      row_blocks[r] = reinterpret_cast<const Block*>(weights + r * weight_row_bytes) + b;
    }
    for (int c = 0; c < Columns; ++c) {
      acc.activations[c] = activations + c * activation_stride + b * kBlockElements;
    }
    accumulate_block<Rows, Columns>(row_blocks, acc);
  }
  for (int r = 0; r < Rows; ++r) {
    for (int c = 0; c < Columns; ++c) out[c * out_stride + r] = simd::sum(acc.sums[r][c]);
  }
}

template <BlockType Type>
void dot_rows_f32(const void* weights, size_t weight_row_bytes, int64_t rows,
                  const float* activations, int64_t activation_stride, int64_t columns, int64_t n,
                  float* out, int64_t out_stride) {
  const auto* bytes = static_cast<const char*>(weights);
  for_column_groups(columns, [&]<int Columns>(int64_t first_column) {
    for_row_tiles<Columns == 1 ? 4 : 2>(rows, [&]<int Rows>(int64_t first_row) {
      dot_tile<BlockOf<Type>, Rows, Columns>(
          bytes + first_row * weight_row_bytes, weight_row_bytes,
          activations + first_column * activation_stride, activation_stride, n / kBlockElements,
          out + first_column * out_stride + first_row, out_stride);
    });
  });
}

}  // namespace f32_kernel
}  // namespace
}  // namespace fornace::cpu::kquant
