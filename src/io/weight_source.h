// Where a model's weights come from: a safetensors checkpoint or a GGUF file, by Hugging Face
// tensor name.
#pragma once

#include <optional>
#include <string>

#include "core/quantized_matrix.h"
#include "core/tensor.h"

namespace fornace {

// A stored weight: a float tensor, or a block-quantized matrix used in place.
struct StoredWeight {
  Tensor tensor;
  std::optional<QuantizedMatrix> quantized;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The directory or file, for messages.
  virtual const std::string& origin() const = 0;
  virtual bool contains(const std::string& name) const = 0;
  // Throws Error naming the origin and the tensor when it is missing.
  virtual StoredWeight weight(const std::string& name) const = 0;
};

}  // namespace fornace
