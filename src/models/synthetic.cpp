// Synthetic checkpoints of every family: preset configs, a counter-based seeded generator, and
// the writer.
#include "models/synthetic.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/hash.h"
#include "cpu/thread_pool.h"
#include "io/files.h"

namespace fornace {

namespace {

namespace fs = std::filesystem;

constexpr int64_t kQwenVocabSize = 151936;
constexpr int64_t kImEndId = 151645;      // <|im_end|>
constexpr int64_t kEndOfTextId = 151643;  // <|endoftext|>
constexpr double kBiasStddev = 0.1;
constexpr double kNormStddev = 0.1;

// The sizes of a preset; every other field is its family's.
struct Sizes {
  int64_t hidden, layers, heads, kv_heads, intermediate, max_positions;
  int64_t head_dim = 0;  // 0: hidden / heads
};

ModelConfig base_config(const char* model_type, const Sizes& sizes, int64_t vocab) {
  ModelConfig config;
  config.model_type = model_type;
  config.hidden_size = sizes.hidden;
  config.intermediate_size = sizes.intermediate;
  config.num_hidden_layers = sizes.layers;
  config.num_attention_heads = sizes.heads;
  config.num_key_value_heads = sizes.kv_heads;
  config.explicit_head_dim = sizes.head_dim;
  config.vocab_size = vocab;
  config.max_position_embeddings = sizes.max_positions;
  config.rms_norm_eps = 1e-6;
  config.tie_word_embeddings = true;
  return config;
}

// Qwen2.5 (config of Qwen/Qwen2.5-*-Instruct).
ModelConfig qwen2_config(const Sizes& sizes, int64_t vocab = kQwenVocabSize) {
  ModelConfig config = base_config("qwen2", sizes, vocab);
  config.rope_theta = 1e6;
  config.attention_bias = true;
  config.eos_token_ids = {kImEndId, kEndOfTextId};
  return config;
}

// Qwen3 (Qwen/Qwen3-0.6B): head_dim 128 whatever hidden / heads is.
ModelConfig qwen3_config(const Sizes& sizes, int64_t vocab = kQwenVocabSize) {
  ModelConfig config = base_config("qwen3", sizes, vocab);
  config.rope_theta = 1e6;
  config.eos_token_ids = {kImEndId, kEndOfTextId};
  return config;
}

// Llama 3.2 (meta-llama/Llama-3.2-1B-Instruct): llama3 rope scaling, theta 500000.
ModelConfig llama3_config(const Sizes& sizes, int64_t vocab = 128256,
                          int64_t original_context = 8192) {
  ModelConfig config = base_config("llama", sizes, vocab);
  config.rope_theta = 500000.0;
  config.rms_norm_eps = 1e-5;
  config.rope_scaling = RopeScaling{"llama3", 32.0, 1.0, 4.0, original_context};
  config.eos_token_ids = {128001, 128008, 128009};
  return config;
}

// SmolLM2 (HuggingFaceTB/SmolLM2-*): Llama shapes, theta 100000, no rope scaling.
ModelConfig smollm2_config(const Sizes& sizes) {
  ModelConfig config = base_config("llama", sizes, 49152);
  config.rope_theta = 100000.0;
  config.rms_norm_eps = 1e-5;
  config.eos_token_ids = {2};
  return config;
}

// Gemma 3 text (google/gemma-3-270m, -1b): every sixth layer global, the others a window of 512.
ModelConfig gemma3_config(const Sizes& sizes, int64_t vocab = 262144, int64_t window = 512,
                          int64_t pattern = 6) {
  ModelConfig config = base_config("gemma3_text", sizes, vocab);
  config.rope_theta = 1e6;
  config.rope_local_base_freq = 10000.0;
  config.hidden_activation = "gelu_pytorch_tanh";
  config.query_pre_attn_scalar = 256;
  config.sliding_window = window;
  for (int64_t layer = 0; layer < sizes.layers; ++layer) {
    config.sliding_layers.push_back((layer + 1) % pattern != 0);
  }
  config.eos_token_ids = {1, 106};
  return config;
}

struct Preset {
  const char* name;
  const char* tokenizer;  // models/tokenizers/<tokenizer>, which scripts/get-tokenizer.sh fills.
  ModelConfig config;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = [] {
    std::vector<Preset> list = {
        {"tiny", "qwen2_5", qwen2_config({64, 2, 4, 2, 128, 4096})},
        {"qwen2.5-0.5b", "qwen2_5", qwen2_config({896, 24, 14, 2, 4864, 32768})},
        {"qwen2.5-1.5b", "qwen2_5", qwen2_config({1536, 28, 12, 2, 8960, 32768})},
        {"llama-3.2-1b", "llama3_1", llama3_config({2048, 16, 32, 8, 8192, 131072, 64})},
        {"smollm2-135m", "llama3_1", smollm2_config({576, 30, 9, 3, 1536, 8192})},
        {"smollm2-360m", "llama3_1", smollm2_config({960, 32, 15, 5, 2560, 8192})},
        {"qwen3-0.6b", "qwen3", qwen3_config({1024, 28, 16, 8, 3072, 40960, 128})},
        {"gemma3-270m", "gemma3", gemma3_config({640, 18, 4, 1, 2048, 32768, 256})},
        {"gemma3-1b", "gemma3", gemma3_config({1152, 26, 4, 1, 6912, 32768, 256})},
        // Tiny models of each family for tests, with the family's features switched on: llama3
        // bands inside a 64-position original context, head_dim unlike hidden / heads, local
        // layers whose window a short prompt exceeds, soft-capped logits.
        {"tiny-llama", "llama3_1", llama3_config({64, 2, 4, 2, 128, 4096}, 128256, 64)},
        {"tiny-qwen3", "qwen3", qwen3_config({64, 2, 4, 2, 128, 4096, 32})},
        {"tiny-gemma3", "gemma3", gemma3_config({64, 3, 4, 2, 128, 4096, 32}, 262144, 8, 3)},
    };
    list.back().config.final_logit_softcapping = 30.0;
    return list;
  }();
  return table;
}

const Preset& find_preset(const std::string& name) {
  for (const Preset& preset : presets()) {
    if (name == preset.name) return preset;
  }
  std::string known;
  for (const Preset& preset : presets()) known += (known.empty() ? "" : ", ") + std::string(preset.name);
  fail("unknown preset '", name, "' (known presets: ", known, ")");
}

// splitmix64's output function: a strong 64-bit mixer.
inline uint64_t mix64(uint64_t value) {
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}

// A standard normal draw for element `index` of the stream `key`. The splitmix64 sequence is
// counter-based, so any element can be computed alone. Its 64 bits become four 16-bit uniforms
// whose sum (Irwin-Hall, n = 4) is scaled to unit variance: close to normal, bounded at
// +-3.46 sigma, and far cheaper than Box-Muller.
inline float normal_at(uint64_t key, uint64_t index) {
  uint64_t bits = mix64(key + (index + 1) * 0x9e3779b97f4a7c15ull);
  int64_t sum = static_cast<int64_t>(bits & 0xffff) + static_cast<int64_t>((bits >> 16) & 0xffff) +
                static_cast<int64_t>((bits >> 32) & 0xffff) + static_cast<int64_t>(bits >> 48);
  // Each 16-bit uniform has mean 32767.5 and variance (65536^2 - 1) / 12.
  constexpr double kMean = 4 * 32767.5;
  const double inverse_stddev = 1.0 / std::sqrt(4.0 * (65536.0 * 65536.0 - 1.0) / 12.0);
  return static_cast<float>((static_cast<double>(sum) - kMean) * inverse_stddev);
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Mean and standard deviation of a tensor's values, from its name and shape. `norm_mean` is 1
// where a norm multiplies by w, 0 where it multiplies by 1 + w (Gemma).
std::pair<double, double> distribution_of(const TensorSpec& spec, double norm_mean = 1.0) {
  if (ends_with(spec.name, "norm.weight")) return {norm_mean, kNormStddev};
  if (ends_with(spec.name, ".bias")) return {0.0, kBiasStddev};
  // Embeddings [vocab, hidden] and linear weights [out, in]: the last dim is the fan-in. With the
  // tied head this keeps logits near unit scale, so they are neither flat nor overflowing.
  return {0.0, 1.0 / std::sqrt(static_cast<double>(spec.shape.back()))};
}

template <typename Element, typename Convert>
void fill(Element* data, int64_t count, uint64_t key, float mean, float stddev, Convert convert) {
  ThreadPool::global().run(count, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) {
      data[index] = convert(mean + stddev * normal_at(key, static_cast<uint64_t>(index)));
    }
  });
}

// Makes `directory` (and parents) or fails with a clear message.
void create_directories_or_fail(const fs::path& directory) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) fail(directory.string(), ": cannot create directory: ", error.message());
}

