// config.json and generation_config.json parsing and validation, and config.json writing.
#include "io/config.h"

#include <cmath>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "io/files.h"
#include "io/json_util.h"

namespace fornace {

namespace {

constexpr int64_t kMaxSize = INT32_MAX;  // Keeps products of sizes far from int64 overflow.

bool present(const nlohmann::json& object, const char* field) {
  return object.contains(field) && !object[field].is_null();
}

int64_t size_field(const nlohmann::json& object, const std::string& source, const char* field,
                   std::optional<int64_t> fallback = std::nullopt) {
  if (!present(object, field)) {
    if (fallback) return *fallback;
    fail(source, ": field '", field, "' is missing");
  }
  int64_t value = io::json_integer(object[field], source, field);
  if (value <= 0) fail(source, ": field '", field, "' must be positive, got ", value);
  if (value > kMaxSize) fail(source, ": field '", field, "' is too large: ", value);
  return value;
}

double positive_number_field(const nlohmann::json& object, const std::string& source,
                             const char* field, double fallback) {
  if (!present(object, field)) return fallback;
  const nlohmann::json& value = object[field];
  if (!value.is_number()) {
    fail(source, ": field '", field, "' must be a number, got ", io::json_preview(value));
  }
  double number = value.get<double>();
  if (!std::isfinite(number) || number <= 0) {
    fail(source, ": field '", field, "' must be positive, got ", io::json_preview(value));
  }
  return number;
}

// eos_token_id as an int or a list of ints; an empty list when absent or null.
std::vector<int64_t> eos_ids_field(const nlohmann::json& object, const std::string& source) {
  const char* field = "eos_token_id";
  std::vector<int64_t> ids;
  if (!present(object, field)) return ids;
  const nlohmann::json& value = object[field];
  if (value.is_array()) {
    for (const nlohmann::json& item : value) ids.push_back(io::json_integer(item, source, field));
  } else {
    ids.push_back(io::json_integer(value, source, field));
  }
  for (int64_t id : ids) {
    if (id < 0) fail(source, ": field '", field, "' must hold non-negative ids, got ", id);
  }
  return ids;
}

bool boolean_field(const nlohmann::json& object, const std::string& source, const char* field,
                   bool fallback) {
  if (!present(object, field)) return fallback;
  if (!object[field].is_boolean()) {
    fail(source, ": field '", field, "' must be true or false, got ",
         io::json_preview(object[field]));
  }
  return object[field].get<bool>();
}

std::string string_field(const nlohmann::json& object, const std::string& source,
                         const char* field, const std::string& fallback) {
  if (!present(object, field)) return fallback;
  if (!object[field].is_string()) {
    fail(source, ": field '", field, "' must be a string, got ", io::json_preview(object[field]));
  }
  return object[field].get<std::string>();
}

// rope_scaling: null, or an object whose "rope_type" (or older "type") is one Fornace runs.
std::optional<RopeScaling> rope_scaling_field(const nlohmann::json& object,
                                              const std::string& source) {
  const char* field = "rope_scaling";
  if (!present(object, field)) return std::nullopt;
  const nlohmann::json& value = object[field];
  if (!value.is_object()) {
    fail(source, ": field '", field, "' must be an object or null, got ", io::json_preview(value));
  }
  std::string scaled = std::string(field) + ".";
  RopeScaling scaling;
  scaling.type = string_field(value, source, "rope_type", string_field(value, source, "type", ""));
  if (scaling.type == "default") return std::nullopt;
  if (scaling.type != "llama3" && scaling.type != "linear") {
    fail(source, ": field 'rope_scaling.rope_type' is '", scaling.type,
         "', which Fornace does not run (supported: llama3, linear, default)");
  }
  scaling.factor = positive_number_field(value, source, "factor", 0);
  if (scaling.factor == 0) fail(source, ": field 'rope_scaling.factor' is missing");
  if (scaling.type == "llama3") {
    scaling.low_freq_factor = positive_number_field(value, source, "low_freq_factor", 1.0);
    scaling.high_freq_factor = positive_number_field(value, source, "high_freq_factor", 4.0);
    scaling.original_max_position_embeddings =
        size_field(value, source, "original_max_position_embeddings", 8192);
    if (scaling.high_freq_factor <= scaling.low_freq_factor) {
      fail(source, ": field 'rope_scaling.high_freq_factor' (", scaling.high_freq_factor,
           ") must exceed low_freq_factor (", scaling.low_freq_factor, ")");
    }
  }
  return scaling;
}

// Which layers are sliding-window layers: layer_types ("sliding_attention" / "full_attention")
// or, in older Gemma 3 configs, sliding_window_pattern (every pattern-th layer is global).
std::vector<bool> sliding_layers_field(const nlohmann::json& object, const std::string& source,
                                       int64_t layers, int64_t default_pattern) {
  std::vector<bool> sliding;
  if (present(object, "layer_types")) {
    const nlohmann::json& types = object["layer_types"];
    if (!types.is_array() || static_cast<int64_t>(types.size()) != layers) {
      fail(source, ": field 'layer_types' must be a list of num_hidden_layers (", layers,
           ") entries, got ", io::json_preview(types));
    }
    for (const nlohmann::json& type : types) {
      if (type == "sliding_attention") {
        sliding.push_back(true);
      } else if (type == "full_attention") {
        sliding.push_back(false);
      } else {
        fail(source, ": field 'layer_types' has the entry ", io::json_preview(type),
             " (expected sliding_attention or full_attention)");
      }
    }
    return sliding;
  }
  if (default_pattern == 0) return sliding;
  int64_t pattern = size_field(object, source, "sliding_window_pattern", default_pattern);
  for (int64_t layer = 0; layer < layers; ++layer) sliding.push_back((layer + 1) % pattern != 0);
  return sliding;
}

// The defaults of Hugging Face's config class for each model_type.
struct FamilyDefaults {
  int64_t max_position_embeddings = 32768;
  double rope_theta = 10000.0;
  int64_t head_dim = 0;  // 0: hidden_size / num_attention_heads
  bool tie_word_embeddings = false;
  const char* activation = "silu";
  int64_t sliding_window_pattern = 0;  // 0: no sliding-window layers
};

FamilyDefaults family_defaults(const std::string& model_type) {
  FamilyDefaults defaults;
  if (model_type == "llama") defaults.max_position_embeddings = 2048;
  if (model_type == "qwen3") defaults.head_dim = 128;
  if (model_type == "gemma3_text") {
    defaults.max_position_embeddings = 131072;
    defaults.rope_theta = 1000000.0;
    defaults.head_dim = 256;
    defaults.tie_word_embeddings = true;
    defaults.activation = "gelu_pytorch_tanh";
    defaults.sliding_window_pattern = 6;
  }
  return defaults;
}

}  // namespace

ModelConfig parse_model_config(std::string_view json, const std::string& source_name) {
  const std::string& source = source_name;
  nlohmann::json object = io::parse_json_object(json, source, "config");
  ModelConfig config;

  if (!present(object, "model_type")) fail(source, ": field 'model_type' is missing");
  if (!object["model_type"].is_string()) {
    fail(source, ": field 'model_type' must be a string, got ",
         io::json_preview(object["model_type"]));
  }
  config.model_type = object["model_type"].get<std::string>();
  const FamilyDefaults defaults = family_defaults(config.model_type);
  const bool gemma = config.model_type == "gemma3_text";

  config.hidden_size = size_field(object, source, "hidden_size");
  config.intermediate_size = size_field(object, source, "intermediate_size");
  config.num_hidden_layers = size_field(object, source, "num_hidden_layers");
  config.num_attention_heads = size_field(object, source, "num_attention_heads");
  config.num_key_value_heads =
      size_field(object, source, "num_key_value_heads", config.num_attention_heads);
  config.vocab_size = size_field(object, source, "vocab_size");
  config.max_position_embeddings =
      size_field(object, source, "max_position_embeddings", defaults.max_position_embeddings);
  config.rope_theta = positive_number_field(object, source, "rope_theta", defaults.rope_theta);
  config.rms_norm_eps = positive_number_field(object, source, "rms_norm_eps", 1e-6);
  config.tie_word_embeddings =
      boolean_field(object, source, "tie_word_embeddings", defaults.tie_word_embeddings);
  config.torch_dtype = string_field(object, source, "torch_dtype", "");
  config.eos_token_ids = eos_ids_field(object, source);

  // HF's Qwen3 and Gemma 3 configs default head_dim (128, 256); the others derive it.
  if (present(object, "head_dim")) {
    config.explicit_head_dim = size_field(object, source, "head_dim");
  } else if (defaults.head_dim) {
    config.explicit_head_dim = defaults.head_dim;
  } else if (config.hidden_size % config.num_attention_heads != 0) {
    fail(source, ": field 'head_dim' is missing, and num_attention_heads (",
         config.num_attention_heads, ") does not divide hidden_size (", config.hidden_size, ")");
  }
  config.attention_bias = config.model_type == "qwen2" ||
                          boolean_field(object, source, "attention_bias", false);
  if (boolean_field(object, source, "mlp_bias", false)) {
    fail(source, ": field 'mlp_bias' is true, which Fornace does not run");
  }
  config.rope_scaling = rope_scaling_field(object, source);
  const char* activation_field = present(object, "hidden_activation") ? "hidden_activation"
                                                                      : "hidden_act";
  config.hidden_activation = string_field(object, source, activation_field, defaults.activation);
  if (config.hidden_activation != defaults.activation) {
    fail(source, ": field '", activation_field, "' is '", config.hidden_activation, "', but ",
         config.model_type, " runs ", defaults.activation);
  }

  config.sliding_layers =
      sliding_layers_field(object, source, config.num_hidden_layers,
                           defaults.sliding_window_pattern);
  bool any_sliding = false;
  for (bool sliding : config.sliding_layers) any_sliding = any_sliding || sliding;
  if (any_sliding && !gemma) {
    fail(source, ": field 'layer_types' names sliding_attention layers, which Fornace runs only "
         "for gemma3_text");
  }
  if (!gemma && boolean_field(object, source, "use_sliding_window", false)) {
    fail(source, ": field 'use_sliding_window' is true, which Fornace does not run for ",
         config.model_type);
  }
  if (gemma) {
    config.sliding_window = size_field(object, source, "sliding_window", 4096);
    config.query_pre_attn_scalar =
        positive_number_field(object, source, "query_pre_attn_scalar", 256);
    config.rope_local_base_freq =
        positive_number_field(object, source, "rope_local_base_freq", 10000.0);
    config.final_logit_softcapping =
        positive_number_field(object, source, "final_logit_softcapping", 0);
    if (boolean_field(object, source, "use_bidirectional_attention", false)) {
      fail(source, ": field 'use_bidirectional_attention' is true, which Fornace does not run");
    }
    if (present(object, "attn_logit_softcapping")) {
      fail(source, ": field 'attn_logit_softcapping' is set, which Fornace does not run");
    }
  }
  if (config.rope_scaling && config.rope_scaling->type == "linear" && !gemma) {
    fail(source, ": field 'rope_scaling.rope_type' is 'linear', which Fornace runs only for "
         "gemma3_text");
  }

  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    fail(source, ": field 'num_key_value_heads' (", config.num_key_value_heads,
         ") does not divide num_attention_heads (", config.num_attention_heads, ")");
  }
  if (config.head_dim() % 2 != 0) {
    fail(source, ": head_dim (", config.head_dim(), ") must be even for rotary embeddings");
  }
  return config;
}

