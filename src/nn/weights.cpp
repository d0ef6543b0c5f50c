// Checked, converted reads of a checkpoint's tensors.
#include "nn/weights.h"

#include "core/error.h"
#include "ops/copy.h"

namespace fornace {

Tensor WeightReader::tensor(const std::string& name, const Dims& shape) const {
  Tensor tensor = checkpoint_.tensor(name);
  if (!(tensor.shape() == shape)) {
    fail(checkpoint_.directory(), ": tensor ", name, " has shape ", tensor.shape().to_string(),
         " but the config needs ", shape.to_string());
  }
  if (!is_float(tensor.dtype())) {
    fail(checkpoint_.directory(), ": tensor ", name, " has dtype ", dtype_name(tensor.dtype()));
  }
  if (dtype_ && tensor.dtype() != *dtype_) return to_dtype(tensor, *dtype_);
  return tensor;
}

Linear WeightReader::linear(const std::string& name, int64_t outputs, int64_t inputs,
                            bool bias) const {
  std::optional<Tensor> bias_values;
  if (bias) bias_values = to_dtype(tensor(name + ".bias", {outputs}), DType::f32);
  return Linear(tensor(name + ".weight", {outputs, inputs}), bias_values);
}

RmsNorm WeightReader::rms_norm(const std::string& name, int64_t size, double eps) const {
  return RmsNorm(tensor(name, {size}), eps);
}

}  // namespace fornace
