// The model registry: model_type -> loader. A new architecture adds one file and one line here.
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/model.h"
#include "models/architectures.h"
#include "models/gguf_model.h"

namespace fornace {
namespace {

using Loader = std::function<std::unique_ptr<Model>(const ModelConfig&, const WeightSource&,
                                                    const ModelOptions&)>;

struct Architecture {
  const char* model_type;
  Loader load;
};

const std::vector<Architecture>& architectures() {
  static const std::vector<Architecture> table = {
      {"qwen2", load_qwen2},
      {"llama", load_llama},
      {"qwen3", load_qwen3},
      {"gemma3_text", load_gemma3},
  };
  return table;
}

const Architecture& architecture_of(const ModelConfig& config, const std::string& directory) {
  for (const Architecture& architecture : architectures()) {
    if (config.model_type == architecture.model_type) return architecture;
  }
  std::string supported;
  for (const std::string& name : supported_model_types()) {
    supported += (supported.empty() ? "" : ", ") + name;
  }
  fail(directory, "/config.json: unsupported model_type '", config.model_type,
       "' (supported: ", supported, ")");
}

}  // namespace

KvCacheShape Model::kv_cache_shape(int64_t max_length) const {
  const ModelConfig& model_config = config();
  KvCacheShape shape;
  shape.kv_heads = model_config.num_key_value_heads;
  shape.head_dim = model_config.head_dim();
  shape.max_length = max_length;
  shape.dtype = kv_dtype();
  shape.window = model_config.sliding_window;
  shape.sliding_layers = model_config.sliding_layers;
  return shape;
}

std::vector<std::string> supported_model_types() {
  std::vector<std::string> names;
  for (const Architecture& architecture : architectures()) names.push_back(architecture.model_type);
  return names;
}

std::unique_ptr<Model> load_model(const std::string& directory, const ModelOptions& options) {
  if (is_gguf_path(directory)) {
    std::shared_ptr<const GgufFile> file = GgufFile::open(directory);
    ModelConfig config = model_config_from_gguf(*file);
    GgufWeights weights(file, config);
    std::unique_ptr<Model> model = architecture_of(config, directory).load(config, weights, options);
    model->keep_source(file);
    return model;
  }
  ModelConfig config = load_model_config(directory);
  const Architecture& architecture = architecture_of(config, directory);
  Checkpoint checkpoint = Checkpoint::open_directory(directory);
  return architecture.load(config, checkpoint, options);
}

ModelConfig model_config_at(const std::string& path) {
  if (is_gguf_path(path)) return model_config_from_gguf(*GgufFile::open(path));
  return load_model_config(path);
}


}  // namespace fornace
