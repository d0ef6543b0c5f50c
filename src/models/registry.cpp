// The model registry: model_type -> loader. A new architecture adds one file and one line here.
#include <functional>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/model.h"
#include "models/architectures.h"

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

}  // namespace

KvCacheShape Model::kv_cache_shape(int64_t max_length) const {
  const ModelConfig& model_config = config();
  KvCacheShape shape{1, model_config.num_key_value_heads, model_config.head_dim(), max_length,
                     kv_dtype()};
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
  ModelConfig config = load_model_config(directory);
  for (const Architecture& architecture : architectures()) {
    if (config.model_type == architecture.model_type) {
      Checkpoint checkpoint = Checkpoint::open_directory(directory);
      return architecture.load(config, checkpoint, options);
    }
  }
  std::string supported;
  for (const std::string& name : supported_model_types()) {
    supported += (supported.empty() ? "" : ", ") + name;
  }
  fail(directory, "/config.json: unsupported model_type '", config.model_type,
       "' (supported: ", supported, ")");
}

}  // namespace fornace
