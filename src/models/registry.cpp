// The model registry: model_type -> loader. A new architecture adds one file and one line here.
#include <chrono>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "cpu/kernel_choices.h"
#include "io/safetensors.h"
#include "models/architectures.h"
#include "models/gguf_model.h"
#include "models/model.h"
#include "nn/packed_cache.h"

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

double ms_since(std::chrono::steady_clock::time_point start) {
  using Milliseconds = std::chrono::duration<double, std::milli>;
  return Milliseconds(std::chrono::steady_clock::now() - start).count();
}

// Adds what `mapping` set up to `report`.
void add_mapping(LoadReport& report, const FileMapping& mapping) {
  report.mapped_bytes += static_cast<int64_t>(mapping.pages_at_setup().resident_bytes);
  report.huge_page_bytes += static_cast<int64_t>(mapping.pages_at_setup().huge_page_bytes);
  report.huge_page_paths |= 1 << static_cast<int>(mapping.path());
  report.mapping_ms += mapping.setup_ms();
  report.reread_bytes += static_cast<int64_t>(mapping.reread_bytes());
  report.reread_ms += mapping.reread_ms();
  report.copied_bytes += static_cast<int64_t>(mapping.copied_bytes());
  report.copy_ms += mapping.copy_ms();
}

// Runs `load` with the packed-weights cache (nn/packed_cache.h) of the model's files, when
// options.packed_cache_directory names one: it hands out the forms an earlier load stored, and
// this load's forms are stored when it packed any anew. Before the stored forms are mapped, the
// files' mapped pages are dropped, so that the weights are not resident twice (what the load
// reads of them comes back from the page cache). A cache that cannot be read or written costs
// load time only; the report says why.
std::unique_ptr<Model> load_with_packed_cache(
    const ModelFiles& files, const ModelOptions& options, LoadReport& report,
    const std::function<std::unique_ptr<Model>(const ModelOptions&)>& load) {
  const bool huge_pages = files.mapping_options().huge_pages;
  ModelOptions cached = options;
  const std::optional<std::string>& directory = options.packed_cache_directory;
  if (!directory || options.packed_weights) {
    if (!cached.packed_weights) {
      cached.packed_weights = std::make_shared<PackedWeights>(StoredPackedForms{}, huge_pages);
    }
    return load(cached);
  }
  const std::string signature =
      concat(cpu::kernel_choices(), "; dtype ",
             options.dtype ? dtype_name(*options.dtype) : "as stored", "; activations ",
             activation_rounding_name(options.activation_rounding));
  std::optional<PackedCache> cache;
  std::optional<StoredPackedForms> stored;
  std::string problem;
  try {
    cache.emplace(*directory, PackedCacheKey{files.weight_files(), signature},
                  files.mapping_options());
    stored = cache->read([&] { files.release_pages(); });
  } catch (const Error& error) {
    problem = error.what();
  }
  cached.packed_weights = std::make_shared<PackedWeights>(
      stored ? std::move(*stored) : StoredPackedForms{}, huge_pages);
  std::unique_ptr<Model> model = load(cached);
  const PackedWeights& packed = *cached.packed_weights;
  const auto start = std::chrono::steady_clock::now();
  if (cache && packed.stored_forms_used() < packed.forms().size()) {
    try {
      cache->write(packed.forms());
      for (const auto& form : packed.forms()) {
        report.packed_cache_written_bytes += static_cast<int64_t>(form->bytes());
      }
    } catch (const Error& error) {
      problem = error.what();
    }
  }
  report.packed_cache = cache ? cache->path() : *directory;
  report.packed_cache_write_ms = ms_since(start);
  report.packed_cache_problem = problem;
  return model;
}

}  // namespace

void ModelOptions::set_kv_cache_type(BlockType type) {
  switch (type) {
    case BlockType::f32:
      kv_dtype = DType::f32;
      break;
    case BlockType::f16:
      kv_dtype = DType::f16;
      break;
    case BlockType::bf16:
      kv_dtype = DType::bf16;
      break;
    case BlockType::q8_0:
    case BlockType::q4_0:
      kv_blocks = type;
      break;
    default:
      fail("a KV cache of ", block_format(type).name, " blocks is not supported");
  }
}

KvCacheShape Model::kv_cache_shape(int64_t max_length) const {
  const ModelConfig& model_config = config();
  KvCacheShape shape;
  shape.kv_heads = model_config.num_key_value_heads;
  shape.head_dim = model_config.head_dim();
  shape.max_length = max_length;
  shape.dtype = kv_dtype();
  shape.blocks = kv_blocks();
  shape.window = model_config.sliding_window;
  shape.sliding_layers = model_config.sliding_layers;
  return shape;
}

std::vector<std::string> supported_model_types() {
  std::vector<std::string> names;
  for (const Architecture& architecture : architectures()) names.push_back(architecture.model_type);
  return names;
}

std::unique_ptr<Model> load_model(std::shared_ptr<const ModelFiles> files,
                                  const ModelOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  LoadReport report;
  ModelConfig config = model_config_at(*files);
  std::optional<GgufWeights> gguf_weights;
  if (files->is_gguf()) gguf_weights.emplace(files->gguf(), config);
  const Architecture& architecture = architecture_of(config, files->path());
  const WeightSource& weights =
      gguf_weights ? static_cast<const WeightSource&>(*gguf_weights) : files->checkpoint();
  ModelOptions used = options;
  std::unique_ptr<Model> model =
      load_with_packed_cache(*files, options, report, [&](const ModelOptions& cached) {
        used = cached;
        return architecture.load(config, weights, cached);
      });
  for (const auto& mapping : files->mappings()) add_mapping(report, *mapping);
  if (const PackedWeights* packed = used.packed_weights.get()) {
    if (packed->stored_mapping()) add_mapping(report, *packed->stored_mapping());
    report.packed_bytes = packed->packed_bytes();
    report.packed_from_cache_bytes = packed->stored_bytes();
    report.pack_ms = packed->pack_ms();
  }
  report.load_ms = ms_since(start);
  model->files_ = std::move(files);
  model->load_report_ = std::move(report);
  return model;
}

std::unique_ptr<Model> load_model(const std::string& path, const ModelOptions& options) {
  return load_model(ModelFiles::open(path), options);
}

ModelConfig model_config_at(const ModelFiles& files) {
  if (files.is_gguf()) return model_config_from_gguf(*files.gguf());
  return load_model_config(files.path());
}

ModelConfig model_config_at(const std::string& path) {
  if (is_gguf_path(path)) return model_config_from_gguf(*GgufFile::open(path));
  return load_model_config(path);
}

}  // namespace fornace
