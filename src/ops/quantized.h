// Ops on block-quantized matrices: linear layers on the blocks, embedding rows, decode's
// interleaved copy, and widening to a float tensor; rows rounded to blocks (a quantized KV cache).
#pragma once

#include <optional>
#include <span>

#include "core/quantized_matrix.h"
#include "core/tensor.h"
#include "ops/math.h"

namespace fornace {

// output [..., N] (contiguous f32) = input [..., K] (f32 or bf16) · weightᵀ + bias, weight
// [N, K] quantized. `activation_rounding`: the input rows rounded to 8-bit blocks (once, or with
// the residual rounded again) for integer dot products, or kept f32 against weights widened in
// registers. A prefill's rows run as the GEMM that BF16 weights take, which widens the weights
// (bf16 rows where quantized_linear_input_dtype says so); other input is taken as f32.
void quantized_linear_into(const Tensor& output, const Tensor& input, const QuantizedMatrix& weight,
                           const std::optional<Tensor>& bias,
                           ActivationRounding activation_rounding);

// One layer of quantized_linear_group_into.
struct QuantizedLayerInto {
  const Tensor* output;
  const QuantizedMatrix* weight;
  const std::optional<Tensor>* bias;
};
// quantized_linear_into for several layers over one input (Q, K and V; gate and up), in one pass
// of the threads (cpu::quantized_linear_group): at most 8 layers, each weight K wide.
void quantized_linear_group_into(const Tensor& input, std::span<const QuantizedLayerInto> layers,
                                 ActivationRounding activation_rounding);

// The dtype the layers take as it is for `rows` input rows: bf16 where they run as the BF16 GEMM
// (which would round f32 rows to bf16 anyway), so that the op before can write bf16; else f32.
DType quantized_linear_input_dtype(int64_t rows, ActivationRounding activation_rounding);

// Gate and up over `input`, then activation(gate) * up into `output` (f32 or bf16, gate's
// shape), as linear_gated_into does for float layers (cpu::quantized_linear_gated): gate's and
// up's outputs are its scratch.
void quantized_linear_gated_into(const Tensor& output, const Tensor& input,
                                 const QuantizedLayerInto& gate, const QuantizedLayerInto& up,
                                 ActivationRounding activation_rounding, GateActivation activation);

// output [B, S, columns] (contiguous f32) = the rows `ids` [B, S] (u32) of `table`, widened.
void quantized_rows_into(const Tensor& output, const QuantizedMatrix& table, const Tensor& ids);

// The whole matrix widened to a contiguous [rows, columns] tensor of `dtype`.
Tensor dequantize(const QuantizedMatrix& matrix, DType dtype);

// Rows of blocks as a tensor (a quantized KV cache's): each row of D values is D / 32 GGUF blocks
// in ceil(bytes / 4) 32-bit words, so that a u32 tensor [..., words] views, narrows and copies
// as any other. Throws Error unless `type` is Q8_0 or Q4_0 and D a multiple of 32.
int64_t block_row_words(BlockType type, int64_t elements);
// `rows` [..., D] (any float dtype and layout) rounded to blocks of `type` by llama.cpp's
// reference quantizer: a contiguous u32 [..., block_row_words(type, D)].
Tensor quantize_rows(const Tensor& rows, BlockType type);
// The values that such rows stand for: a contiguous f32 [..., D].
Tensor dequantize_rows(const Tensor& blocks, BlockType type, int64_t elements);

}  // namespace fornace
