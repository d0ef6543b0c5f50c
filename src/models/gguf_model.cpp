// GGUF metadata as a ModelConfig, and GGUF tensors under Hugging Face names.
#include "models/gguf_model.h"

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/storage.h"
#include "io/file_mapping.h"
#include "ops/creation.h"

namespace fornace {
namespace {

struct ArchitectureName {
  const char* model_type;
  const char* gguf;
};
constexpr ArchitectureName kArchitectures[] = {
    {"qwen2", "qwen2"}, {"llama", "llama"}, {"qwen3", "qwen3"}, {"gemma3_text", "gemma3"}};

// Per-layer tensors: Hugging Face suffix -> GGUF suffix (without .weight / .bias).
struct LayerTensor {
  const char* hf;
  const char* gguf;
};
constexpr LayerTensor kLayerTensors[] = {
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"pre_feedforward_layernorm", "ffn_norm"},
    {"post_feedforward_layernorm", "post_ffw_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string gguf_layer_tensor(const std::string& stem, const std::string& model_type) {
  // Gemma has norms after attention and around the MLP; the others one norm before the MLP.
  if (stem == "post_attention_layernorm") {
    return model_type == "gemma3_text" ? "post_attention_norm" : "ffn_norm";
  }
  for (const LayerTensor& entry : kLayerTensors) {
    if (stem == entry.hf) return entry.gguf;
  }
  return "";
}

std::optional<DType> float_dtype(BlockType type) {
  switch (type) {
    case BlockType::f32:
      return DType::f32;
    case BlockType::f16:
      return DType::f16;
    case BlockType::bf16:
      return DType::bf16;
    default:
      return std::nullopt;
  }
}

// Rows of `bytes_per_row` bytes in Hugging Face order from GGUF's interleaved order.
std::shared_ptr<std::vector<uint8_t>> deinterleave_rows(const uint8_t* data, int64_t rows,
                                                        size_t bytes_per_row, int64_t head_dim) {
  auto copy = std::make_shared<std::vector<uint8_t>>(bytes_per_row * static_cast<size_t>(rows));
  for (int64_t row = 0; row < rows; ++row) {
    std::memcpy(copy->data() + bytes_per_row * hf_row_of_gguf_row(row, head_dim),
                data + bytes_per_row * row, bytes_per_row);
  }
  return copy;
}

}  // namespace

std::string gguf_architecture(const std::string& model_type) {
  for (const ArchitectureName& entry : kArchitectures) {
    if (model_type == entry.model_type) return entry.gguf;
  }
  fail("model_type '", model_type, "' has no GGUF architecture");
}

std::string gguf_tensor_name(const std::string& hf_name, const std::string& model_type) {
  if (hf_name == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf_name == "model.norm.weight") return "output_norm.weight";
  if (hf_name == "lm_head.weight") return "output.weight";
  const std::string layers = "model.layers.";
  if (hf_name.rfind(layers, 0) == 0) {
    size_t dot = hf_name.find('.', layers.size());
    size_t last = hf_name.rfind('.');
    if (dot != std::string::npos && last > dot) {
      std::string index = hf_name.substr(layers.size(), dot - layers.size());
      std::string stem = hf_name.substr(dot + 1, last - dot - 1);
      std::string kind = hf_name.substr(last + 1);
      std::string mapped = gguf_layer_tensor(stem, model_type);
      if (!mapped.empty() && (kind == "weight" || kind == "bias")) {
        return "blk." + index + "." + mapped + "." + kind;
      }
    }
  }
  fail("no GGUF name for tensor ", hf_name);
}

GgufConversion gguf_conversion(const std::string& hf_name, const ModelConfig& config) {
  GgufConversion conversion;
  if (config.model_type == "gemma3_text" && ends_with(hf_name, "norm.weight")) {
    conversion.norm_shift = true;
  }
  if (config.model_type == "llama" &&
      (hf_name.find("self_attn.q_proj.") != std::string::npos ||
       hf_name.find("self_attn.k_proj.") != std::string::npos)) {
    conversion.interleaved_head_dim = config.head_dim();
  }
  return conversion;
}

int64_t hf_row_of_gguf_row(int64_t row, int64_t head_dim) {
  const int64_t head = row / head_dim;
  const int64_t within = row % head_dim;
  return head * head_dim + (within % 2) * (head_dim / 2) + within / 2;
}

int64_t gemma3_layer_pattern(const ModelConfig& config) {
  int64_t pattern = 0;
  for (size_t layer = 0; layer < config.sliding_layers.size() && pattern == 0; ++layer) {
    if (!config.sliding_layers[layer]) pattern = static_cast<int64_t>(layer) + 1;
  }
  if (pattern == 0) pattern = config.num_hidden_layers + 1;
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    if (config.is_sliding(layer) != ((layer + 1) % pattern != 0)) {
      fail("Gemma 3 layers that are not every ", pattern, "th one global cannot be a GGUF file");
    }
  }
  return pattern;
}

