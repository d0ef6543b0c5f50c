// The loaders of the architectures Fornace runs, one per model_type (see registry.cpp).
#pragma once

#include <memory>

#include "io/weight_source.h"
#include "models/model.h"

namespace fornace {

using ArchitectureLoader = std::unique_ptr<Model> (*)(const ModelConfig&, const WeightSource&,
                                                       const ModelOptions&);

std::unique_ptr<Model> load_llama(const ModelConfig& config, const WeightSource& source,
                                  const ModelOptions& options);
std::unique_ptr<Model> load_qwen2(const ModelConfig& config, const WeightSource& source,
                                  const ModelOptions& options);
std::unique_ptr<Model> load_qwen3(const ModelConfig& config, const WeightSource& source,
                                  const ModelOptions& options);
std::unique_ptr<Model> load_gemma3(const ModelConfig& config, const WeightSource& source,
                                   const ModelOptions& options);

}  // namespace fornace
