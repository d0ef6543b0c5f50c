// GGUF files as models: the config from their metadata, and their tensors under Hugging Face
// names, with what llama.cpp's converter changed undone (Gemma's norm shift, Llama's Q/K order).
#pragma once

#include <memory>
#include <string>

#include "io/config.h"
#include "io/gguf.h"
#include "io/weight_source.h"

namespace fornace {

// The GGUF architecture name of a model_type ("gemma3_text" -> "gemma3"); throws Error for a
// model_type without one.
std::string gguf_architecture(const std::string& model_type);
// The GGUF tensor name of a Hugging Face one ("model.layers.3.mlp.up_proj.weight" ->
// "blk.3.ffn_up.weight"); throws Error for a name the mapping does not know.
std::string gguf_tensor_name(const std::string& hf_name, const std::string& model_type);

// How llama.cpp's converter changes a tensor's values on the way to GGUF.
struct GgufConversion {
  // Gemma's RMSNorm weights are stored as 1 + w.
  bool norm_shift = false;
  // Llama's Q and K rows are interleaved per head (pairs for GGML's rotary form): GGUF row
  // h*D + 2i + j holds Hugging Face row h*D + j*D/2 + i. 0: rows unchanged.
  int64_t interleaved_head_dim = 0;
};
GgufConversion gguf_conversion(const std::string& hf_name, const ModelConfig& config);
// The Hugging Face row that GGUF row `row` holds under an interleaving of `head_dim`.
int64_t hf_row_of_gguf_row(int64_t row, int64_t head_dim);

// Gemma 3's layers: every pattern-th one global, the others sliding (llama.cpp fixes 6).
constexpr int64_t kGemma3LayerPattern = 6;
// The pattern of `config`'s sliding_layers; throws Error when they follow none.
int64_t gemma3_layer_pattern(const ModelConfig& config);

// The ModelConfig that a GGUF file's metadata describes. Throws Error naming the file and key
// for an architecture Fornace does not run and for missing or contradictory keys.
ModelConfig model_config_from_gguf(const GgufFile& file);

// A GGUF file's tensors by Hugging Face name: float tensors and quantized blocks in place,
// copies only where the conversion must be undone.
class GgufWeights : public WeightSource {
 public:
  GgufWeights(std::shared_ptr<const GgufFile> file, ModelConfig config);
  const std::string& origin() const override { return file_->path(); }
  bool contains(const std::string& name) const override;
  StoredWeight weight(const std::string& name) const override;

 private:
  std::shared_ptr<const GgufFile> file_;
  ModelConfig config_;
};

}  // namespace fornace
