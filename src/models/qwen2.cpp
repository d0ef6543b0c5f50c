// Qwen2 and Qwen2.5: Llama with biases on the q, k and v projections (config.attention_bias is
// always set for qwen2), and none on o_proj.
#include "models/architectures.h"
#include "models/llama.h"

namespace fornace {

std::unique_ptr<Model> load_qwen2(const ModelConfig& config, const WeightSource& source,
                                  const ModelOptions& options) {
  return load_llama_variant(config, source, options, {.output_bias = false});
}

}  // namespace fornace