void remove_all_quietly(const fs::path& path) {
  std::error_code error;
  fs::remove_all(path, error);
}

// An existing output path may be replaced only when it is a model directory (or empty), so a
// mistyped --out never deletes unrelated files.
void check_replaceable(const fs::path& out) {
  std::error_code error;
  fs::file_status status = fs::symlink_status(out, error);
  if (!fs::exists(status)) return;
  if (!fs::is_directory(status)) fail(out.string(), ": exists and is not a directory");
  bool empty = fs::is_empty(out, error);
  if (!empty && !fs::exists(out / "config.json") && !fs::exists(out / "model.safetensors")) {
    fail(out.string(), ": exists and does not look like a model directory; refusing to replace it");
  }
}

// Moves `staging` to `out`, replacing an existing model directory only once the move can succeed.
void move_into_place(const fs::path& staging, const fs::path& out) {
  std::error_code error;
  if (!fs::exists(fs::symlink_status(out, error))) {
    fs::rename(staging, out, error);
    if (error) fail(out.string(), ": cannot move the new model into place: ", error.message());
    return;
  }
  fs::path old = out.string() + concat(".old.", ::getpid());
  fs::rename(out, old, error);
  if (error) fail(out.string(), ": cannot move the previous model aside: ", error.message());
  fs::rename(staging, out, error);
  if (error) {
    std::error_code restore_error;
    fs::rename(old, out, restore_error);
    fail(out.string(), ": cannot move the new model into place: ", error.message());
  }
  remove_all_quietly(old);
}

