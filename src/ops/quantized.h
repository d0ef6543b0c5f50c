// Ops on block-quantized matrices: linear layers on the blocks, embedding rows, decode's
// interleaved copy, and widening to a float tensor.
#pragma once

#include <optional>
#include <span>

#include "core/quantized_matrix.h"
#include "core/tensor.h"
#include "ops/math.h"

namespace fornace {

// output [..., N] (contiguous f32) = input [..., K] (f32) · weightᵀ + bias, weight [N, K]
// quantized. `activation_rounding`: the input rows rounded to 8-bit blocks (once, or with the
// residual rounded again) for integer dot products, or kept f32 against weights widened in
// registers.
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

// output [B, S, columns] (contiguous f32) = the rows `ids` [B, S] (u32) of `table`, widened.
void quantized_rows_into(const Tensor& output, const QuantizedMatrix& table, const Tensor& ids);

// The whole matrix widened to a contiguous [rows, columns] tensor of `dtype`.
Tensor dequantize(const QuantizedMatrix& matrix, DType dtype);

}  // namespace fornace