ModelConfig model_config_from_gguf(const GgufFile& file) {
  const std::string& architecture = file.architecture();
  ModelConfig config;
  for (const ArchitectureName& entry : kArchitectures) {
    if (architecture == entry.gguf) config.model_type = entry.model_type;
  }
  if (config.model_type.empty()) {
    std::string supported;
    for (const ArchitectureName& entry : kArchitectures) {
      supported += (supported.empty() ? "" : ", ") + std::string(entry.gguf);
    }
    fail(file.path(), ": general.architecture '", architecture, "' is not one Fornace runs (",
         supported, ")");
  }
  const std::string prefix = architecture + ".";
  auto size = [&](const std::string& key) {
    uint64_t value = file.get_u64(prefix + key);
    if (value == 0 || value > (uint64_t{1} << 32)) {
      fail(file.path(), ": ", prefix, key, " is ", value, ", not a usable size");
    }
    return static_cast<int64_t>(value);
  };
  auto optional_size = [&](const std::string& key, int64_t fallback) {
    return file.has(prefix + key) ? size(key) : fallback;
  };
  config.hidden_size = size("embedding_length");
  config.intermediate_size = size("feed_forward_length");
  config.num_hidden_layers = size("block_count");
  config.num_attention_heads = size("attention.head_count");
  config.num_key_value_heads = optional_size("attention.head_count_kv", config.num_attention_heads);
  config.max_position_embeddings = size("context_length");
  config.rms_norm_eps = file.get_f64(prefix + "attention.layer_norm_rms_epsilon");
  if (file.has(prefix + "rope.freq_base")) config.rope_theta = file.get_f64(prefix + "rope.freq_base");
  config.explicit_head_dim = optional_size("attention.key_length", 0);
  if (config.explicit_head_dim == 0 && config.hidden_size % config.num_attention_heads != 0) {
    fail(file.path(), ": ", prefix, "attention.key_length is missing and ",
         config.num_attention_heads, " heads do not divide ", config.hidden_size);
  }
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    fail(file.path(), ": ", prefix, "attention.head_count_kv ", config.num_key_value_heads,
         " does not divide ", prefix, "attention.head_count ", config.num_attention_heads);
  }
  if (file.has(prefix + "rope.scaling.type")) {
    const std::string& type = file.get_string(prefix + "rope.scaling.type");
    if (type == "linear") {
      config.rope_scaling = RopeScaling{"linear", file.get_f64(prefix + "rope.scaling.factor")};
    } else if (type != "none") {
      fail(file.path(), ": ", prefix, "rope.scaling.type '", type, "' is not supported");
    }
  }
  if (const GgufTensorInfo* factors = file.find_tensor("rope_freqs.weight")) {
    if (factors->type != BlockType::f32 || factors->dims.size() != 1 ||
        factors->dims[0] * 2 != config.head_dim()) {
      fail(file.path(), ": tensor rope_freqs.weight must be F32 [", config.head_dim() / 2, "]");
    }
    const auto* values = static_cast<const float*>(factors->data);
    config.rope_frequency_divisors.assign(values, values + factors->dims[0]);
  }
  const GgufTensorInfo& embedding = file.tensor("token_embd.weight");
  if (embedding.dims.size() != 2 || embedding.columns() != config.hidden_size) {
    fail(file.path(), ": tensor token_embd.weight must be [vocab, ", config.hidden_size, "]");
  }
  config.vocab_size = embedding.rows();
  config.tie_word_embeddings = file.find_tensor("output.weight") == nullptr;
  config.attention_bias = file.find_tensor("blk.0.attn_q.bias") != nullptr;
  if (file.has("tokenizer.ggml.eos_token_id")) {
    config.eos_token_ids.push_back(static_cast<int64_t>(file.get_u64("tokenizer.ggml.eos_token_id")));
  }
  if (file.has("tokenizer.ggml.eot_token_id")) {
    int64_t end_of_turn = static_cast<int64_t>(file.get_u64("tokenizer.ggml.eot_token_id"));
    if (config.eos_token_ids.empty() || config.eos_token_ids[0] != end_of_turn) {
      config.eos_token_ids.push_back(end_of_turn);
    }
  }
  if (config.model_type == "gemma3_text") {
    // llama.cpp's Gemma 3: every sixth layer global, local layers rotate at base 10,000, scores
    // scaled by key_length^-1/2 (hidden / heads on the 27B's 62 layers), GeGLU with the tanh
    // GELU. The keys read here besides llama.cpp's hold configs that differ (tiny test models).
    config.hidden_activation = "gelu_pytorch_tanh";
    config.sliding_window = size("attention.sliding_window");
    config.query_pre_attn_scalar =
        config.num_hidden_layers == 62
            ? static_cast<double>(config.hidden_size / config.num_attention_heads)
            : static_cast<double>(config.head_dim());
    if (file.has(prefix + "attention.query_pre_attn_scalar")) {
      config.query_pre_attn_scalar = file.get_f64(prefix + "attention.query_pre_attn_scalar");
    }
    config.rope_local_base_freq = file.has(prefix + "rope.freq_base_swa")
                                      ? file.get_f64(prefix + "rope.freq_base_swa")
                                      : 10000.0;
    const int64_t pattern = optional_size("attention.sliding_window_pattern", kGemma3LayerPattern);
    for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
      config.sliding_layers.push_back((layer + 1) % pattern != 0);
    }
    if (file.has(prefix + "final_logit_softcapping")) {
      config.final_logit_softcapping = file.get_f64(prefix + "final_logit_softcapping");
    }
  }
  config.torch_dtype = "gguf";
  return config;
}

