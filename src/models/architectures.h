// The loaders of the architectures Fornace runs, one per model_type (see registry.cpp).
#pragma once

#include <memory>

#include "io/safetensors.h"
#include "models/model.h"

namespace fornace {

using ArchitectureLoader = std::unique_ptr<Model> (*)(const ModelConfig&, const Checkpoint&,
                                                       const ModelOptions&);

std::unique_ptr<Model> load_llama(const ModelConfig& config, const Checkpoint& checkpoint,
                                  const ModelOptions& options);
std::unique_ptr<Model> load_qwen2(const ModelConfig& config, const Checkpoint& checkpoint,
                                  const ModelOptions& options);
std::unique_ptr<Model> load_qwen3(const ModelConfig& config, const Checkpoint& checkpoint,
                                  const ModelOptions& options);
std::unique_ptr<Model> load_gemma3(const ModelConfig& config, const Checkpoint& checkpoint,
                                   const ModelOptions& options);

}  // namespace fornace