ModelConfig load_model_config(const std::string& directory) {
  namespace fs = std::filesystem;
  std::string config_path = (fs::path(directory) / "config.json").string();
  ModelConfig config = parse_model_config(read_file(config_path), config_path);

  std::string generation_path = (fs::path(directory) / "generation_config.json").string();
  std::error_code error;
  if (fs::exists(fs::symlink_status(generation_path, error))) {
    nlohmann::json generation =
        io::parse_json_object(read_file(generation_path), generation_path, "generation config");
    std::vector<int64_t> ids = eos_ids_field(generation, generation_path);
    if (!ids.empty()) config.eos_token_ids = ids;
  }
  return config;
}

std::string model_config_to_json(const ModelConfig& config) {
  nlohmann::ordered_json object;
  static const std::pair<const char*, const char*> kArchitectures[] = {
      {"qwen2", "Qwen2ForCausalLM"},
      {"llama", "LlamaForCausalLM"},
      {"qwen3", "Qwen3ForCausalLM"},
      {"gemma3_text", "Gemma3ForCausalLM"}};
  for (const auto& [type, architecture] : kArchitectures) {
    if (config.model_type == type) object["architectures"] = {architecture};
  }
  const bool gemma = config.model_type == "gemma3_text";
  object["model_type"] = config.model_type;
  object[gemma ? "hidden_activation" : "hidden_act"] = config.hidden_activation;
  object["hidden_size"] = config.hidden_size;
  object["intermediate_size"] = config.intermediate_size;
  object["num_hidden_layers"] = config.num_hidden_layers;
  object["num_attention_heads"] = config.num_attention_heads;
  object["num_key_value_heads"] = config.num_key_value_heads;
  if (config.explicit_head_dim) object["head_dim"] = config.explicit_head_dim;
  object["vocab_size"] = config.vocab_size;
  object["max_position_embeddings"] = config.max_position_embeddings;
  object["rope_theta"] = config.rope_theta;
  object["rms_norm_eps"] = config.rms_norm_eps;
  object["tie_word_embeddings"] = config.tie_word_embeddings;
  if (config.model_type != "qwen2") object["attention_bias"] = config.attention_bias;
  if (config.rope_scaling) {
    nlohmann::ordered_json scaling;
    scaling["rope_type"] = config.rope_scaling->type;
    scaling["factor"] = config.rope_scaling->factor;
    if (config.rope_scaling->type == "llama3") {
      scaling["low_freq_factor"] = config.rope_scaling->low_freq_factor;
      scaling["high_freq_factor"] = config.rope_scaling->high_freq_factor;
      scaling["original_max_position_embeddings"] =
          config.rope_scaling->original_max_position_embeddings;
    }
    object["rope_scaling"] = scaling;
  } else {
    object["rope_scaling"] = nullptr;
  }
  if (gemma) {
    object["query_pre_attn_scalar"] = config.query_pre_attn_scalar;
    object["sliding_window"] = config.sliding_window;
    object["rope_local_base_freq"] = config.rope_local_base_freq;
    nlohmann::ordered_json types = nlohmann::ordered_json::array();
    for (bool sliding : config.sliding_layers) {
      types.push_back(sliding ? "sliding_attention" : "full_attention");
    }
    object["layer_types"] = types;
    if (config.final_logit_softcapping > 0) {
      object["final_logit_softcapping"] = config.final_logit_softcapping;
    } else {
      object["final_logit_softcapping"] = nullptr;
    }
    object["attn_logit_softcapping"] = nullptr;
  }
  if (!config.torch_dtype.empty()) object["torch_dtype"] = config.torch_dtype;
  if (config.eos_token_ids.size() == 1) {
    object["eos_token_id"] = config.eos_token_ids[0];
  } else if (!config.eos_token_ids.empty()) {
    object["eos_token_id"] = config.eos_token_ids;
  }
  return object.dump(2) + "\n";
}

}  // namespace fornace
