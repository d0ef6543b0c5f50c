// Qwen2 forward pass, top to bottom as the architecture reads. Layouts follow Candle's Qwen2:
// Q, K and V are views reshaped to [B, S, H, D] and transposed to [B, H, S, D]; RoPE writes new
// contiguous Q and K, and V reaches the KV cache as the transposed view it is. A decode step
// (one token after the prompt) writes its activations into buffers allocated at load, so it
// allocates nothing; the KV cache kind alone decides whether the step allocates.
#include "models/qwen2.h"

#include <cmath>

#include "core/error.h"
#include "nn/attention.h"
#include "nn/layers.h"
#include "ops/copy.h"
#include "ops/math.h"

namespace fornace {
namespace {

// The activations of one token, reused by every decode step.
struct DecodeBuffers {
  Tensor hidden;
  Tensor normed;
  Tensor query;
  Tensor key;
  Tensor value;
  Tensor value_cached;  // V in the KV cache's dtype.
  Tensor query_rotated;
  Tensor key_rotated;
  Tensor attended;
  Tensor projected;
  Tensor gate;
  Tensor up;
  Tensor logits;
};

// Hands out the tensor an op writes into: in a decode step, a decode buffer; in a prompt pass,
// a buffer made on first use and reused by every layer of the pass (so each pass faults its
// pages in once, not once a layer), except K and V, which a cat cache may keep as they are.
class Activations {
 public:
  Activations(DecodeBuffers& buffers, bool decode_step)
      : buffers_(buffers), decode_step_(decode_step) {}
  Tensor get(Tensor DecodeBuffers::*buffer, const Dims& shape, const char* op,
             DType dtype = DType::f32) {
    if (decode_step_) return buffers_.*buffer;
    bool kept_by_cache = buffer == &DecodeBuffers::key_rotated ||
                         buffer == &DecodeBuffers::value || buffer == &DecodeBuffers::value_cached;
    Tensor& reused = pass_buffers_.*buffer;
    if (!kept_by_cache && reused.defined() && reused.shape() == shape) return reused;
    memory::OpScope scope(op);
    Tensor made = Tensor::empty(shape, dtype);
    if (!kept_by_cache) reused = made;
    return made;
  }

