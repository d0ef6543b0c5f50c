// The byte layouts of GGUF's Q4_K, Q5_K and Q6_K blocks, the 8-bit activation block their dot
// products take, and the per-ISA kernel entry points behind k_block_kernels().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/block_type.h"
#include "cpu/prefetch.h"
#include "cpu/quant.h"

namespace fornace::cpu::kquant {

constexpr int kBlockElements = 256;

// ggml's block_q4_K: value = d * scale[j] * q - dmin * min[j] for sub-block j of 32 elements,
// with the 6-bit scales and mins packed into 12 bytes (see unpack_scales_and_mins).
struct BlockQ4K {
  uint16_t d;     // f16
  uint16_t dmin;  // f16
  uint8_t scales[12];
  uint8_t qs[128];  // 32-byte groups g: low nibbles are elements 64g..+31, high ones 64g+32..+63
};
// ggml's block_q5_K: Q4_K's nibbles plus a fifth bit per element; element 64g + i (i < 32)
// takes bit 2g of qh[i], element 64g + 32 + i bit 2g + 1.
struct BlockQ5K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// ggml's block_q6_K: value = d * scales[e / 16] * (q - 32), q of 6 bits. In half h (elements
// 128h..128h+127), element 128h + 32p + l (p < 4, l < 32) takes its low 4 bits from
// ql[64h + 32(p % 2) + l] (low nibble for p < 2, high for p >= 2) and its top 2 bits from
// bits 2p..2p+1 of qh[32h + l].
struct BlockQ6K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ4K) == 144 && sizeof(BlockQ5K) == 176 && sizeof(BlockQ6K) == 210);

template <BlockType Type>
using BlockOf = std::conditional_t<Type == BlockType::q4_k, BlockQ4K,
                                   std::conditional_t<Type == BlockType::q5_k, BlockQ5K, BlockQ6K>>;

// Q4_K and Q5_K subtract a min per sub-block; Q6_K an offset of 32 levels.
template <typename Block>
constexpr bool has_mins = !std::is_same_v<Block, BlockQ6K>;

// 256 activations rounded to int8 (value = scale * q, |q| <= 127) with the sums of q that fold
// the weights' mins (per 32) and Q6_K's offset of 32 (per 16). Elements in their natural order.
struct ActivationBlock {
  int8_t q[256];
  int16_t sums16[16];
  int16_t sums32[8];
  float scale;
  uint8_t padding[12];  // Keeps blocks 64 bytes apart.
};
static_assert(sizeof(ActivationBlock) == 320);

