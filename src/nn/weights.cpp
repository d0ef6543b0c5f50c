// Checked, converted reads of a checkpoint's tensors.
#include "nn/weights.h"

#include "core/error.h"
#include "nn/packed_weights.h"
#include "ops/copy.h"
#include "ops/quantized.h"

namespace fornace {
namespace {

// A copy of its own: a few KiB read at every step would otherwise keep the whole 2 MiB page of
// the mapping around it resident, once the packed weights' pages are released.
Tensor resident_copy(const Tensor& stored) {
  Tensor copy = Tensor::empty(stored.shape(), stored.dtype());
  copy_into(copy, stored);
  return copy;
}

// Whether quantized layers with 8-bit input read a copy packed at load: only in 2 MiB pages.
// In 4 KiB pages the interleaved quads' 512-bit loads, most of which straddle two cache lines,
// stream from memory at about half the rate of the stored blocks (micro-quant-matmul on a
// std::vector, Zen 5), where in 2 MiB pages they are as fast or faster.
bool packs_quantized(ActivationRounding rounding, const PackedWeights& packed) {
  return rounding != ActivationRounding::f32 && packed.huge_pages();
}

}  // namespace

int64_t WeightTally::total() const {
  int64_t sum = 0;
  for (const auto& [format, count] : bytes) sum += count;
  return sum;
}

void WeightReader::count(const Tensor& tensor,
                         const std::shared_ptr<const Storage>& packed) const {
  if (!tally_) return;
  const int64_t bytes = tensor.numel() * tensor.element_size();
  if (packed) {
    tally_->add(dtype_name(tensor.dtype()), bytes, packed, packed->data(), packed->bytes());
  } else {
    tally_->add(dtype_name(tensor.dtype()), bytes, tensor.storage(), tensor.raw(),
                static_cast<size_t>(bytes));
  }
}

void WeightReader::count(const QuantizedMatrix& matrix) const {
  if (tally_) {
    tally_->add(block_format(matrix.type).name, static_cast<int64_t>(matrix.bytes()), matrix.owner,
                matrix.data, matrix.bytes());
  }
}

StoredWeight WeightReader::checked(const std::string& name, const Dims& shape) const {
  StoredWeight stored = source_.weight(name);
  if (stored.quantized) {
    const QuantizedMatrix& matrix = *stored.quantized;
    Dims stored_shape{matrix.rows, matrix.columns};
    if (!(stored_shape == shape)) {
      fail(source_.origin(), ": tensor ", name, " has shape ", stored_shape.to_string(),
           " but the config needs ", shape.to_string());
    }
    if (!dtype_) return stored;
    return {dequantize(matrix, *dtype_), {}};
  }
  const Tensor& tensor = stored.tensor;
  if (!(tensor.shape() == shape)) {
    fail(source_.origin(), ": tensor ", name, " has shape ", tensor.shape().to_string(),
         " but the config needs ", shape.to_string());
  }
  if (!is_float(tensor.dtype())) {
    fail(source_.origin(), ": tensor ", name, " has dtype ", dtype_name(tensor.dtype()));
  }
  if (dtype_ && tensor.dtype() != *dtype_) return {to_dtype(tensor, *dtype_), {}};
  return stored;
}

DType WeightReader::stored_dtype(const std::string& name) const {
  StoredWeight stored = source_.weight(name);
  return stored.quantized ? DType::f32 : stored.tensor.dtype();
}

Tensor WeightReader::tensor(const std::string& name, const Dims& shape) const {
  StoredWeight stored = checked(name, shape);
  if (stored.quantized) return dequantize(*stored.quantized, DType::f32);
  return stored.tensor;
}

Linear WeightReader::linear(const std::string& name, int64_t outputs, int64_t inputs,
                            bool bias) const {
  std::optional<Tensor> bias_values;
  if (bias) {
    bias_values = resident_copy(to_dtype(tensor(name + ".bias", {outputs}), DType::f32));
    count(*bias_values);
  }
  StoredWeight weight = checked(name + ".weight", {outputs, inputs});
  if (weight.quantized) {
    QuantizedMatrix matrix = packs_quantized(activation_rounding_, *packed_)
                                 ? packed_for_int8_input(*weight.quantized, *packed_)
                                 : *weight.quantized;
    count(matrix);
    return Linear(std::move(matrix), bias_values, activation_rounding_);
  }
  Linear layer(weight.tensor, bias_values);
  layer.pack_weight(*packed_);
  count(weight.tensor, layer.packed_weight());
  return layer;
}

Embedding WeightReader::embedding(const std::string& name, int64_t rows, int64_t width) const {
  StoredWeight table = checked(name, {rows, width});
  if (table.quantized) return Embedding(*table.quantized);
  return Embedding(table.tensor);
}

Linear WeightReader::linear_of(Embedding& embedding) const {
  if (embedding.quantized_table()) {
    // The lookups read the head's packed rows too, so the table is resident once. A Q8_0 table
    // (Qwen2.5-0.5B's 139 MiB in Q4_K_M files) stays mapped: its GEMV keeps up with the memory
    // as stored, and the copy would only cost load time.
    if (packs_quantized(activation_rounding_, *packed_) &&
        embedding.quantized_table()->type != BlockType::q8_0) {
      embedding.read_rows_from(packed_for_int8_input(*embedding.quantized_table(), *packed_));
    }
    count(*embedding.quantized_table());
    return Linear(*embedding.quantized_table(), std::nullopt, activation_rounding_);
  }
  Linear layer(embedding.table(), std::nullopt);
  layer.pack_weight(*packed_);
  embedding.read_rows_from(layer.packed_weight());
  count(embedding.table(), layer.packed_weight());
  return layer;
}

RmsNorm WeightReader::rms_norm(const std::string& name, int64_t size, double eps) const {
  return RmsNorm(norm_weight(name, size), eps);
}

Tensor WeightReader::norm_weight(const std::string& name, int64_t size) const {
  Tensor weight = resident_copy(tensor(name, {size}));
  count(weight);
  return weight;
}

}  // namespace fornace