std::string torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return "bfloat16";
    case DType::f16:
      return "float16";
    case DType::f32:
      return "float32";
    default:
      fail("synth: dtype ", dtype_name(dtype), " is not a weight dtype (use bf16, f16 or f32)");
  }
}

std::string generation_config_json(const ModelConfig& config) {
  nlohmann::ordered_json object;
  object["bos_token_id"] = kEndOfTextId;
  object["eos_token_id"] = config.eos_token_ids;
  return object.dump(2) + "\n";
}

}  // namespace

std::vector<std::string> synthetic_preset_names() {
  std::vector<std::string> names;
  for (const Preset& preset : presets()) names.push_back(preset.name);
  return names;
}

ModelConfig synthetic_preset(const std::string& name) { return find_preset(name).config; }

std::string synthetic_preset_tokenizer(const std::string& name) {
  return find_preset(name).tokenizer;
}

std::vector<TensorSpec> checkpoint_tensor_specs(const ModelConfig& config, DType dtype) {
  const int64_t hidden = config.hidden_size;
  const int64_t head_dim = config.head_dim();
  const int64_t query_width = config.num_attention_heads * head_dim;
  const int64_t kv_width = config.num_key_value_heads * head_dim;
  const bool gemma = config.model_type == "gemma3_text";
  const bool query_key_norms = gemma || config.model_type == "qwen3";
  std::vector<TensorSpec> specs;
  auto add = [&](const std::string& name, Dims shape) { specs.push_back({name, dtype, shape}); };
  auto linear = [&](const std::string& name, int64_t outputs, int64_t inputs, bool bias) {
    add(name + ".weight", {outputs, inputs});
    if (bias) add(name + ".bias", {outputs});
  };
  add("model.embed_tokens.weight", {config.vocab_size, hidden});
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    std::string prefix = concat("model.layers.", layer, ".");
    add(prefix + "input_layernorm.weight", {hidden});
    linear(prefix + "self_attn.q_proj", query_width, hidden, config.attention_bias);
    linear(prefix + "self_attn.k_proj", kv_width, hidden, config.attention_bias);
    linear(prefix + "self_attn.v_proj", kv_width, hidden, config.attention_bias);
    linear(prefix + "self_attn.o_proj", hidden, query_width,
           config.attention_bias && config.model_type != "qwen2");
    if (query_key_norms) {
      add(prefix + "self_attn.q_norm.weight", {head_dim});
      add(prefix + "self_attn.k_norm.weight", {head_dim});
    }
    add(prefix + "post_attention_layernorm.weight", {hidden});
    if (gemma) {
      add(prefix + "pre_feedforward_layernorm.weight", {hidden});
      add(prefix + "post_feedforward_layernorm.weight", {hidden});
    }
    linear(prefix + "mlp.gate_proj", config.intermediate_size, hidden, false);
    linear(prefix + "mlp.up_proj", config.intermediate_size, hidden, false);
    linear(prefix + "mlp.down_proj", hidden, config.intermediate_size, false);
  }
  add("model.norm.weight", {hidden});
  if (!config.tie_word_embeddings) add("lm_head.weight", {config.vocab_size, hidden});
  return specs;
}