// The eight 6-bit scales and mins of a Q4_K/Q5_K block, from their 12-byte packing: sub-blocks
// 0-3 keep theirs in the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 have
// their low 4 bits in bytes 8-11 (scale low nibble, min high nibble) and their top 2 bits in the
// top 2 bits of bytes 0-3 (scales) and 4-7 (mins). Bytes j of the results are sub-block j's.
// (Internal linkage: the ISA-specific translation units each keep their own copy.)
struct ScalesAndMins {
  uint64_t scales;
  uint64_t mins;
};
namespace {
inline ScalesAndMins unpack_scales_and_mins(const uint8_t* packed) {
  uint32_t word[3];
  std::memcpy(word, packed, sizeof(word));
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  const uint32_t scales_low = word[0] & kLow6;
  const uint32_t mins_low = word[1] & kLow6;
  const uint32_t scales_high = (word[2] & kLow4) | (((word[0] >> 6) & kLow2) << 4);
  const uint32_t mins_high = ((word[2] >> 4) & kLow4) | (((word[1] >> 6) & kLow2) << 4);
  return {scales_low | (uint64_t{scales_high} << 32), mins_low | (uint64_t{mins_high} << 32)};
}

// Calls run.template operator()<Columns>(first) for each group of at most kQuantMaxColumns
// activation rows starting at `first`, so kernels are compiled per column count.
template <typename Run>
void for_column_groups(int64_t columns, Run&& run) {
  for (int64_t first = 0; first < columns; first += kQuantMaxColumns) {
    switch (std::min<int64_t>(kQuantMaxColumns, columns - first)) {
      case 1:
        run.template operator()<1>(first);
        break;
      case 2:
        run.template operator()<2>(first);
        break;
      case 3:
        run.template operator()<3>(first);
        break;
      default:
        run.template operator()<4>(first);
        break;
    }
  }
}

// A kernel's decode dot of 4 weight rows at once (StreamRowDot<Block>::run), where it has one;
// this one has none.
template <typename Block>
struct NoStreamRowDot {};

// Decode where several streams pay (streams_rows): 4 weight rows against one activation
// row, each row's blocks in turn, so that the core reads 4 sequential streams at once. RowSum is
// an ISA's running dot of one row with one activation row: add(block, activations, b), total();
// RowSum::kIsa its level.
template <typename Block, typename RowSum>
struct StreamRowDotOf {
  static constexpr int kRows = 4;
  static constexpr Isa kIsa = RowSum::kIsa;
  static void run(const Block* const (&weights)[kRows], const char* activations, int64_t blocks,
                  float (&out)[kRows]) {
    RowSum sums[kRows];
    const StreamPrefetch prefetch = stream_prefetch(kIsa, 0);  // Where streams run: into L2.
    for (int64_t b = 0; b < blocks; ++b) {
      for (int r = 0; r < kRows; ++r) {
        prefetch.lines<sizeof(Block)>(weights[r] + b);
        sums[r].add(weights[r][b], activations, b);
      }
    }
    for (int r = 0; r < kRows; ++r) out[r] = sums[r].total();
  }
};

// Rows [0, returned) of `rows` (row_of(r): weight row r) against one activation row, 4 a pass a
// quarter of the rows apart, where StreamRowDot has a kernel and several streams pay; 0 otherwise.
template <template <typename> class StreamRowDot, typename RowOf, typename Activations>
int64_t dot_row_streams(const RowOf& row_of, size_t row_bytes, int64_t rows,
                        const Activations* activations, int64_t blocks, float* out) {
  using Block = std::remove_const_t<std::remove_pointer_t<decltype(row_of(0))>>;
  if constexpr (requires { StreamRowDot<Block>::kRows; }) {
    constexpr int kRows = StreamRowDot<Block>::kRows;
    auto pass = [&](int64_t first, int64_t spacing) {
      const Block* streams[kRows];
      float sums[kRows];
      for (int s = 0; s < kRows; ++s) streams[s] = row_of(first + s * spacing);
      StreamRowDot<Block>::run(streams, activations, blocks, sums);
      for (int s = 0; s < kRows; ++s) out[first + s * spacing] = sums[s];
    };
    return run_row_streams(StreamRowDot<Block>::kIsa, row_of(0), row_bytes, rows, kRows, pass);
  } else {
    return 0;
  }
}

// The body of every dot_rows*: RowDot<Block, Columns>::run(row, activations, activation_stride,
// blocks, out, out_stride) for each weight row and group of activation rows (Activations is char
// for int8 blocks, with a stride in bytes, or float, with a stride in floats); for one activation
// row where several streams pay (streams_rows), StreamRowDot's 4 rows a quarter apart.
template <BlockType Type, template <typename, int> class RowDot,
          template <typename> class StreamRowDot, typename Activations>
void dot_rows_with(const void* weights, size_t weight_row_bytes, int64_t rows,
                   const Activations* activations, int64_t activation_stride, int64_t columns,
                   int64_t n, float* out, int64_t out_stride) {
  using Block = BlockOf<Type>;
  auto row_of = [&](int64_t r) {
    return reinterpret_cast<const Block*>(static_cast<const char*>(weights) + r * weight_row_bytes);
  };
  for_column_groups(columns, [&]<int Columns>(int64_t first_column) {
    int64_t r = 0;
    if constexpr (Columns == 1) {
      r = dot_row_streams<StreamRowDot>(row_of, weight_row_bytes, rows,
                                        activations + first_column * activation_stride,
                                        n / kBlockElements, out + first_column * out_stride);
    }
    for (; r < rows; ++r) {
      RowDot<Block, Columns>::run(row_of(r), activations + first_column * activation_stride,
                                  activation_stride, n / kBlockElements,
                                  out + first_column * out_stride + r, out_stride);
    }
  });
}
}  // namespace

// The kernels of one ISA for one type, instantiated in quant_k.cpp (portable),
// quant_k_avx2.cpp and quant_k_avx512.cpp. Signatures as in BlockKernels.
template <BlockType Type>
void dot_rows_portable(const void* weights, size_t weight_row_bytes, int64_t rows,
                       const void* activations, size_t activation_row_bytes, int64_t columns,
                       int64_t n, float* out, int64_t out_stride);
