// Ops that move elements: contiguous, reshape, cat, slice_set, index_select, to_dtype.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace fornace {

// The tensor itself when its layout is contiguous; otherwise a contiguous copy.
Tensor contiguous(const Tensor& input);
// When reshape may return a view: whenever the strides allow one (PyTorch's view semantics), or
// only when the input is contiguous, as Candle's Tensor::reshape does (candle-core tensor.rs): a
// non-contiguous input is then copied through the strided copy even where a view would do.
enum class ReshapeViews { when_strides_allow, only_when_contiguous };
// A view as `views` allows; otherwise a contiguous copy with the new shape. One extent may be -1.
Tensor reshape(const Tensor& input, const Dims& shape,
               ReshapeViews views = ReshapeViews::when_strides_allow);
// Copies `source` into `destination` element for element; shapes must match, layouts may differ.
// Counts the bytes as contiguous when both are contiguous, else as strided.
void copy_into(const Tensor& destination, const Tensor& source);

// Concatenates along `dim`, mirroring Candle's Tensor::cat (candle-core/src/tensor_cat.rs):
// when every input is contiguous, each input is copied as blocks into a contiguous result.
// Otherwise, for dim != 0 the inputs are transposed so that `dim` comes first, joined along
// dim 0 with strided copies, and the result is transposed back, so it is not contiguous and a
// cache built by repeated cat pays the strided copy again at every step.
Tensor cat(const std::vector<Tensor>& inputs, int64_t dim);

// Writes `source` into `destination` at `offset` along `dim`. Both must be contiguous, as in
// Candle's slice_set; a strided source is rejected rather than copied.
void slice_set(const Tensor& destination, const Tensor& source, int64_t dim, int64_t offset);

// Rows of `table` (along dim 0) picked by the i32/u32 `ids`; the result has shape
// ids.shape + table.shape[1:]. Out-of-range ids throw Error.
Tensor index_select(const Tensor& table, const Tensor& ids);
// The same rows written into `output` (contiguous, of the result's shape), converted to its dtype.
void index_select_into(const Tensor& output, const Tensor& table, const Tensor& ids);
// The same for a bf16 matrix `table` whose rows are read from its packed copy `packed`
// (PackedWeights::pack(table), nn/packed_weights.h) rather than from the table's own bytes.
void index_select_packed_into(const Tensor& output, const Tensor& table, const Storage& packed,
                              const Tensor& ids);

// A contiguous copy converted to `dtype` (the tensor itself when the dtype already matches and
// it is contiguous). Float to bf16/f16 rounds to nearest even.
Tensor to_dtype(const Tensor& input, DType dtype);

}  // namespace fornace
