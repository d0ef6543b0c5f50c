// A model's config.json (and generation_config.json) as a validated ModelConfig.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fornace {

// rope_scaling of config.json: how the rotary frequencies are stretched for long contexts.
struct RopeScaling {
  std::string type;  // "llama3" (Llama 3.1/3.2) or "linear" (Gemma 3's global layers)
  double factor = 1.0;
  double low_freq_factor = 1.0;                    // llama3
  double high_freq_factor = 4.0;                   // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3
};

struct ModelConfig {
  std::string model_type;  // "qwen2", "llama", "qwen3" or "gemma3_text"
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
  // The config's head_dim; 0 when absent (then hidden_size / num_attention_heads).
  int64_t explicit_head_dim = 0;
  bool attention_bias = false;  // q, k and v projections have biases (always for qwen2).
  std::optional<RopeScaling> rope_scaling;
  std::string hidden_activation = "silu";  // or "gelu_pytorch_tanh" (Gemma 3)
  // Gemma 3: attention scale query_pre_attn_scalar^-0.5 (0: head_dim), local layers see the last
  // sliding_window positions and rotate by rope_local_base_freq; final logits soft-capped.
  double query_pre_attn_scalar = 0;
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // Per layer: a sliding-window (local) layer. Empty: none.
  double rope_local_base_freq = 10000.0;
  double final_logit_softcapping = 0;  // 0: none
  // GGUF's rope_freqs tensor (llama.cpp's form of llama3 scaling): each inverse frequency is
  // divided by its entry. Empty: none.
  std::vector<double> rope_frequency_divisors;

  int64_t head_dim() const {
    return explicit_head_dim ? explicit_head_dim : hidden_size / num_attention_heads;
  }
  bool is_sliding(int64_t layer) const {
    return layer < static_cast<int64_t>(sliding_layers.size()) && sliding_layers[layer];
  }
};

// Parses config.json text. Throws Error naming `source_name` and the field for malformed JSON,
// a non-object, missing fields, zero or negative sizes, heads that do not divide the sizes, and
// fields of the model_type that Fornace does not run (an unknown rope_scaling type or
// layer_types entry, attention logit soft-capping, ...). An unknown model_type itself is left
// to the model registry.
ModelConfig parse_model_config(std::string_view json, const std::string& source_name);
// Reads <directory>/config.json and, when present, <directory>/generation_config.json.
ModelConfig load_model_config(const std::string& directory);
// The config as config.json text (for synthetic checkpoints).
std::string model_config_to_json(const ModelConfig& config);

}  // namespace fornace