Tensor synthetic_tensor(const TensorSpec& spec, uint64_t seed, double norm_mean) {
  auto [mean_value, stddev_value] = distribution_of(spec, norm_mean);
  float mean = static_cast<float>(mean_value);
  float stddev = static_cast<float>(stddev_value);
  uint64_t key = mix64(seed ^ mix64(fnv1a_hash(spec.name)));
  Tensor result = Tensor::empty(spec.shape, spec.dtype);
  int64_t count = result.numel();
  switch (spec.dtype) {
    case DType::f32:
      fill(result.data<float>(), count, key, mean, stddev, [](float value) { return value; });
      break;
    case DType::bf16:
      fill(result.data<uint16_t>(), count, key, mean, stddev, f32_to_bf16);
      break;
    case DType::f16:
      fill(result.data<uint16_t>(), count, key, mean, stddev, f32_to_f16);
      break;
    default:
      fail("synth: tensor '", spec.name, "': dtype ", dtype_name(spec.dtype),
           " is not a weight dtype");
  }
  return result;
}

SyntheticSummary write_synthetic_model(const SyntheticOptions& options) {
  auto start = std::chrono::steady_clock::now();
  const Preset& preset = find_preset(options.preset);
  ModelConfig config = preset.config;
  const std::string tokenizer_directory =
      options.tokenizer_directory.empty()
          ? (fs::path("models") / "tokenizers" / preset.tokenizer).string()
          : options.tokenizer_directory;
  config.torch_dtype = torch_dtype_name(options.dtype);
  if (options.out_directory.empty()) fail("synth: no output directory given");
  fs::path out = fs::path(options.out_directory).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "dir/" names "dir".

  // Check everything cheap before writing a gigabyte.
  const std::vector<std::string> tokenizer_files = {"tokenizer.json", "tokenizer_config.json"};
  for (const std::string& file : tokenizer_files) {
    fs::path source = fs::path(tokenizer_directory) / file;
    std::error_code error;
    if (!fs::is_regular_file(source, error)) {
      fail(source.string(),
           ": tokenizer file not found; run scripts/get-tokenizer.sh (or pass "
           "--tokenizer-dir)");
    }
  }
  check_replaceable(out);
  if (out.has_parent_path()) create_directories_or_fail(out.parent_path());

  fs::path staging = out.string() + concat(".tmp.", ::getpid());
  remove_all_quietly(staging);
  create_directories_or_fail(staging);
  std::vector<TensorSpec> specs = checkpoint_tensor_specs(config, options.dtype);
  const double norm_mean = config.model_type == "gemma3_text" ? 0.0 : 1.0;
  int64_t total_bytes = 0;
  for (const TensorSpec& spec : specs) {
    total_bytes += spec.shape.product() * static_cast<int64_t>(dtype_size(spec.dtype));
  }
  int64_t written_bytes = 0;
  SyntheticSummary summary;
  try {
    for (const std::string& file : tokenizer_files) {
      std::string bytes = read_file((fs::path(tokenizer_directory) / file).string());
      write_file_atomically((staging / file).string(),
                            [&](std::ostream& stream) { stream << bytes; });
    }
    std::string config_text = model_config_to_json(config);
    write_file_atomically((staging / "config.json").string(),
                          [&](std::ostream& stream) { stream << config_text; });
    std::string generation_text = generation_config_json(config);
    write_file_atomically((staging / "generation_config.json").string(),
                          [&](std::ostream& stream) { stream << generation_text; });
    write_safetensors_streamed(
        (staging / "model.safetensors").string(), specs,
        [&](size_t index) {
          if (options.on_progress) options.on_progress(written_bytes, total_bytes);
          Tensor tensor = synthetic_tensor(specs[index], options.seed, norm_mean);
          written_bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());
          return tensor;
        },
        {{"format", "pt"},
         {"fornace_synthetic_preset", options.preset},
         {"fornace_synthetic_seed", std::to_string(options.seed)}});
    move_into_place(staging, out);
  } catch (...) {
    remove_all_quietly(staging);
    throw;
  }
  for (const TensorSpec& spec : specs) {
    summary.parameters += spec.shape.product();
    summary.weight_bytes += spec.shape.product() * static_cast<int64_t>(dtype_size(spec.dtype));
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace fornace
