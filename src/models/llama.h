// Llama and the families whose Hugging Face code derives from it (Qwen2, Qwen3): pre-norm
// layers of grouped-query attention and a SwiGLU MLP, each with its own small differences.
#pragma once

#include <memory>

#include "io/weight_source.h"
#include "models/model.h"

namespace fornace {

// What a Llama-derived family adds; biases on q, k and v come from config.attention_bias.
struct LlamaVariant {
  bool query_key_norms = false;  // Per-head RMSNorm on Q and K before RoPE (Qwen3).
  bool output_bias = true;       // o_proj has a bias when q, k and v do (not so in Qwen2).
};

std::unique_ptr<Model> load_llama_variant(const ModelConfig& config, const WeightSource& source,
                                          const ModelOptions& options, LlamaVariant variant);

}  // namespace fornace
