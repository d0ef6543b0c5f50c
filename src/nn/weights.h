// Reads a model's tensors from its checkpoint: checked against the shapes its config implies and
// converted to the dtype the user asked for.
#pragma once

#include <optional>
#include <string>

#include "io/safetensors.h"
#include "nn/layers.h"

namespace fornace {

class WeightReader {
 public:
  WeightReader(const Checkpoint& checkpoint, std::optional<DType> dtype)
      : checkpoint_(checkpoint), dtype_(dtype) {}

  // Throws Error naming the checkpoint and the tensor when it is missing, has another shape
  // than `shape`, or is not a float tensor.
  Tensor tensor(const std::string& name, const Dims& shape) const;
  bool contains(const std::string& name) const { return checkpoint_.contains(name); }
  // <name>.weight [outputs, inputs] and, with `bias`, <name>.bias [outputs], widened to f32 once
  // here rather than at every forward pass.
  Linear linear(const std::string& name, int64_t outputs, int64_t inputs, bool bias) const;
  // <name> [size] as an RMSNorm weight.
  RmsNorm rms_norm(const std::string& name, int64_t size, double eps) const;

 private:
  const Checkpoint& checkpoint_;
  std::optional<DType> dtype_;
};

}  // namespace fornace
