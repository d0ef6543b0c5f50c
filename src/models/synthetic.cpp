// Synthetic Qwen2 checkpoints: preset configs, a counter-based seeded generator, and the writer.
#include "models/synthetic.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
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

ModelConfig qwen2_config(int64_t hidden, int64_t layers, int64_t heads, int64_t kv_heads,
                         int64_t intermediate, int64_t max_positions) {
  ModelConfig config;
  config.model_type = "qwen2";
  config.hidden_size = hidden;
  config.intermediate_size = intermediate;
  config.num_hidden_layers = layers;
  config.num_attention_heads = heads;
  config.num_key_value_heads = kv_heads;
  config.vocab_size = kQwenVocabSize;
  config.max_position_embeddings = max_positions;
  config.rope_theta = 1e6;
  config.rms_norm_eps = 1e-6;
  config.tie_word_embeddings = true;
  config.eos_token_ids = {kImEndId, kEndOfTextId};
  return config;
}

// splitmix64's output function: a strong 64-bit mixer.
inline uint64_t mix64(uint64_t value) {
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}

uint64_t name_hash(const std::string& name) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a.
  for (unsigned char character : name) hash = (hash ^ character) * 0x100000001b3ull;
  return hash;
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

// Mean and standard deviation of a tensor's values, from its name and shape.
std::pair<double, double> distribution_of(const TensorSpec& spec) {
  if (ends_with(spec.name, "norm.weight")) return {1.0, kNormStddev};
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
  return {"tiny", "qwen2.5-0.5b", "qwen2.5-1.5b"};
}

ModelConfig synthetic_preset(const std::string& name) {
  if (name == "tiny") return qwen2_config(64, 2, 4, 2, 128, 4096);
  if (name == "qwen2.5-0.5b") return qwen2_config(896, 24, 14, 2, 4864, 32768);
  if (name == "qwen2.5-1.5b") return qwen2_config(1536, 28, 12, 2, 8960, 32768);
  std::string known;
  for (const std::string& preset : synthetic_preset_names()) {
    known += (known.empty() ? "" : ", ") + preset;
  }
  fail("unknown preset '", name, "' (known presets: ", known, ")");
}

std::vector<TensorSpec> qwen2_tensor_specs(const ModelConfig& config, DType dtype) {
  const int64_t hidden = config.hidden_size;
  const int64_t kv_width = config.num_key_value_heads * config.head_dim();
  std::vector<TensorSpec> specs;
  auto add = [&](const std::string& name, Dims shape) { specs.push_back({name, dtype, shape}); };
  add("model.embed_tokens.weight", {config.vocab_size, hidden});
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    std::string prefix = concat("model.layers.", layer, ".");
    add(prefix + "input_layernorm.weight", {hidden});
    add(prefix + "self_attn.q_proj.weight", {hidden, hidden});
    add(prefix + "self_attn.q_proj.bias", {hidden});
    add(prefix + "self_attn.k_proj.weight", {kv_width, hidden});
    add(prefix + "self_attn.k_proj.bias", {kv_width});
    add(prefix + "self_attn.v_proj.weight", {kv_width, hidden});
    add(prefix + "self_attn.v_proj.bias", {kv_width});
    add(prefix + "self_attn.o_proj.weight", {hidden, hidden});
    add(prefix + "post_attention_layernorm.weight", {hidden});
    add(prefix + "mlp.gate_proj.weight", {config.intermediate_size, hidden});
    add(prefix + "mlp.up_proj.weight", {config.intermediate_size, hidden});
    add(prefix + "mlp.down_proj.weight", {hidden, config.intermediate_size});
  }
  add("model.norm.weight", {hidden});
  if (!config.tie_word_embeddings) add("lm_head.weight", {config.vocab_size, hidden});
  return specs;
}

Tensor synthetic_tensor(const TensorSpec& spec, uint64_t seed) {
  auto [mean_value, stddev_value] = distribution_of(spec);
  float mean = static_cast<float>(mean_value);
  float stddev = static_cast<float>(stddev_value);
  uint64_t key = mix64(seed ^ mix64(name_hash(spec.name)));
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
  ModelConfig config = synthetic_preset(options.preset);
  config.torch_dtype = torch_dtype_name(options.dtype);
  if (options.out_directory.empty()) fail("synth: no output directory given");
  fs::path out = fs::path(options.out_directory).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "dir/" names "dir".

  // Check everything cheap before writing a gigabyte.
  const std::vector<std::string> tokenizer_files = {"tokenizer.json", "tokenizer_config.json"};
  for (const std::string& file : tokenizer_files) {
    fs::path source = fs::path(options.tokenizer_directory) / file;
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
  std::vector<TensorSpec> specs = qwen2_tensor_specs(config, options.dtype);
  SyntheticSummary summary;
  try {
    for (const std::string& file : tokenizer_files) {
      std::string bytes = read_file((fs::path(options.tokenizer_directory) / file).string());
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
        [&](size_t index) { return synthetic_tensor(specs[index], options.seed); },
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
