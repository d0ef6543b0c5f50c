// The attention block. Layouts follow Candle's models: Q, K and V are views reshaped to
// [B, S, H, D] and transposed to [B, H, S, D]; RoPE writes new contiguous Q and K, and V reaches
// the KV cache as the transposed view it is (or as the family's Candle model makes it).
#include "nn/self_attention.h"

#include "core/error.h"
#include "ops/copy.h"
#include "ops/math.h"

namespace fornace {

SelfAttention::SelfAttention(const AttentionShape& shape, Linear query, Linear key, Linear value,
                             Linear output, std::optional<RmsNorm> query_norm,
                             std::optional<RmsNorm> key_norm,
                             std::shared_ptr<const RotaryEmbedding> rotary)
    : shape_(shape),
      query_(std::move(query)),
      key_(std::move(key)),
      value_(std::move(value)),
      output_(std::move(output)),
      query_norm_(std::move(query_norm)),
      key_norm_(std::move(key_norm)),
      rotary_(std::move(rotary)) {}

SelfAttention SelfAttention::read(const WeightReader& weights, const std::string& prefix,
                                  const AttentionShape& shape, int64_t hidden, bool bias,
                                  bool output_bias, std::optional<RmsNorm> query_norm,
                                  std::optional<RmsNorm> key_norm,
                                  std::shared_ptr<const RotaryEmbedding> rotary) {
  const int64_t query_width = shape.query_heads * shape.head_dim;
  const int64_t kv_width = shape.kv_heads * shape.head_dim;
  return SelfAttention(shape, weights.linear(prefix + "q_proj", query_width, hidden, bias),
                       weights.linear(prefix + "k_proj", kv_width, hidden, bias),
                       weights.linear(prefix + "v_proj", kv_width, hidden, bias),
                       weights.linear(prefix + "o_proj", hidden, query_width, output_bias),
                       std::move(query_norm), std::move(key_norm), std::move(rotary));
}

void SelfAttention::reserve(StepBuffers& buffers) const {
  const int64_t query_width = shape_.query_heads * shape_.head_dim;
  const int64_t kv_width = shape_.kv_heads * shape_.head_dim;
  buffers.reserve(ActivationBuffer::query, {1, 1, query_width});
  buffers.reserve(ActivationBuffer::key, {1, 1, kv_width});
  buffers.reserve(ActivationBuffer::value, {1, 1, kv_width});
  buffers.reserve(ActivationBuffer::value_cached, {1, 1, kv_width}, shape_.kv_dtype);
  buffers.reserve(ActivationBuffer::query_rotated, {1, shape_.query_heads, 1, shape_.head_dim});
  buffers.reserve(ActivationBuffer::key_rotated, {1, shape_.kv_heads, 1, shape_.head_dim},
                  shape_.kv_dtype);
  buffers.reserve(ActivationBuffer::attended, {1, 1, query_width}, output_.input_dtype(1));
  buffers.reserve(ActivationBuffer::projected, {1, 1, output_.outputs()});
}

Tensor SelfAttention::forward(const Tensor& input, const Sequences& sequences, int64_t layer,
                              Activations& activations) const {
  const int64_t rows = input.dim(1);
  const int64_t head_dim = shape_.head_dim;
  auto projection = [&](ActivationBuffer id, int64_t heads) {
    return activations.get(id, {1, rows, heads * head_dim}, "linear");
  };
  Tensor projected_query = projection(ActivationBuffer::query, shape_.query_heads);
  Tensor projected_key = projection(ActivationBuffer::key, shape_.kv_heads);
  Tensor value_cached = projection(ActivationBuffer::value, shape_.kv_heads);
  forward_together(input, {{&query_, &projected_query},
                           {&key_, &projected_key},
                           {&value_, &value_cached}});
  // Per-head norms (Qwen3, Gemma 3) over head_dim, in place, before RoPE.
  auto normalize_heads = [&](const std::optional<RmsNorm>& norm, const Tensor& projected,
                             int64_t heads) {
    if (!norm) return;
    Tensor per_head = projected.view({1, rows, heads, head_dim});
    norm->forward_into(per_head, per_head);
  };
  normalize_heads(query_norm_, projected_query, shape_.query_heads);
  normalize_heads(key_norm_, projected_key, shape_.kv_heads);
  // V is converted to the cache's dtype in its projection layout, then reaches the cache as the
  // transposed view it is in Candle.
  if (shape_.kv_dtype != value_cached.dtype()) {
    Tensor converted = activations.get(ActivationBuffer::value_cached, value_cached.shape(),
                                       "to_dtype", shape_.kv_dtype);
    copy_into(converted, value_cached);
    value_cached = converted;
  }
  Tensor merged;
  if (!sequences.batched()) {
    merged = attend(projected_query, projected_key, value_cached,
                    sequences.cache(0).layer(layer), sequences.start(0), activations);
  } else {
    // One token per sequence: each row attends over its own cache at its own position.
    merged = activations.get(ActivationBuffer::merged, {1, rows, shape_.query_heads * head_dim},
                             "attention", output_.input_dtype(rows));
    for (int64_t row = 0; row < rows; ++row) {
      Tensor attended =
          attend(projected_query.narrow(1, row, 1), projected_key.narrow(1, row, 1),
                 value_cached.narrow(1, row, 1), sequences.cache(row).layer(layer),
                 sequences.start(row), activations);
      copy_into(merged.narrow(1, row, 1), attended);
    }
  }
  Tensor output =
      activations.get(ActivationBuffer::projected, {1, rows, output_.outputs()}, "linear");
  output_.forward_into(output, merged);
  return output;
}

Tensor SelfAttention::attend(const Tensor& projected_query, const Tensor& projected_key,
                             const Tensor& projected_value, KvCache& cache, int64_t start,
                             Activations& activations) const {
  const int64_t length = projected_query.dim(1);
  const int64_t head_dim = shape_.head_dim;
  // [1, S, heads * D] -> the view [1, heads, S, D].
  auto split_heads = [&](const Tensor& projected, int64_t heads) {
    return projected.view({1, length, heads, head_dim}).transpose(1, 2);
  };
  auto rotate = [&](const Tensor& projected, int64_t heads, ActivationBuffer id, DType dtype) {
    Tensor split = split_heads(projected, heads);
    Tensor rotated = activations.get(id, split.shape(), "rope", dtype);
    rotary_->apply_into(rotated, split, start);
    return rotated;
  };
  Tensor query =
      rotate(projected_query, shape_.query_heads, ActivationBuffer::query_rotated, DType::f32);
  // K leaves RoPE as a new contiguous tensor in the cache's dtype.
  Tensor key =
      rotate(projected_key, shape_.kv_heads, ActivationBuffer::key_rotated, shape_.kv_dtype);
  Tensor value =
      candle_value_for_cache(split_heads(projected_value, shape_.kv_heads), shape_.candle);
  auto [all_keys, all_values] = cache.append(key, value);
  memory::record_attention_read(
      (all_keys.numel() + all_values.numel()) * static_cast<int64_t>(all_keys.element_size()));
  if (shape_.path == AttentionPath::candle) {
    return candle_attention_merged(query, all_keys, all_values, shape_.scale, shape_.window,
                                   shape_.candle);
  }
  // The kernel writes [1, H, S, D] through the transposed view of [1, S, H, D]: the heads
  // come out merged as [1, S, H * D], with no copy.
  const int64_t heads = shape_.query_heads;
  // In the dtype o_proj takes as it is (bf16 for a bf16 model).
  Tensor merged = activations.get(ActivationBuffer::attended, {1, length, heads * head_dim},
                                  "attention", output_.input_dtype(length));
  attention_into(merged.view({1, length, heads, head_dim}).transpose(1, 2), query, all_keys,
                 all_values, shape_.scale, length > 1 || shape_.window, shape_.window,
                 shape_.kv_blocks);
  return merged;
}

}  // namespace fornace
