// Ops on block-quantized matrices: linear layers on the blocks as stored, embedding rows, and
// widening to a float tensor.
#pragma once

#include <optional>

#include "core/quantized_matrix.h"
#include "core/tensor.h"

namespace fornace {

// output [..., N] (contiguous f32) = input [..., K] (f32) · weightᵀ + bias, weight [N, K]
// quantized. With `quantize_input` the input rows are rounded to 8-bit blocks for integer dot
// products; without, they stay f32 against weights widened in registers.
void quantized_linear_into(const Tensor& output, const Tensor& input, const QuantizedMatrix& weight,
                           const std::optional<Tensor>& bias, bool quantize_input);

// output [B, S, columns] (contiguous f32) = the rows `ids` [B, S] (u32) of `table`, widened.
void quantized_rows_into(const Tensor& output, const QuantizedMatrix& table, const Tensor& ids);

// The whole matrix widened to a contiguous [rows, columns] tensor of `dtype`.
Tensor dequantize(const QuantizedMatrix& matrix, DType dtype);

}  // namespace fornace
