// The interface every architecture implements, and the registry that picks one by model_type.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/config.h"
#include "io/gguf.h"
#include "nn/candle_path.h"
#include "nn/kv_cache.h"
#include "nn/weights.h"

namespace fornace {

// Which positions' logits a forward pass computes.
enum class Logits { all, last, none };

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  // The dtype the weights are held in.
  virtual DType weight_dtype() const = 0;
  // The dtype of the KV cache: the weights' dtype, as Candle keeps it (bf16 for a bf16
  // checkpoint), so K and V take half the memory and bandwidth of f32.
  virtual DType kv_dtype() const = 0;
  // The weight bytes a decode step reads, by storage format.
  virtual const WeightTally& weights_read_per_token() const = 0;
  // Runs `ids` [1, S] (u32) at the positions after what `cache` holds, appends their keys and
  // values to it, and returns f32 logits: [S, vocab] for Logits::all, [1, vocab] of the last
  // position for Logits::last, and an undefined tensor for Logits::none (a prompt chunk that is
  // not the last one skips the lm_head).
  virtual Tensor forward(const Tensor& ids, KvCacheSet& cache, Logits logits = Logits::last) = 0;
  // One decode step of B sequences together: ids[b] is the next token of the sequence in
  // caches[b], at the position after what that cache holds. The projections and the MLP run
  // over the B rows at once (each weight read once per step); attention runs per sequence over
  // its own cache. Returns f32 logits [B, vocab].
  virtual Tensor forward_batch(const std::vector<uint32_t>& ids,
                               std::span<KvCacheSet* const> caches) = 0;
  // The shape a KV cache for this model needs, holding up to `max_length` positions.
  KvCacheShape kv_cache_shape(int64_t max_length) const;
  // Keeps the file the weights came from open and mapped while the model lives, its packed
  // weights' pages released: the tokenizer of a GGUF file then reads its keys through the same
  // mapping instead of mapping (and populating) the whole file again.
  void keep_source(std::shared_ptr<const void> source) { source_ = std::move(source); }

 private:
  std::shared_ptr<const void> source_;
};

struct ModelOptions {
  std::optional<DType> dtype;  // Weights in this dtype (converted at load); default: as stored.
  AttentionPath attention = AttentionPath::fused;
  // Quantized weights: how activations meet them (8-bit blocks for integer dot products, their
  // residual rounded again with int8x2, or f32 against weights widened in registers).
  ActivationRounding activation_rounding = ActivationRounding::int8;
  // The KV cache's dtype; default: the weights' float dtype (bf16 for quantized weights).
  std::optional<DType> kv_dtype;
  // Where this load's weights are packed for the kernels, and what it packed: load_model sets it
  // to hand out the forms an earlier load stored and to store this one's (null: packed anew).
  std::shared_ptr<PackedWeights> packed_weights;
};

// Loads the checkpoint in `directory` (the architecture from config.json's model_type), or the
// GGUF file at that path (the architecture from general.architecture).
std::unique_ptr<Model> load_model(const std::string& directory, const ModelOptions& options = {});
// The config of the model at `path`: config.json of a directory, or a GGUF file's metadata.
ModelConfig model_config_at(const std::string& path);
std::vector<std::string> supported_model_types();

}  // namespace fornace