template <BlockType Type>
void dot_rows_avx2(const void* weights, size_t weight_row_bytes, int64_t rows,
                   const void* activations, size_t activation_row_bytes, int64_t columns, int64_t n,
                   float* out, int64_t out_stride);
template <BlockType Type>
void dot_rows_avx512(const void* weights, size_t weight_row_bytes, int64_t rows,
                     const void* activations, size_t activation_row_bytes, int64_t columns,
                     int64_t n, float* out, int64_t out_stride);

template <BlockType Type>
void dot_rows_f32_portable(const void* weights, size_t weight_row_bytes, int64_t rows,
                           const float* activations, int64_t activation_stride, int64_t columns,
                           int64_t n, float* out, int64_t out_stride);
template <BlockType Type>
void dot_rows_f32_avx2(const void* weights, size_t weight_row_bytes, int64_t rows,
                       const float* activations, int64_t activation_stride, int64_t columns,
                       int64_t n, float* out, int64_t out_stride);
template <BlockType Type>
void dot_rows_f32_avx512(const void* weights, size_t weight_row_bytes, int64_t rows,
                         const float* activations, int64_t activation_stride, int64_t columns,
                         int64_t n, float* out, int64_t out_stride);

// quantize_activations (quant_k.cpp) in AVX2 registers, bit for bit (AVX-512 takes it too).
void quantize_activations_avx2(const float* in, void* out, int64_t n);

// One row widened to bf16 in registers (BlockKernels::widen_row_bf16).
template <BlockType Type>
void widen_row_bf16_avx512(const void* blocks, uint16_t* out, int64_t n);
// One row widened to f32 in registers (BlockKernels::widen_row_f32).
template <BlockType Type>
void widen_row_f32_avx2(const void* blocks, float* out, int64_t n);
template <BlockType Type>
void widen_row_f32_avx512(const void* blocks, float* out, int64_t n);

}  // namespace fornace::cpu::kquant

// Defines and instantiates dot_rows_<ISA> and dot_rows_f32_<ISA> for the three types in a kernel
// translation unit, from its RowDot and STREAM_ROW_DOT (int8 activations) and f32_kernel::RowDot.
#define FORNACE_KQUANT_ENTRY_POINTS(ISA, STREAM_ROW_DOT)                                          \
  template <BlockType Type>                                                                       \
  void dot_rows_##ISA(const void* weights, size_t weight_row_bytes, int64_t rows,                \
                      const void* activations, size_t activation_row_bytes, int64_t columns,      \
                      int64_t n, float* out, int64_t out_stride) {                                \
    dot_rows_with<Type, RowDot, STREAM_ROW_DOT>(weights, weight_row_bytes, rows,                  \
                                static_cast<const char*>(activations),                            \
                                static_cast<int64_t>(activation_row_bytes), columns, n, out,      \
                                out_stride);                                                      \
  }                                                                                               \
  template <BlockType Type>                                                                       \
  void dot_rows_f32_##ISA(const void* weights, size_t weight_row_bytes, int64_t rows,            \
                          const float* activations, int64_t activation_stride, int64_t columns,   \
                          int64_t n, float* out, int64_t out_stride) {                            \
    dot_rows_with<Type, f32_kernel::RowDot, NoStreamRowDot>(                                      \
        weights, weight_row_bytes, rows, activations, activation_stride, columns, n, out,         \
        out_stride);                                                                              \
  }                                                                                               \
  FORNACE_KQUANT_INSTANTIATE(ISA, BlockType::q4_k)                                                \
  FORNACE_KQUANT_INSTANTIATE(ISA, BlockType::q5_k)                                                \
  FORNACE_KQUANT_INSTANTIATE(ISA, BlockType::q6_k)
#define FORNACE_KQUANT_INSTANTIATE(ISA, TYPE)                                                     \
  template void dot_rows_##ISA<TYPE>(const void*, size_t, int64_t, const void*, size_t, int64_t, \
                                     int64_t, float*, int64_t);                                   \
  template void dot_rows_f32_##ISA<TYPE>(const void*, size_t, int64_t, const float*, int64_t,    \
                                         int64_t, int64_t, float*, int64_t);
