// Loading each family: a checkpoint that lacks a tensor its architecture needs names it, and an
// unsupported model_type names the file, the field and the types Fornace runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/test_models.h"
#include "core/error.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "models/model.h"
#include "models/synthetic.h"

namespace fornace {
namespace {

namespace fs = std::filesystem;

std::string load_error(const std::string& directory) {
  try {
    load_model(directory);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// The tiny model of `preset` written again, into `out`, without `missing`.
std::string without_tensor(const std::string& preset, const std::string& missing,
                           const ScratchPath& out) {
  const fs::path& directory = out.path();
  fs::create_directories(directory);
  ModelConfig config = synthetic_preset(preset);
  std::ofstream(directory / "config.json") << model_config_to_json(config);
  std::vector<TensorSpec> specs;
  for (const TensorSpec& spec : checkpoint_tensor_specs(config, DType::f32)) {
    if (spec.name != missing) specs.push_back(spec);
  }
  write_safetensors_streamed((directory / "model.safetensors").string(), specs,
                             [&](size_t index) { return synthetic_tensor(specs[index], 1); });
  return directory.string();
}

TEST(Architectures, AMissingTensorOfTheArchitectureIsNamed) {
  for (auto [preset, tensor] : {std::pair{"tiny-qwen3", "model.layers.1.self_attn.k_norm.weight"},
                                {"tiny-gemma3", "model.layers.2.pre_feedforward_layernorm.weight"},
                                {"tiny-llama", "model.layers.0.mlp.up_proj.weight"}}) {
    ScratchPath out(std::string("missing-") + preset);
    std::string message = load_error(without_tensor(preset, tensor, out));
    EXPECT_NE(message.find(tensor), std::string::npos) << preset << ": " << message;
  }
}

TEST(Architectures, AnUnsupportedModelTypeNamesTheFieldAndTheSupportedTypes) {
  ScratchPath out("unsupported-type");
  const fs::path& directory = out.path();
  fs::create_directories(directory);
  ModelConfig config = synthetic_preset("tiny");
  config.model_type = "mamba";
  std::ofstream(directory / "config.json") << model_config_to_json(config);
  std::string message = load_error(directory.string());
  for (const char* part : {"config.json", "model_type", "mamba", "qwen2", "llama", "qwen3",
                           "gemma3_text"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
  }
}

TEST(Architectures, EveryFamilyReportsItsDtypesAndTheCacheShapeItNeeds) {
  for (const char* preset : {"tiny", "tiny-llama", "tiny-qwen3", "tiny-gemma3"}) {
    std::unique_ptr<Model> model = load_model(synthetic_model_directory(preset, DType::bf16));
    EXPECT_EQ(model->weight_dtype(), DType::bf16) << preset;
    EXPECT_EQ(model->kv_dtype(), DType::bf16) << preset;
    KvCacheShape shape = model->kv_cache_shape(100);
    EXPECT_EQ(shape.head_dim, model->config().head_dim()) << preset;
    EXPECT_EQ(shape.window, model->config().sliding_window) << preset;
  }
}

}  // namespace
}  // namespace fornace
