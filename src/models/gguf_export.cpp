// GGUF export: llama-quantize's per-tensor types, architecture metadata, streamed tensors.
#include "models/gguf_export.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "core/error.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "io/safetensors.h"
#include "models/gguf_model.h"
#include "models/model.h"
#include "models/synthetic.h"
#include "nn/layers.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/quantized.h"

namespace fornace {
namespace {

struct FileTypeName {
  GgufFileType type;
  const char* name;
  uint32_t id;        // llama.cpp's llama_ftype
  BlockType base;     // The type of most matrices.
  bool pure = false;  // Every matrix of `base` (else llama-quantize's choice per tensor).
};
constexpr FileTypeName kFileTypes[] = {
    {GgufFileType::f32, "f32", 0, BlockType::f32},
    {GgufFileType::bf16, "bf16", 32, BlockType::bf16},
    {GgufFileType::q8_0, "q8_0", 7, BlockType::q8_0},
    {GgufFileType::q4_0, "q4_0", 2, BlockType::q4_0},
    {GgufFileType::q4_k_m, "q4_k_m", 15, BlockType::q4_k},
    {GgufFileType::q5_k_m, "q5_k_m", 17, BlockType::q5_k},
    {GgufFileType::q4_1, "q4_1", 3, BlockType::q4_1, true},
    {GgufFileType::q5_0, "q5_0", 8, BlockType::q5_0, true},
    {GgufFileType::q5_1, "q5_1", 9, BlockType::q5_1, true},
    {GgufFileType::q4_k, "q4_k", 14, BlockType::q4_k, true},
    {GgufFileType::q5_k, "q5_k", 16, BlockType::q5_k, true},
    {GgufFileType::q6_k, "q6_k", 18, BlockType::q6_k, true},
};

const FileTypeName& file_type_entry(GgufFileType type) {
  for (const FileTypeName& entry : kFileTypes) {
    if (entry.type == type) return entry;
  }
  fail("unknown GGUF file type");
}

// llama-quantize gives these layers of attn_v and ffn_down more bits: the first and last eighth
// and every third layer between.
bool uses_more_bits(int64_t layer, int64_t layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

int64_t layer_of(const std::string& gguf_name) {
  if (gguf_name.rfind("blk.", 0) != 0) return -1;
  return std::stoll(gguf_name.substr(4, gguf_name.find('.', 4) - 4));
}

bool contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

// A K-quant row must be whole 256-element super-blocks; llama-quantize falls back otherwise.
BlockType fallback_for_row(BlockType type, int64_t columns) {
  if (columns % block_format(type).block_elements == 0) return type;
  switch (type) {
    case BlockType::q4_k:
      type = BlockType::q5_0;
      break;
    case BlockType::q5_k:
      type = BlockType::q5_1;
      break;
    case BlockType::q6_k:
      type = BlockType::q8_0;
      break;
    default:
      break;
  }
  return columns % block_format(type).block_elements == 0 ? type : BlockType::f16;
}

// The values of a stored weight as f32 rows in Hugging Face order.
Tensor f32_values(const StoredWeight& stored) {
  if (stored.quantized) return dequantize(*stored.quantized, DType::f32);
  return to_dtype(stored.tensor, DType::f32);
}

// Converts `values` (f32 rows of `columns`) into `out` as `type`, row by row.
void encode_rows(const float* values, int64_t rows, int64_t columns, BlockType type,
                 std::byte* out) {
  const size_t row_bytes = block_row_bytes(type, columns);
  auto encode = [&](int64_t row) {
    const float* in = values + row * columns;
    std::byte* target = out + row_bytes * static_cast<size_t>(row);
    switch (type) {
      case BlockType::f32:
        std::memcpy(target, in, row_bytes);
        return;
      case BlockType::bf16:
      case BlockType::f16: {
        auto* halves = reinterpret_cast<uint16_t*>(target);
        for (int64_t i = 0; i < columns; ++i) {
          halves[i] = type == BlockType::bf16 ? f32_to_bf16(in[i]) : f32_to_f16(in[i]);
        }
        return;
      }
      default:
        cpu::block_kernels(type).quantize_row(in, target, columns);
    }
  };
  ThreadPool::global().run(rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) encode(row);
  });
}

// Sets the architecture's keys; returns what llama.cpp will read differently from Fornace.
std::vector<std::string> set_architecture_metadata(GgufWriter& writer, const ModelConfig& config,
                                                   const std::string& name, GgufFileType type) {
  std::vector<std::string> warnings;
  const std::string architecture = gguf_architecture(config.model_type);
  const std::string prefix = architecture + ".";
  auto u32 = [](int64_t value) { return GgufValue(static_cast<uint32_t>(value)); };
  auto f32 = [](double value) { return GgufValue(static_cast<float>(value)); };
  writer.set("general.architecture", GgufValue(architecture));
  writer.set("general.name", GgufValue(name));
  writer.set("general.file_type", u32(file_type_entry(type).id));
  writer.set("general.quantization_version", u32(2));
  writer.set(prefix + "context_length", u32(config.max_position_embeddings));
  writer.set(prefix + "embedding_length", u32(config.hidden_size));
  writer.set(prefix + "block_count", u32(config.num_hidden_layers));
  writer.set(prefix + "feed_forward_length", u32(config.intermediate_size));
  writer.set(prefix + "attention.head_count", u32(config.num_attention_heads));
  writer.set(prefix + "attention.head_count_kv", u32(config.num_key_value_heads));
  writer.set(prefix + "rope.freq_base", f32(config.rope_theta));
  writer.set(prefix + "attention.layer_norm_rms_epsilon", f32(config.rms_norm_eps));
  writer.set(prefix + "attention.key_length", u32(config.head_dim()));
  writer.set(prefix + "attention.value_length", u32(config.head_dim()));
  if (config.rope_scaling && config.rope_scaling->type == "linear") {
    writer.set(prefix + "rope.scaling.type", GgufValue("linear"));
    writer.set(prefix + "rope.scaling.factor", f32(config.rope_scaling->factor));
  }
  if (config.model_type == "gemma3_text") {
    writer.set(prefix + "attention.sliding_window", u32(config.sliding_window));
    if (config.final_logit_softcapping > 0) {
      writer.set(prefix + "final_logit_softcapping", f32(config.final_logit_softcapping));
    }
    // llama.cpp reads the layer pattern (every sixth layer global when absent) but scales scores
    // by key_length^-1/2 whatever query_pre_attn_scalar says: a config that differs, such as the
    // tiny test preset's, keeps its value in a key llama.cpp ignores.
    const int64_t pattern = gemma3_layer_pattern(config);
    if (pattern != kGemma3LayerPattern) {
      writer.set(prefix + "attention.sliding_window_pattern", u32(pattern));
    }
    if (config.query_pre_attn_scalar != static_cast<double>(config.head_dim())) {
      writer.set(prefix + "attention.query_pre_attn_scalar", f32(config.query_pre_attn_scalar));
      warnings.push_back(concat("query_pre_attn_scalar ", config.query_pre_attn_scalar,
                                " is not head_dim ", config.head_dim(),
                                ": llama.cpp scales attention scores by head_dim^-1/2 and will "
                                "compute another model from this file; Fornace reads it as meant"));
    }
    writer.set(prefix + "rope.freq_base_swa", f32(config.rope_local_base_freq));
  }
  return warnings;
}

}  // namespace