 private:
  DecodeBuffers& buffers_;
  DecodeBuffers pass_buffers_;
  bool decode_step_;
};

struct Qwen2Layer {
  RmsNorm input_norm;
  Linear query;
  Linear key;
  Linear value;
  Linear output;
  RmsNorm post_attention_norm;
  Linear gate;
  Linear up;
  Linear down;
};

class Qwen2Model : public Model {
 public:
  Qwen2Model(const ModelConfig& config, const Checkpoint& checkpoint, const ModelOptions& options)
      : config_(config), attention_path_(options.attention) {
    memory::OpScope scope("load_weights");
    auto weight = [&](const std::string& name, const Dims& shape) {
      Tensor tensor = checkpoint.tensor(name);
      if (!(tensor.shape() == shape)) {
        fail(checkpoint.directory(), ": tensor ", name, " has shape ", tensor.shape().to_string(),
             " but the config needs ", shape.to_string());
      }
      if (!is_float(tensor.dtype())) {
        fail(checkpoint.directory(), ": tensor ", name, " has dtype ", dtype_name(tensor.dtype()));
      }
      if (options.dtype && tensor.dtype() != *options.dtype) return to_dtype(tensor, *options.dtype);
      return tensor;
    };
    int64_t hidden = config.hidden_size;
    int64_t head_dim = config.head_dim();
    int64_t query_width = config.num_attention_heads * head_dim;
    int64_t kv_width = config.num_key_value_heads * head_dim;
    int64_t intermediate = config.intermediate_size;

    Tensor embedding_table = weight("model.embed_tokens.weight", {config.vocab_size, hidden});
    weight_dtype_ = embedding_table.dtype();
    kv_dtype_ = weight_dtype_;
    embedding_ = Embedding(embedding_table);
    for (int64_t index = 0; index < config.num_hidden_layers; ++index) {
      std::string prefix = "model.layers." + std::to_string(index) + ".";
      auto projection = [&](const std::string& name, int64_t out, int64_t in, bool has_bias) {
        // Biases are widened to f32 once here (exactly), not at every forward pass.
        std::optional<Tensor> bias;
        if (has_bias) bias = to_dtype(weight(prefix + name + ".bias", {out}), DType::f32);
        return Linear(weight(prefix + name + ".weight", {out, in}), bias);
      };
      Qwen2Layer layer;
      layer.input_norm = RmsNorm(weight(prefix + "input_layernorm.weight", {hidden}),
                                 config.rms_norm_eps);
      layer.query = projection("self_attn.q_proj", query_width, hidden, true);
      layer.key = projection("self_attn.k_proj", kv_width, hidden, true);
      layer.value = projection("self_attn.v_proj", kv_width, hidden, true);
      layer.output = projection("self_attn.o_proj", hidden, query_width, false);
      layer.post_attention_norm =
          RmsNorm(weight(prefix + "post_attention_layernorm.weight", {hidden}), config.rms_norm_eps);
      layer.gate = projection("mlp.gate_proj", intermediate, hidden, false);
      layer.up = projection("mlp.up_proj", intermediate, hidden, false);
      layer.down = projection("mlp.down_proj", hidden, intermediate, false);
      layers_.push_back(std::move(layer));
    }
    final_norm_ = RmsNorm(weight("model.norm.weight", {hidden}), config.rms_norm_eps);
    Tensor head = config.tie_word_embeddings ? embedding_table
                                             : weight("lm_head.weight", {config.vocab_size, hidden});
    lm_head_ = Linear(head, std::nullopt);
    rotary_ = RotaryEmbedding(head_dim, config.max_position_embeddings, config.rope_theta);

    memory::OpScope buffers_scope("decode_buffers");
    auto one_token = [](const Dims& shape, DType dtype = DType::f32) {
      return Tensor::empty(shape, dtype);
    };
    buffers_.hidden = one_token({1, 1, hidden});
    buffers_.normed = one_token({1, 1, hidden});
    buffers_.query = one_token({1, 1, query_width});
    buffers_.key = one_token({1, 1, kv_width});
    buffers_.value = one_token({1, 1, kv_width});
    buffers_.value_cached = one_token({1, 1, kv_width}, kv_dtype_);
    buffers_.query_rotated = one_token({1, config.num_attention_heads, 1, head_dim});
    buffers_.key_rotated = one_token({1, config.num_key_value_heads, 1, head_dim}, kv_dtype_);
    buffers_.attended = one_token({1, config.num_attention_heads, 1, head_dim});
    buffers_.projected = one_token({1, 1, hidden});
    buffers_.gate = one_token({1, 1, intermediate});
    buffers_.up = one_token({1, 1, intermediate});
    buffers_.logits = one_token({1, 1, config.vocab_size});
  }

  const ModelConfig& config() const override { return config_; }
  DType weight_dtype() const override { return weight_dtype_; }
  DType activation_dtype() const override { return DType::f32; }
  DType kv_dtype() const override { return kv_dtype_; }

  // In a decode step the returned logits live in a buffer that the next forward overwrites.
  Tensor forward(const Tensor& ids, KvCacheSet& cache, Logits wanted) override {
    if (ids.rank() != 2 || ids.dim(0) != 1) fail("qwen2: ids must be [1, S], got ", ids.describe());
    int64_t start = cache.length();
    int64_t length = ids.dim(1);
    int64_t width = config_.hidden_size;
    // The first pass must not use the buffers: a cat cache keeps its first K and V as given.
    Activations activations(buffers_, length == 1 && start > 0);
    Tensor hidden = activations.get(&DecodeBuffers::hidden, {1, length, width}, "embedding");
    embedding_.forward_into(hidden, ids);
    Tensor normed = activations.get(&DecodeBuffers::normed, {1, length, width}, "rms_norm");
    for (size_t index = 0; index < layers_.size(); ++index) {
      const Qwen2Layer& layer = layers_[index];
      layer.input_norm.forward_into(normed, hidden);
      add_into(hidden, hidden,
               attention(layer, normed, cache.layer(static_cast<int64_t>(index)), start,
                         activations));
      layer.post_attention_norm.forward_into(normed, hidden);
      add_into(hidden, hidden, mlp(layer, normed, activations));
    }
    if (wanted == Logits::none) return Tensor();
    int64_t rows = wanted == Logits::last ? 1 : length;
    hidden = hidden.narrow(1, length - rows, rows);
    normed = normed.narrow(1, length - rows, rows);
    final_norm_.forward_into(normed, hidden);
    Tensor logits =
        activations.get(&DecodeBuffers::logits, {1, rows, config_.vocab_size}, "linear");
    lm_head_.forward_into(logits, normed);
    return logits.view({rows, config_.vocab_size});
  }