GgufWeights::GgufWeights(std::shared_ptr<const GgufFile> file, ModelConfig config)
    : file_(std::move(file)), config_(std::move(config)) {}

bool GgufWeights::contains(const std::string& name) const {
  return file_->find_tensor(gguf_tensor_name(name, config_.model_type)) != nullptr;
}

StoredWeight GgufWeights::weight(const std::string& name) const {
  const std::string stored_name = gguf_tensor_name(name, config_.model_type);
  const GgufTensorInfo* info = file_->find_tensor(stored_name);
  if (info == nullptr) fail(file_->path(), ": tensor ", stored_name, " (", name, ") is missing");
  file_->check_unchanged();
  const GgufConversion conversion = gguf_conversion(name, config_);
  const auto* data = static_cast<const uint8_t*>(info->data);
  const int64_t rows = info->rows();
  const size_t bytes_per_row = static_cast<size_t>(info->bytes / static_cast<uint64_t>(rows));
  std::shared_ptr<const void> owner = file_->file_mapping();
  Storage::PageRelease release = FileMapping::release_pages;
  if (conversion.interleaved_head_dim > 0) {
    auto copy = deinterleave_rows(data, rows, bytes_per_row, conversion.interleaved_head_dim);
    data = copy->data();
    owner = copy;
    release = nullptr;
  }
  if (std::optional<DType> dtype = float_dtype(info->type)) {
    Tensor tensor(Storage::borrow(owner, data, info->bytes, release),
                  Layout::contiguous(info->shape()), *dtype);
    if (!conversion.norm_shift) return {tensor, {}};
    std::vector<float> values = to_f32_vector(tensor);
    for (float& value : values) value -= 1.0f;
    return {from_vector(values, tensor.shape()), {}};
  }
  if (info->dims.size() != 2 || conversion.norm_shift) {
    fail(file_->path(), ": tensor ", stored_name, " is ", block_format(info->type).name,
         "; Fornace reads quantized blocks only in matrices");
  }
  QuantizedMatrix matrix;
  matrix.type = info->type;
  matrix.rows = rows;
  matrix.columns = info->columns();
  matrix.row_bytes = bytes_per_row;
  matrix.data = data;
  matrix.owner = std::move(owner);
  matrix.release_pages = release;
  return {Tensor(), matrix};
}

}  // namespace fornace