std::optional<GgufFileType> parse_gguf_file_type(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const FileTypeName& entry : kFileTypes) {
    if (lower == entry.name) return entry.type;
  }
  return std::nullopt;
}

std::vector<std::string> gguf_file_type_names() {
  std::vector<std::string> names;
  for (const FileTypeName& entry : kFileTypes) names.push_back(entry.name);
  return names;
}

BlockType gguf_tensor_type(GgufFileType type, const std::string& gguf_name, int64_t columns,
                           int64_t layers, bool tied_embeddings) {
  const BlockType base = file_type_entry(type).base;
  if (!is_quantized(base)) return base;
  if (file_type_entry(type).pure) return fallback_for_row(base, columns);
  BlockType chosen = base;
  const bool k_mix = type == GgufFileType::q4_k_m || type == GgufFileType::q5_k_m;
  if (gguf_name == "output.weight" || (tied_embeddings && gguf_name == "token_embd.weight")) {
    if (columns % block_format(BlockType::q6_k).block_elements != 0) return BlockType::q8_0;
    chosen = base == BlockType::q8_0 ? BlockType::q8_0 : BlockType::q6_k;
  } else if (k_mix && (contains(gguf_name, "attn_v.weight") || contains(gguf_name, "ffn_down"))) {
    if (uses_more_bits(layer_of(gguf_name), layers)) chosen = BlockType::q6_k;
  }
  return fallback_for_row(chosen, columns);
}