 private:
  Tensor attention(const Qwen2Layer& layer, const Tensor& input, KvCache& cache, int64_t start,
                   Activations& activations) const {
    int64_t length = input.dim(1);
    int64_t head_dim = config_.head_dim();
    int64_t query_heads = config_.num_attention_heads;
    int64_t kv_heads = config_.num_key_value_heads;
    // [1, S, heads * D] -> the view [1, heads, S, D].
    auto split_heads = [&](const Tensor& projected, int64_t heads) {
      return projected.view({1, length, heads, head_dim}).transpose(1, 2);
    };
    auto projection = [&](Tensor DecodeBuffers::*buffer, int64_t heads) {
      return activations.get(buffer, {1, length, heads * head_dim}, "linear");
    };
    Tensor projected_query = projection(&DecodeBuffers::query, query_heads);
    Tensor projected_key = projection(&DecodeBuffers::key, kv_heads);
    Tensor value_cached = projection(&DecodeBuffers::value, kv_heads);
    forward_together(input, {{&layer.query, &projected_query},
                             {&layer.key, &projected_key},
                             {&layer.value, &value_cached}});
    auto rotate = [&](const Tensor& projected, int64_t heads, Tensor DecodeBuffers::*buffer,
                      DType dtype) {
      Tensor split = split_heads(projected, heads);
      Tensor rotated = activations.get(buffer, split.shape(), "rope", dtype);
      rotary_.apply_into(rotated, split, start);
      return rotated;
    };
    Tensor query =
        rotate(projected_query, query_heads, &DecodeBuffers::query_rotated, DType::f32);
    // K leaves RoPE as a new contiguous tensor in the cache's dtype.
    Tensor key = rotate(projected_key, kv_heads, &DecodeBuffers::key_rotated, kv_dtype_);
    // V is converted to the cache's dtype in its projection layout, then reaches the cache as
    // the transposed view it is in Candle.
    if (kv_dtype_ != value_cached.dtype()) {
      Tensor converted = activations.get(&DecodeBuffers::value_cached, value_cached.shape(),
                                         "to_dtype", kv_dtype_);
      copy_into(converted, value_cached);
      value_cached = converted;
    }
    Tensor value = split_heads(value_cached, kv_heads);
    auto [all_keys, all_values] = cache.append(key, value);
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    Tensor merged;
    if (attention_path_ == AttentionPath::candle) {
      // qwen2.rs: attn_output.transpose(1, 2)?.reshape((b_sz, q_len, self.hidden_size))?
      Tensor attended = candle_attention(query, all_keys, all_values, scale);
      merged = reshape(attended.transpose(1, 2), {1, length, -1},
                       ReshapeViews::only_when_contiguous);
    } else {
      Tensor attended = activations.get(&DecodeBuffers::attended, query.shape(), "attention");
      attention_into(attended, query, all_keys, all_values, scale, length > 1);
      // [1, H, S, D] -> [1, S, H * D]: a view for one token, a copy for a prompt.
      merged = reshape(attended.transpose(1, 2), {1, length, -1});
    }
    Tensor output = activations.get(&DecodeBuffers::projected, {1, length, config_.hidden_size},
                                    "linear");
    layer.output.forward_into(output, merged);
    return output;
  }

  Tensor mlp(const Qwen2Layer& layer, const Tensor& input, Activations& activations) const {
    Dims shape{1, input.dim(1), config_.intermediate_size};
    Tensor gate = activations.get(&DecodeBuffers::gate, shape, "linear");
    Tensor up = activations.get(&DecodeBuffers::up, shape, "linear");
    forward_together(input, {{&layer.gate, &gate}, {&layer.up, &up}});
    silu_mul_into(gate, gate, up);
    Tensor output = activations.get(&DecodeBuffers::projected, input.shape(), "linear");
    layer.down.forward_into(output, gate);
    return output;
  }

  ModelConfig config_;
  AttentionPath attention_path_;
  DType weight_dtype_ = DType::bf16;
  DType kv_dtype_ = DType::bf16;
  Embedding embedding_;
  std::vector<Qwen2Layer> layers_;
  RmsNorm final_norm_;
  Linear lm_head_;
  RotaryEmbedding rotary_;
  DecodeBuffers buffers_;
};

}  // namespace

std::unique_ptr<Model> load_qwen2(const ModelConfig& config, const Checkpoint& checkpoint,
                                  const ModelOptions& options) {
  return std::make_unique<Qwen2Model>(config, checkpoint, options);
}

}  // namespace fornace
