// Qwen2 (and Qwen2.5): a decoder with grouped-query attention, q/k/v biases and SwiGLU.
#pragma once

#include <memory>

#include "io/safetensors.h"
#include "models/model.h"

namespace fornace {

std::unique_ptr<Model> load_qwen2(const ModelConfig& config, const Checkpoint& checkpoint,
                                  const ModelOptions& options);

}  // namespace fornace
