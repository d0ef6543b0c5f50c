// Synthetic checkpoints of every family Fornace runs: presets with the real shapes and config
// fields, seeded weights, the family's real tokenizer, and an atomic writer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/config.h"
#include "io/safetensors.h"

namespace fornace {

struct SyntheticOptions {
  std::string preset;
  std::string out_directory;
  uint64_t seed = 0;
  DType dtype = DType::bf16;
  // Where tokenizer.json and tokenizer_config.json come from; empty: the preset family's
  // models/tokenizers/<name> (scripts/get-tokenizer.sh fills it).
  std::string tokenizer_directory;
  // Called as the weights are written, with the bytes written and their total.
  std::function<void(int64_t written, int64_t total)> on_progress;
};

struct SyntheticSummary {
  int64_t parameters = 0;
  int64_t weight_bytes = 0;  // Tensor data bytes in model.safetensors.
  double seconds = 0;        // Wall time of the whole write.
};

// "qwen2.5-0.5b", "llama-3.2-1b", "gemma3-270m", ..., and a tiny model per family for tests.
std::vector<std::string> synthetic_preset_names();
// The config of a preset (torch_dtype left empty). Throws Error listing the presets otherwise.
ModelConfig synthetic_preset(const std::string& name);
// The tokenizer of a preset's family: the name of its folder under models/tokenizers/.
std::string synthetic_preset_tokenizer(const std::string& name);

// The tensors of a Hugging Face checkpoint of `config`'s family: names and [out, in] shapes, with
// the family's biases and norms, and lm_head.weight only when the embeddings are not tied.
std::vector<TensorSpec> checkpoint_tensor_specs(const ModelConfig& config, DType dtype);

// The synthetic values of one tensor. They depend only on (seed, spec.name, element index), not
// on the thread count: linear weights ~ N(0, 1/fan_in), embeddings ~ N(0, 1/hidden_size),
// biases ~ N(0, 0.1^2), norm weights ~ norm_mean + N(0, 0.1^2): 1 where a norm multiplies by
// w, 0 for Gemma's norms, which multiply by 1 + w.
Tensor synthetic_tensor(const TensorSpec& spec, uint64_t seed, double norm_mean = 1.0);

// Writes config.json, generation_config.json, model.safetensors and the tokenizer files (copied
// from options.tokenizer_directory) into options.out_directory. The directory is built under a
// temporary name and renamed into place; an existing model directory is replaced only after
// success, and anything else at that path is refused.
SyntheticSummary write_synthetic_model(const SyntheticOptions& options);

}  // namespace fornace
