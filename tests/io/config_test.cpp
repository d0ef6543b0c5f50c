// Tests of config.json / generation_config.json parsing, validation and writing.
#include "io/config.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "io/test_files.h"

namespace fornace {
namespace {

using test_support::error_message;
using test_support::expect_message_names;
using test_support::TemporaryDirectory;
using test_support::write_bytes;

// config.json of Qwen/Qwen2.5-0.5B-Instruct as published.
const char kQwen25Config[] = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "hidden_act": "silu",
  "hidden_size": 896,
  "initializer_range": 0.02,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 21,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.1",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

// A minimal valid config with one field replaced (or removed when `value` is empty).
std::string config_with(const std::string& field, const std::string& value) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"model_type", "\"qwen2\""}, {"hidden_size", "64"},        {"intermediate_size", "128"},
      {"num_hidden_layers", "2"},  {"num_attention_heads", "4"}, {"num_key_value_heads", "2"},
      {"vocab_size", "1000"},      {"rms_norm_eps", "1e-6"}};
  std::string text = "{";
  bool replaced = false;
  for (auto& [name, original] : fields) {
    std::string written = original;
    if (name == field) {
      replaced = true;
      if (value.empty()) continue;
      written = value;
    }
    text += (text.size() > 1 ? ", \"" : "\"") + name + "\": " + written;
  }
  if (!replaced && !value.empty()) text += ", \"" + field + "\": " + value;
  return text + "}";
}

std::string parse_error(const std::string& text) {
  return error_message([&] { parse_model_config(text, "dir/config.json"); });
}

TEST(ModelConfig, ParsesThePublishedQwen25Config) {
  ModelConfig config = parse_model_config(kQwen25Config, "config.json");
  EXPECT_EQ(config.model_type, "qwen2");
  EXPECT_EQ(config.hidden_size, 896);
  EXPECT_EQ(config.intermediate_size, 4864);
  EXPECT_EQ(config.num_hidden_layers, 24);
  EXPECT_EQ(config.num_attention_heads, 14);
  EXPECT_EQ(config.num_key_value_heads, 2);
  EXPECT_EQ(config.vocab_size, 151936);
  EXPECT_EQ(config.max_position_embeddings, 32768);
  EXPECT_EQ(config.rope_theta, 1e6);
  EXPECT_EQ(config.rms_norm_eps, 1e-6);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(config.torch_dtype, "bfloat16");
  EXPECT_EQ(config.eos_token_ids, (std::vector<int64_t>{151645}));
  EXPECT_EQ(config.head_dim(), 64);
}

// config.json of meta-llama/Llama-3.2-1B, Qwen/Qwen3-0.6B and google/gemma-3-270m as published.
const char kLlama32Config[] = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256
})";
const char kQwen3Config[] = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
})";
const char kGemma3Config[] = R"({
  "_sliding_window_pattern": 6, "architectures": ["Gemma3ForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "attn_logit_softcapping": null, "bos_token_id": 2, "eos_token_id": 1,
  "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 640, "initializer_range": 0.02, "intermediate_size": 2048,
  "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
    "sliding_attention", "sliding_attention", "full_attention", "sliding_attention",
    "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
    "full_attention", "sliding_attention", "sliding_attention", "sliding_attention",
    "sliding_attention", "sliding_attention", "full_attention"],
  "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 4,
  "num_hidden_layers": 18, "num_key_value_heads": 1, "pad_token_id": 0,
  "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0,
  "rope_scaling": null, "rope_theta": 1000000.0, "sliding_window": 512,
  "torch_dtype": "bfloat16", "transformers_version": "4.55.0.dev0",
  "use_bidirectional_attention": false, "use_cache": true, "vocab_size": 262144
})";

