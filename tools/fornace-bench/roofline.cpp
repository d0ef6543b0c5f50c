// KV bytes per decode step and prefill FLOPs, from the config and the cache shape.
#include "roofline.h"

namespace fornace::bench {

double kv_bytes_read_per_token(const KvCacheShape& shape, int64_t num_layers, int64_t prompt_tokens,
                               int64_t decode_steps) {
  if (decode_steps <= 0) return 0;
  double total = 0;
  for (int64_t step = 0; step < decode_steps; ++step) {
    total +=
        static_cast<double>(KvCacheSet::bytes_read(num_layers, shape, prompt_tokens + step + 1));
  }
  return total / static_cast<double>(decode_steps);
}

double prefill_linear_gflop(const ModelConfig& config, int64_t tokens) {
  const double hidden = static_cast<double>(config.hidden_size);
  const double query_width = static_cast<double>(config.num_attention_heads * config.head_dim());
  const double kv_width = static_cast<double>(config.num_key_value_heads * config.head_dim());
  const double intermediate = static_cast<double>(config.intermediate_size);
  const double layers = static_cast<double>(config.num_hidden_layers);
  const double weights_per_layer =
      2 * hidden * query_width + 2 * hidden * kv_width + 3 * hidden * intermediate;
  const double projections = 2 * weights_per_layer * layers * static_cast<double>(tokens);
  const double lm_head = 2 * hidden * static_cast<double>(config.vocab_size);
  return (projections + lm_head) / 1e9;
}

double prefill_gflop(const ModelConfig& config, const KvCacheShape& shape, int64_t tokens) {
  const double query_width = static_cast<double>(config.num_attention_heads * config.head_dim());
  // Query i (1-based) sees i keys, or its window's: scores and the weighted sum of V.
  double keys_seen = 0;
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    for (int64_t query = 1; query <= tokens; ++query) {
      keys_seen += static_cast<double>(shape.positions_held(layer, query));
    }
  }
  const double attention = 2 * 2 * query_width * keys_seen;
  return prefill_linear_gflop(config, tokens) + attention / 1e9;
}

}  // namespace fornace::bench