GgufExportSummary export_gguf(const ModelFiles& files, const std::string& out_path,
                              GgufFileType type, const ExtraMetadata& extra_metadata) {
  const std::string& model_path = files.path();
  ModelConfig config;
  std::optional<GgufWeights> gguf_weights;
  if (files.is_gguf()) {
    config = model_config_from_gguf(*files.gguf());
    gguf_weights.emplace(files.gguf(), config);
  } else {
    config = load_model_config(model_path);
  }
  const WeightSource* source =
      gguf_weights ? static_cast<const WeightSource*>(&*gguf_weights) : &files.checkpoint();
  GgufWriter writer;
  std::string name = std::filesystem::path(model_path).filename().string();
  if (name.empty()) name = std::filesystem::path(model_path).parent_path().filename().string();
  GgufExportSummary summary;
  summary.warnings = set_architecture_metadata(writer, config, name, type);
  if (extra_metadata) {
    for (const GgufKeyValue& entry : extra_metadata(config)) writer.set(entry.key, entry.value);
  }

  struct Planned {
    std::string hf_name;  // Empty for rope_freqs.
    Dims shape;
    BlockType type;
  };
  std::vector<Planned> plan;
  for (const TensorSpec& spec : checkpoint_tensor_specs(config, DType::f32)) {
    const std::string gguf_name = gguf_tensor_name(spec.name, config.model_type);
    BlockType tensor_type =
        spec.shape.size() == 1
            ? BlockType::f32
            : gguf_tensor_type(type, gguf_name, spec.shape[1], config.num_hidden_layers,
                               config.tie_word_embeddings);
    plan.push_back({spec.name, spec.shape, tensor_type});
    std::vector<int64_t> dims(spec.shape.begin(), spec.shape.end());
    std::reverse(dims.begin(), dims.end());
    writer.add_tensor(gguf_name, tensor_type, dims);
  }
  std::vector<double> rope_divisors;
  if (config.rope_scaling && config.rope_scaling->type == "llama3") {
    // llama.cpp holds llama3 scaling as a tensor of per-frequency divisors.
    std::vector<double> plain = rope_inverse_frequencies(config.head_dim(), config.rope_theta);
    std::vector<double> scaled =
        rope_inverse_frequencies(config.head_dim(), config.rope_theta, config.rope_scaling);
    for (size_t i = 0; i < plain.size(); ++i) rope_divisors.push_back(plain[i] / scaled[i]);
    plan.push_back({"", {static_cast<int64_t>(rope_divisors.size())}, BlockType::f32});
    writer.add_tensor("rope_freqs.weight", BlockType::f32,
                      {static_cast<int64_t>(rope_divisors.size())});
  }

  std::map<BlockType, int64_t> bytes_per_type;
  writer.write(out_path, [&](size_t index, std::span<std::byte> data) {
    const Planned& planned = plan[index];
    bytes_per_type[planned.type] += static_cast<int64_t>(data.size());
    if (planned.hf_name.empty()) {
      std::vector<float> values(rope_divisors.begin(), rope_divisors.end());
      std::memcpy(data.data(), values.data(), data.size());
      return;
    }
    Tensor values = f32_values(source->weight(planned.hf_name));
    const GgufConversion conversion = gguf_conversion(planned.hf_name, config);
    const int64_t rows = planned.shape.size() == 1 ? 1 : planned.shape[0];
    const int64_t columns = planned.shape.back();
    std::vector<float> converted(static_cast<size_t>(rows * columns));
    const float* in = values.data<float>();
    for (int64_t row = 0; row < rows; ++row) {
      int64_t source_row = conversion.interleaved_head_dim
                               ? hf_row_of_gguf_row(row, conversion.interleaved_head_dim)
                               : row;
      std::memcpy(converted.data() + row * columns, in + source_row * columns,
                  sizeof(float) * static_cast<size_t>(columns));
    }
    if (conversion.norm_shift) {
      for (float& value : converted) value += 1.0f;
    }
    encode_rows(converted.data(), rows, columns, planned.type, data.data());
  });
  summary.tensors = static_cast<int64_t>(plan.size());
  summary.bytes = static_cast<int64_t>(std::filesystem::file_size(out_path));
  for (const auto& [block_type, bytes] : bytes_per_type) {
    summary.bytes_per_type.emplace_back(block_type, bytes);
  }
  return summary;
}

}  // namespace fornace
