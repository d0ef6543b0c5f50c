// The ISA-specific GEMM micro-kernels and GEMV kernels behind gemm.h, and their panel formats.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace fornace::cpu::kernels {

// Packed panels. An input panel holds kernel-rows rows of up to kPanelDepth* elements each, at a
// fixed row stride of kInputRowStride* elements (bf16 for the bf16 kernel, f32 otherwise): one
// cache line more than the depth, so that the rows do not all fall in one L1 set; rows past the
// input are zero. A weight panel holds kernel-columns weight rows, transposed: for the f32
// kernels [k][column], for the bf16 kernel [k / 2][column][2] (the pairs vdpbf16ps multiplies).
constexpr int64_t kPanelDepthBf16 = 2048;
constexpr int64_t kPanelDepthF32 = 1024;
constexpr int64_t kInputRowStrideBf16 = kPanelDepthBf16 + 32;
constexpr int64_t kInputRowStrideF32 = kPanelDepthF32 + 16;

// One full rows x columns tile: c = (accumulate ? c : bias row or 0) + a-panel · b-panel over
// `steps` k-steps (k pairs for bf16, single k otherwise). The input panel's rows are
// input_row_stride elements apart (kInputRowStride* when packed; bf16 input rows may also be read
// in place); c has row stride c_stride. `prefetch`, where not null, is where the kernel prefetches
// from as it runs, two lines a k step (the pace at which it reads a bf16 panel): the bf16 kernel
// does; the f32 kernels, whose panels are packed per chunk into scratch, are given null.
using MicroKernel = void (*)(int64_t steps, const void* input_panel, int64_t input_row_stride,
                             const void* weight_panel, float* c, int64_t c_stride,
                             bool accumulate, const float* bias, const void* prefetch);

void gemm_bf16_12x32_avx512(int64_t steps, const void* input_panel, int64_t input_row_stride,
                            const void* weight_panel, float* c, int64_t c_stride, bool accumulate,
                            const float* bias, const void* prefetch);
// The same for 32 rows on AMX tiles (cpu::amx_selected()): 16 k pairs a tile product, the last
// pairs (steps % 16) on vdpbf16ps.
void gemm_bf16_32x32_amx(int64_t steps, const void* input_panel, int64_t input_row_stride,
                         const void* weight_panel, float* c, int64_t c_stride, bool accumulate,
                         const float* bias, const void* prefetch);
void gemm_f32_12x32_avx512(int64_t steps, const void* input_panel, int64_t input_row_stride,
                           const void* weight_panel, float* c, int64_t c_stride, bool accumulate,
                           const float* bias, const void* prefetch);
void gemm_f32_6x16_avx2(int64_t steps, const void* input_panel, int64_t input_row_stride,
                        const void* weight_panel, float* c, int64_t c_stride, bool accumulate,
                        const float* bias, const void* prefetch);

// Packs a bf16 weight panel for gemm_bf16_12x32_avx512: 32 weight rows (columns_valid of them
// real, the rest zero) of k_count values each, as [k / 2][32][2]; an odd last k pairs with zero.
void pack_bf16_pairs_avx512(const uint16_t* weight, int64_t weight_stride, int64_t columns_valid,
                            int64_t k_count, void* panel);

// Packs an f32 weight panel for gemm_f32_12x32_avx512 from f32, f16 or bf16 weights: 32 weight
// rows (columns_valid of them real, the rest zero) of k_count values each, as [k][32].
void pack_f32_columns_avx512(const void* weight, DType weight_dtype, int64_t weight_stride,
                             int64_t columns_valid, int64_t k_count, void* panel);

// The same for gemm_f32_6x16_avx2: 16 weight rows as [k][16].
void pack_f32_columns_avx2(const void* weight, DType weight_dtype, int64_t weight_stride,
                           int64_t columns_valid, int64_t k_count, void* panel);
using WeightPanelPacker = void (*)(const void* weight, DType weight_dtype, int64_t weight_stride,
                                   int64_t columns_valid, int64_t k_count, void* panel);

// The scalar form of those packers, for k in [k_begin, k_end) of a panel `columns` wide.
inline void pack_f32_columns_scalar(const void* weight, DType weight_dtype, int64_t weight_stride,
                                    int64_t columns_valid, int columns, int64_t k_begin,
                                    int64_t k_end, float* destination) {
  for (int column = 0; column < columns; ++column) {
    for (int64_t k = k_begin; k < k_end; ++k) {
      float value = 0.0f;
      if (column < columns_valid) {
        const int64_t index = column * weight_stride + k;
        switch (weight_dtype) {
          case DType::f32:
            value = static_cast<const float*>(weight)[index];
            break;
          case DType::f16:
            value = f16_to_f32(static_cast<const uint16_t*>(weight)[index]);
            break;
          default:
            value = bf16_to_f32(static_cast<const uint16_t*>(weight)[index]);
            break;
        }
      }
      destination[k * columns + column] = value;
    }
  }
}

// f32 -> bf16, round to nearest even (NaN stays NaN).
void convert_f32_to_bf16_avx512(const float* source, uint16_t* destination, int64_t count);

// GEMV over weight rows [begin, end) for up to kGemvMaxRows input rows (kGemvBf16DotMaxRows
// for gemv_bf16_dot_avx512):
// output[r][n] = input[r] · weight[n] + bias[n]. Strides in elements.
struct GemvArguments {
  const void* input;  // f32 rows, or bf16 rows for gemv_bf16_dot_avx512
  int64_t input_stride;
  int rows;
  int64_t depth;
  const void* weight;
  DType weight_dtype;
  int64_t weight_stride;
  const float* bias;
  float* output;
  int64_t output_stride;
};
using GemvKernel = void (*)(const GemvArguments& arguments, int64_t begin, int64_t end);

// bf16 weights with bf16 input, vdpbf16ps.
void gemv_bf16_dot_avx512(const GemvArguments& arguments, int64_t begin, int64_t end);
// The same over weights packed by pack_bf16_weight_avx512 (weight: the packed matrix): weight
// rows [begin, end), begin a multiple of 32.
void gemv_bf16_panels_avx512(const GemvArguments& arguments, int64_t begin, int64_t end);
// Packs panels [panel_begin, panel_end) of a bf16 weight [outputs, depth] (contiguous rows) into
// `packed`: panel p is pack_bf16_pairs_avx512 of weight rows [32p, 32p + 32) over the whole depth,
// at p x packed_bf16_panel_bytes(depth).
void pack_bf16_weight_avx512(const uint16_t* weight, int64_t outputs, int64_t depth, void* packed,
                             int64_t panel_begin, int64_t panel_end);
// How gemv_bf16_dot_avx512 runs several rows, in words (tiles, segments, prefetch).
std::string gemv_bf16_dot_avx512_tiles();
// f32 or f16 weights widened to f32, with f32 input, FMA.
void gemv_f32_avx512(const GemvArguments& arguments, int64_t begin, int64_t end);
// f32, bf16 or f16 weights widened to f32, with f32 input, FMA.
void gemv_f32_avx2(const GemvArguments& arguments, int64_t begin, int64_t end);

}  // namespace fornace::cpu::kernels
