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

  config.hidden_size = size_field(object, source, "hidden_size");
  config.intermediate_size = size_field(object, source, "intermediate_size");
  config.num_hidden_layers = size_field(object, source, "num_hidden_layers");
  config.num_attention_heads = size_field(object, source, "num_attention_heads");
  // Defaults follow Hugging Face's Qwen2Config.
  config.num_key_value_heads =
      size_field(object, source, "num_key_value_heads", config.num_attention_heads);
  config.vocab_size = size_field(object, source, "vocab_size");
  config.max_position_embeddings = size_field(object, source, "max_position_embeddings", 32768);
  config.rope_theta = positive_number_field(object, source, "rope_theta", 10000.0);
  config.rms_norm_eps = positive_number_field(object, source, "rms_norm_eps", 1e-6);

  if (present(object, "tie_word_embeddings")) {
    if (!object["tie_word_embeddings"].is_boolean()) {
      fail(source, ": field 'tie_word_embeddings' must be true or false, got ",
           io::json_preview(object["tie_word_embeddings"]));
    }
    config.tie_word_embeddings = object["tie_word_embeddings"].get<bool>();
  }
  if (present(object, "torch_dtype")) {
    if (!object["torch_dtype"].is_string()) {
      fail(source, ": field 'torch_dtype' must be a string, got ",
           io::json_preview(object["torch_dtype"]));
    }
    config.torch_dtype = object["torch_dtype"].get<std::string>();
  }
  config.eos_token_ids = eos_ids_field(object, source);

  if (config.hidden_size % config.num_attention_heads != 0) {
    fail(source, ": field 'num_attention_heads' (", config.num_attention_heads,
         ") does not divide hidden_size (", config.hidden_size, ")");
  }
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    fail(source, ": field 'num_key_value_heads' (", config.num_key_value_heads,
         ") does not divide num_attention_heads (", config.num_attention_heads, ")");
  }
  if (config.head_dim() % 2 != 0) {
    fail(source, ": head_dim (hidden_size / num_attention_heads = ", config.head_dim(),
         ") must be even for rotary embeddings");
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
  if (config.model_type == "qwen2") object["architectures"] = {"Qwen2ForCausalLM"};
  object["model_type"] = config.model_type;
  object["hidden_act"] = "silu";
  object["hidden_size"] = config.hidden_size;
  object["intermediate_size"] = config.intermediate_size;
  object["num_hidden_layers"] = config.num_hidden_layers;
  object["num_attention_heads"] = config.num_attention_heads;
  object["num_key_value_heads"] = config.num_key_value_heads;
  object["vocab_size"] = config.vocab_size;
  object["max_position_embeddings"] = config.max_position_embeddings;
  object["rope_theta"] = config.rope_theta;
  object["rms_norm_eps"] = config.rms_norm_eps;
  object["tie_word_embeddings"] = config.tie_word_embeddings;
  if (!config.torch_dtype.empty()) object["torch_dtype"] = config.torch_dtype;
  if (config.eos_token_ids.size() == 1) {
    object["eos_token_id"] = config.eos_token_ids[0];
  } else if (!config.eos_token_ids.empty()) {
    object["eos_token_id"] = config.eos_token_ids;
  }
  return object.dump(2) + "\n";
}

}  // namespace fornace
