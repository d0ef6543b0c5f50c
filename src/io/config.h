// A model's config.json (and generation_config.json) as a validated ModelConfig.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fornace {

struct ModelConfig {
  std::string model_type;  // "qwen2"
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  std::string torch_dtype;             // "bfloat16", "float32", ... as written; may be empty.
  std::vector<int64_t> eos_token_ids;  // generation_config.json first, else config.json.

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
};

// Parses config.json text. Throws Error naming `source_name` and the field for malformed JSON,
// a non-object, missing fields, zero or negative sizes, or heads that do not divide the sizes.
ModelConfig parse_model_config(std::string_view json, const std::string& source_name);
// Reads <directory>/config.json and, when present, <directory>/generation_config.json.
ModelConfig load_model_config(const std::string& directory);
// The config as config.json text (for synthetic checkpoints).
std::string model_config_to_json(const ModelConfig& config);

}  // namespace fornace
