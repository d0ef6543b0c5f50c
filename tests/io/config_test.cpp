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

TEST(ModelConfigErrors, HeadsNotDividingHiddenSize) {
  expect_message_names(parse_error(config_with("num_attention_heads", "5")),
                       {"dir/config.json", "'num_attention_heads'", "does not divide hidden_size"});
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
