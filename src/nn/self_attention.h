// The attention block of a decoder layer, shared by every family: grouped Q/K/V projections,
// optional per-head Q/K norms, RoPE, the KV cache append, attention by the fused kernel or by
// Candle's op sequence, and the output projection.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "nn/activations.h"
#include "nn/candle_path.h"
#include "nn/kv_cache.h"
#include "nn/layers.h"
#include "nn/sequences.h"
#include "nn/weights.h"

namespace fornace {

struct AttentionShape {
  int64_t query_heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  double scale = 0;    // Applied to q · k.
  int64_t window = 0;  // A sliding-window layer sees the last `window` positions; 0: all.
  AttentionPath path = AttentionPath::fused;
  // The family's Candle model: the V its cache gets, and the candle path's steps.
  CandleVariant candle = CandleVariant::qwen2;
  DType kv_dtype = DType::f32;  // The dtype K and V reach the cache in.
  // A quantized cache's blocks (KvCacheShape::blocks): the fused kernel reads them in place.
  std::optional<BlockType> kv_blocks;
};

class SelfAttention {
 public:
  SelfAttention() = default;
  SelfAttention(const AttentionShape& shape, Linear query, Linear key, Linear value,
                Linear output, std::optional<RmsNorm> query_norm, std::optional<RmsNorm> key_norm,
                std::shared_ptr<const RotaryEmbedding> rotary);

  // <prefix>q_proj, k_proj, v_proj (biases when `bias`) and o_proj (a bias when `output_bias`)
  // of a checkpoint, for inputs of `hidden` features.
  static SelfAttention read(const WeightReader& weights, const std::string& prefix,
                            const AttentionShape& shape, int64_t hidden, bool bias,
                            bool output_bias, std::optional<RmsNorm> query_norm,
                            std::optional<RmsNorm> key_norm,
                            std::shared_ptr<const RotaryEmbedding> rotary);

  // Makes the one-token decode buffers it writes into.
  void reserve(StepBuffers& buffers) const;
  // input [1, rows, hidden] of `sequences` (one sequence's S tokens, or one token of each of B
  // sequences); appends each row's K and V to its sequence's cache of layer `layer` and returns
  // the output projection [1, rows, hidden] (ActivationBuffer::projected).
  Tensor forward(const Tensor& input, const Sequences& sequences, int64_t layer,
                 Activations& activations) const;

 private:
  // RoPE, cache append and attention of one sequence's rows [1, S, heads * D] at positions
  // start onwards: the attended values [1, S, query heads * D].
  Tensor attend(const Tensor& projected_query, const Tensor& projected_key,
                const Tensor& projected_value, KvCache& cache, int64_t start,
                Activations& activations) const;

  AttentionShape shape_;
  Linear query_;
  Linear key_;
  Linear value_;
  Linear output_;
  std::optional<RmsNorm> query_norm_;
  std::optional<RmsNorm> key_norm_;
  std::shared_ptr<const RotaryEmbedding> rotary_;
};

}  // namespace fornace