TEST(ModelConfig, ParsesThePublishedConfigsOfTheNewFamilies) {
  ModelConfig llama = parse_model_config(kLlama32Config, "config.json");
  EXPECT_EQ(llama.head_dim(), 64);
  EXPECT_FALSE(llama.attention_bias);
  EXPECT_TRUE(llama.tie_word_embeddings);
  ASSERT_TRUE(llama.rope_scaling.has_value());
  EXPECT_EQ(llama.rope_scaling->type, "llama3");
  EXPECT_EQ(llama.rope_scaling->factor, 32.0);
  EXPECT_EQ(llama.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(llama.rms_norm_eps, 1e-5);
  EXPECT_TRUE(llama.sliding_layers.empty());

  ModelConfig qwen3 = parse_model_config(kQwen3Config, "config.json");
  EXPECT_EQ(qwen3.head_dim(), 128);  // Not hidden / heads = 64.
  EXPECT_FALSE(qwen3.rope_scaling.has_value());
  EXPECT_EQ(qwen3.max_position_embeddings, 40960);

  ModelConfig gemma = parse_model_config(kGemma3Config, "config.json");
  EXPECT_EQ(gemma.head_dim(), 256);
  EXPECT_EQ(gemma.hidden_activation, "gelu_pytorch_tanh");
  EXPECT_EQ(gemma.sliding_window, 512);
  EXPECT_EQ(gemma.query_pre_attn_scalar, 256);
  EXPECT_EQ(gemma.rope_local_base_freq, 10000.0);
  EXPECT_EQ(gemma.final_logit_softcapping, 0);
  ASSERT_EQ(gemma.sliding_layers.size(), 18u);
  for (int64_t layer = 0; layer < 18; ++layer) {
    EXPECT_EQ(gemma.is_sliding(layer), (layer + 1) % 6 != 0) << layer;
  }
  // The older spelling: sliding_window_pattern, with every 6th layer global by default.
  std::string pattern = kGemma3Config;
  size_t begin = pattern.find("\"layer_types\"");
  pattern.erase(begin, pattern.find("],", begin) + 2 - begin);
  ModelConfig from_pattern = parse_model_config(pattern, "config.json");
  EXPECT_EQ(from_pattern.sliding_layers, gemma.sliding_layers);
  // Written and parsed back, each keeps every field.
  for (const ModelConfig& config : {llama, qwen3, gemma}) {
    ModelConfig back = parse_model_config(model_config_to_json(config), "config.json");
    EXPECT_EQ(back.head_dim(), config.head_dim());
    EXPECT_EQ(back.sliding_layers, config.sliding_layers);
    EXPECT_EQ(back.rope_scaling.has_value(), config.rope_scaling.has_value());
    EXPECT_EQ(back.tie_word_embeddings, config.tie_word_embeddings);
    EXPECT_EQ(back.query_pre_attn_scalar, config.query_pre_attn_scalar);
  }
}

TEST(ModelConfig, OptionalFieldsTakeHuggingFaceDefaults) {
  ModelConfig config = parse_model_config(config_with("num_key_value_heads", ""), "config.json");
  EXPECT_EQ(config.num_key_value_heads, 4);
  EXPECT_EQ(config.rope_theta, 10000.0);
  EXPECT_EQ(config.max_position_embeddings, 32768);
  EXPECT_FALSE(config.tie_word_embeddings);
  EXPECT_TRUE(config.eos_token_ids.empty());
  EXPECT_TRUE(config.torch_dtype.empty());
}

TEST(ModelConfig, UnsupportedModelTypeIsParsedForTheRegistryToJudge) {
  EXPECT_EQ(parse_model_config(config_with("model_type", "\"llama\""), "c").model_type, "llama");
}

TEST(ModelConfig, WrittenJsonParsesBackToTheSameConfig) {
  ModelConfig config = parse_model_config(kQwen25Config, "config.json");
  config.eos_token_ids = {151645, 151643};
  ModelConfig again = parse_model_config(model_config_to_json(config), "written");
  EXPECT_EQ(again.model_type, config.model_type);
  EXPECT_EQ(again.hidden_size, config.hidden_size);
  EXPECT_EQ(again.intermediate_size, config.intermediate_size);
  EXPECT_EQ(again.num_hidden_layers, config.num_hidden_layers);
  EXPECT_EQ(again.num_attention_heads, config.num_attention_heads);
  EXPECT_EQ(again.num_key_value_heads, config.num_key_value_heads);
  EXPECT_EQ(again.vocab_size, config.vocab_size);
  EXPECT_EQ(again.max_position_embeddings, config.max_position_embeddings);
  EXPECT_EQ(again.rope_theta, config.rope_theta);
  EXPECT_EQ(again.rms_norm_eps, config.rms_norm_eps);
  EXPECT_EQ(again.tie_word_embeddings, config.tie_word_embeddings);
  EXPECT_EQ(again.torch_dtype, config.torch_dtype);
  EXPECT_EQ(again.eos_token_ids, config.eos_token_ids);
}

TEST(ModelConfig, GenerationConfigEosIdsWinAsAList) {
  TemporaryDirectory directory;
  write_bytes(directory.file("config.json"), kQwen25Config);
  write_bytes(directory.file("generation_config.json"),
              R"({"bos_token_id": 151643, "eos_token_id": [151645, 151643], "top_k": 20})");
  EXPECT_EQ(load_model_config(directory.path()).eos_token_ids,
            (std::vector<int64_t>{151645, 151643}));
}

TEST(ModelConfig, GenerationConfigEosIdAsAnInteger) {
  TemporaryDirectory directory;
  write_bytes(directory.file("config.json"), kQwen25Config);
  write_bytes(directory.file("generation_config.json"), R"({"eos_token_id": 7})");
  EXPECT_EQ(load_model_config(directory.path()).eos_token_ids, (std::vector<int64_t>{7}));
}

TEST(ModelConfig, WithoutGenerationConfigEosComesFromConfig) {
  TemporaryDirectory directory;
  write_bytes(directory.file("config.json"), kQwen25Config);
  EXPECT_EQ(load_model_config(directory.path()).eos_token_ids, (std::vector<int64_t>{151645}));
}

TEST(ModelConfig, GenerationConfigWithoutEosKeepsConfigEos) {
  TemporaryDirectory directory;
  write_bytes(directory.file("config.json"), kQwen25Config);
  write_bytes(directory.file("generation_config.json"), R"({"top_p": 0.8})");
  EXPECT_EQ(load_model_config(directory.path()).eos_token_ids, (std::vector<int64_t>{151645}));
}

// --- Errors name the file and the field.

TEST(ModelConfigErrors, GarbageJson) {
  expect_message_names(parse_error("{\"hidden_size\": 64,,}"),
                       {"dir/config.json", "not valid JSON"});
}

TEST(ModelConfigErrors, NonObjectJson) {
  expect_message_names(parse_error("[64]"), {"dir/config.json", "not a JSON object"});
}

TEST(ModelConfigErrors, MissingField) {
  for (const char* field : {"model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "vocab_size"}) {
    expect_message_names(parse_error(config_with(field, "")),
                         {"dir/config.json", std::string("'") + field + "'", "missing"});
  }
}

TEST(ModelConfigErrors, ZeroOrNegativeSizes) {
  for (const char* field :
       {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "vocab_size", "max_position_embeddings"}) {
    for (const char* value : {"0", "-3"}) {
      expect_message_names(parse_error(config_with(field, value)),
                           {"dir/config.json", std::string("'") + field + "'", "positive"});
    }
  }
  expect_message_names(parse_error(config_with("rms_norm_eps", "-1e-6")),
                       {"dir/config.json", "'rms_norm_eps'", "positive"});
  expect_message_names(parse_error(config_with("rope_theta", "0")),
                       {"dir/config.json", "'rope_theta'", "positive"});
}

TEST(ModelConfigErrors, WrongTypes) {
  expect_message_names(parse_error(config_with("hidden_size", "\"64\"")),
                       {"dir/config.json", "'hidden_size'", "integer"});
  expect_message_names(parse_error(config_with("hidden_size", "64.5")),
                       {"dir/config.json", "'hidden_size'", "integer"});
  expect_message_names(parse_error(config_with("tie_word_embeddings", "1")),
                       {"dir/config.json", "'tie_word_embeddings'"});
  expect_message_names(parse_error(config_with("eos_token_id", "[1, \"x\"]")),
                       {"dir/config.json", "'eos_token_id'"});
  expect_message_names(parse_error(config_with("model_type", "3")),
                       {"dir/config.json", "'model_type'"});
  expect_message_names(parse_error(config_with("vocab_size", "99999999999999999999")),
                       {"dir/config.json", "'vocab_size'"});
}

TEST(ModelConfigErrors, HeadDimAbsentWhereHeadsDoNotDivideHiddenSize) {
  expect_message_names(parse_error(config_with("num_attention_heads", "5")),
                       {"dir/config.json", "'head_dim' is missing", "does not divide hidden_size"});
  // With head_dim given, heads need not divide hidden_size (Qwen3-0.6B: 16 x 128 over 1024).
  EXPECT_EQ(parse_model_config(config_with("num_attention_heads", "6").replace(
                                   1, 0, "\"head_dim\": 32, "),
                               "config.json")
                .head_dim(),
            32);
}

// Fields of the new families that Fornace does not run get a line naming the file and field.
TEST(ModelConfigErrors, UnsupportedFieldsOfTheNewFamiliesNameTheField) {
  auto with_type = [](const std::string& type, const std::string& field, const std::string& value) {
    std::string text = config_with(field, value);
    return text.replace(text.find("\"qwen2\""), 7, "\"" + type + "\"");
  };
  expect_message_names(parse_error(with_type("llama", "rope_scaling",
                                             R"({"rope_type": "yarn", "factor": 4.0})")),
                       {"dir/config.json", "'rope_scaling.rope_type'", "yarn", "llama3"});
  expect_message_names(parse_error(with_type("llama", "rope_scaling", R"({"rope_type": "llama3"})")),
                       {"dir/config.json", "'rope_scaling.factor' is missing"});
  expect_message_names(parse_error(with_type("gemma3_text", "layer_types",
                                             R"(["sliding_attention", "chunked_attention"])")),
                       {"dir/config.json", "'layer_types'", "chunked_attention"});
  expect_message_names(parse_error(with_type("gemma3_text", "layer_types", R"(["full_attention"])")),
                       {"dir/config.json", "'layer_types'", "num_hidden_layers (2)"});
  expect_message_names(parse_error(with_type("llama", "layer_types",
                                             R"(["sliding_attention", "full_attention"])")),
                       {"dir/config.json", "'layer_types'", "gemma3_text"});
  expect_message_names(parse_error(with_type("gemma3_text", "attn_logit_softcapping", "50.0")),
                       {"dir/config.json", "'attn_logit_softcapping'"});
  expect_message_names(parse_error(with_type("qwen3", "hidden_act", "\"gelu\"")),
                       {"dir/config.json", "'hidden_act'", "gelu", "silu"});
  expect_message_names(parse_error(with_type("llama", "mlp_bias", "true")),
                       {"dir/config.json", "'mlp_bias'"});
}

TEST(ModelConfigErrors, KeyValueHeadsNotDividingHeads) {
  expect_message_names(parse_error(config_with("num_key_value_heads", "3")),
                       {"dir/config.json", "'num_key_value_heads'", "does not divide"});
}

TEST(ModelConfigErrors, OddHeadDimension) {
  expect_message_names(parse_error(config_with("hidden_size", "36")),
                       {"dir/config.json", "head_dim", "even"});
}

TEST(ModelConfigErrors, MissingConfigFileNamesThePath) {
  TemporaryDirectory directory;
  expect_message_names(error_message([&] { load_model_config(directory.path()); }),
                       {directory.file("config.json"), "no such file"});
}

TEST(ModelConfigErrors, ConfigThatIsADirectory) {
  TemporaryDirectory directory;
  std::filesystem::create_directory(directory.file("config.json"));
  expect_message_names(error_message([&] { load_model_config(directory.path()); }),
                       {directory.file("config.json"), "is a directory"});
}

TEST(ModelConfigErrors, BadGenerationConfigNamesItsFile) {
  TemporaryDirectory directory;
  write_bytes(directory.file("config.json"), kQwen25Config);
  write_bytes(directory.file("generation_config.json"), R"({"eos_token_id": "end"})");
  expect_message_names(error_message([&] { load_model_config(directory.path()); }),
                       {directory.file("generation_config.json"), "'eos_token_id'"});
}

TEST(ModelConfigErrors, MutatedConfigsGiveErrorsNotCrashes) {
  std::string valid = kQwen25Config;
  uint64_t state = 99;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text = valid;
    for (int index = 0; index < 3; ++index) {
      size_t position = next() % text.size();
      if (next() % 2) {
        text[position] = "0-{}[]\",:9 "[next() % 11];
      } else {
        text.erase(position, next() % 8);
      }
      if (text.empty()) text = "{";
    }
    try {
      ModelConfig config = parse_model_config(text, "fuzz");
      ASSERT_GT(config.hidden_size, 0);
      ASSERT_EQ(config.hidden_size % config.num_attention_heads, 0);
    } catch (const Error& error) {
      ASSERT_EQ(std::string(error.what()).rfind("fuzz: ", 0), 0u) << error.what();
    }
  }
}

}  // namespace
}  // namespace fornace
