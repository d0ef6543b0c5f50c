// The model registry: model_type -> loader. A new architecture adds one file and one line here.
#include <chrono>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "cpu/kernel_choices.h"
#include "io/packed_cache.h"
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

// Runs `load` with the packed-weights cache (io/packed_cache.h) of the model's `files`: it hands
// out the forms an earlier load stored, and this load's forms are stored when it packed any anew.
// Before the stored forms are mapped, `release_files` drops the files' mapped pages, so that the
// weights are not resident twice (what the load reads of them comes back from the page cache).
// A cache that cannot be read or written costs load time only; --trace says why.
std::unique_ptr<Model> load_with_packed_cache(
    const std::vector<std::string>& files, const ModelOptions& options,
    const std::function<void()>& release_files,
    const std::function<std::unique_ptr<Model>(const ModelOptions&)>& load) {
  std::optional<std::string> directory = packed_cache_directory();
  if (!directory || options.packed_weights) return load(options);
  const std::string signature = concat(
      cpu::kernel_choices(), "; dtype ", options.dtype ? dtype_name(*options.dtype) : "as stored",
      "; activations ", activation_rounding_name(options.activation_rounding));
  std::optional<PackedCache> cache;
  std::optional<StoredPackedForms> stored;
  std::string problem;
  try {
    cache.emplace(*directory, PackedCacheKey{files, signature});
    stored = cache->read(release_files);
  } catch (const Error& error) {
    problem = error.what();
  }
  ModelOptions cached = options;
  cached.packed_weights = stored ? std::make_shared<PackedWeights>(std::move(*stored))
                                 : std::make_shared<PackedWeights>();
  std::unique_ptr<Model> model = load(cached);
  const PackedWeights& packed = *cached.packed_weights;
  int64_t written = 0;
  const auto start = std::chrono::steady_clock::now();
  if (cache && packed.stored_forms_used() < packed.forms().size()) {
    try {
      cache->write(packed.forms());
      for (const auto& form : packed.forms()) written += static_cast<int64_t>(form->bytes());
    } catch (const Error& error) {
      problem = error.what();
    }
  }
  memory::record_packed_cache(
      cache ? cache->path() : *directory, written,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
      problem);
  return model;
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
    const Architecture& architecture = architecture_of(config, directory);
    std::unique_ptr<Model> model =
        load_with_packed_cache(
            {directory}, options,
            [&] {
              if (file->file_mapping()) file->file_mapping()->release_all_pages();
            },
            [&](const ModelOptions& cached) { return architecture.load(config, weights, cached); });
    model->keep_source(file);
    return model;
  }
  ModelConfig config = load_model_config(directory);
  const Architecture& architecture = architecture_of(config, directory);
  Checkpoint checkpoint = Checkpoint::open_directory(directory);
  std::vector<std::string> files;
  for (const auto& file : checkpoint.files()) files.push_back(file->path());
  auto release_files = [&] {
    for (const auto& file : checkpoint.files()) file->release_pages();
  };
  return load_with_packed_cache(files, options, release_files, [&](const ModelOptions& cached) {
    return architecture.load(config, checkpoint, cached);
  });
}

ModelConfig model_config_at(const std::string& path) {
  if (is_gguf_path(path)) return model_config_from_gguf(*GgufFile::open(path));
  return load_model_config(path);
}


}  // namespace fornace
