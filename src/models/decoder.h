// What every decoder-only model shares around its layers: the token embedding (scaled where the
// family scales it), the final norm, the lm_head (tied or its own), logit soft-capping, the
// decode buffers, and the frame of a forward pass. A family's model file adds its layers.
#pragma once

#include "models/model.h"
#include "nn/activations.h"
#include "nn/layers.h"
#include "nn/mlp.h"
#include "nn/self_attention.h"
#include "nn/weights.h"

namespace fornace {

class DecoderModel : public Model {
 public:
  const ModelConfig& config() const override { return config_; }
  DType weight_dtype() const override { return weight_dtype_; }
  DType kv_dtype() const override { return kv_dtype_; }
  std::optional<BlockType> kv_blocks() const override { return options_.kv_blocks; }
  const WeightTally& weights_read_per_token() const override { return weights_read_; }
  // In a decode step the returned logits live in a buffer that the next forward overwrites.
  Tensor forward(const Tensor& ids, KvCacheSet& cache, Logits wanted) override;
  Tensor forward_batch(const std::vector<uint32_t>& ids,
                       std::span<KvCacheSet* const> caches) override;

 protected:
  DecoderModel(const ModelConfig& config, const ModelOptions& options)
      : config_(config), options_(options) {}

  // A reader of `source` with the options' dtype and activation rounding, counting into
  // weights_read_per_token().
  WeightReader weight_reader(const WeightSource& source) {
    return WeightReader(source, options_.dtype, options_.activation_rounding, &weights_read_,
                        options_.packed_weights);
  }
  // Reads model.embed_tokens.weight and the lm_head (the embedding when tied), takes the final
  // norm, and makes the buffers around the layers. `embedding_scale` multiplies the embedded
  // tokens (0: none).
  void load_ends(const WeightReader& weights, RmsNorm final_norm, double embedding_scale = 0);
  // The attention shape of a layer of this model, with `scale` and sliding `window` (0: none).
  AttentionShape attention_shape(double scale, int64_t window = 0) const;
  // Makes the decode buffers of a layer's attention and MLP.
  void reserve_buffers(const SelfAttention& attention, const GatedMlp& mlp);
  // Runs every layer on hidden [1, rows, hidden] of `sequences` in place; `normed` is a buffer
  // of that shape.
  virtual void forward_layers(const Tensor& hidden, const Tensor& normed,
                              const Sequences& sequences, Activations& activations) const = 0;

  ModelConfig config_;
  ModelOptions options_;
  StepBuffers step_buffers_;

 private:
  // Embeds `ids` [1, rows], runs the layers and returns f32 logits of the last `logit_rows` rows.
  Tensor run(const Tensor& ids, const Sequences& sequences, bool decode_step, int64_t logit_rows);

  DType weight_dtype_ = DType::bf16;
  DType kv_dtype_ = DType::bf16;
  // The norms' outputs for `rows` rows, which only linear layers read: bf16 where the model's
  // linear kernels take bf16 as it is (Linear::input_dtype; lm_head stands for the layers'),
  // else f32.
  DType normed_dtype(int64_t rows) const;

  bool quantized_ = false;
  WeightTally weights_read_;
  Embedding embedding_;
  double embedding_scale_ = 0;
  RmsNorm final_norm_;
  Linear lm_head_;
};

}  // namespace fornace
