// Qwen3: Llama with a per-head RMSNorm on Q and K before RoPE (q_norm, k_norm), head_dim from
// the config (128 on Qwen3-0.6B, not hidden / heads), and no biases.
#include "models/architectures.h"
#include "models/llama.h"

namespace fornace {

std::unique_ptr<Model> load_qwen3(const ModelConfig& config, const WeightSource& source,
                                  const ModelOptions& options) {
  return load_llama_variant(config, source, options, {.query_key_norms = true});
}

}  // namespace fornace
