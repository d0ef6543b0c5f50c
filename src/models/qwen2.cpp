// Qwen2 forward pass, top to bottom as the architecture reads. Layouts follow Candle's Qwen2:
// Q, K and V are views reshaped to [B, S, H, D] and transposed to [B, H, S, D]; RoPE writes new
// contiguous Q and K, and V reaches the KV cache as the transposed view it is.
#include "models/qwen2.h"

#include <cmath>

#include "core/error.h"
#include "nn/layers.h"
#include "ops/copy.h"
#include "ops/math.h"

namespace fornace {
namespace {

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
      : config_(config) {
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
    embedding_ = Embedding(embedding_table);
    for (int64_t index = 0; index < config.num_hidden_layers; ++index) {
      std::string prefix = "model.layers." + std::to_string(index) + ".";
      auto projection = [&](const std::string& name, int64_t out, int64_t in, bool has_bias) {
        std::optional<Tensor> bias;
        if (has_bias) bias = weight(prefix + name + ".bias", {out});
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
  }

  const ModelConfig& config() const override { return config_; }
  DType weight_dtype() const override { return weight_dtype_; }
  DType activation_dtype() const override { return DType::f32; }

  Tensor forward(const Tensor& ids, KvCacheSet& cache, bool last_only) override {
    if (ids.rank() != 2 || ids.dim(0) != 1) fail("qwen2: ids must be [1, S], got ", ids.describe());
    int64_t start = cache.length();
    Tensor hidden = embedding_.forward(ids, activation_dtype());
    for (size_t index = 0; index < layers_.size(); ++index) {
      const Qwen2Layer& layer = layers_[index];
      Tensor attended = attention(layer, layer.input_norm.forward(hidden),
                                  cache.layer(static_cast<int64_t>(index)), start);
      hidden = add(hidden, attended);
      hidden = add(hidden, mlp(layer, layer.post_attention_norm.forward(hidden)));
    }
    if (last_only) hidden = hidden.narrow(1, hidden.dim(1) - 1, 1);
    Tensor logits = lm_head_.forward(final_norm_.forward(hidden));
    return logits.view({logits.dim(1), logits.dim(2)});
  }

 private:
  Tensor attention(const Qwen2Layer& layer, const Tensor& input, KvCache& cache,
                   int64_t start) const {
    int64_t batch = input.dim(0);
    int64_t length = input.dim(1);
    int64_t head_dim = config_.head_dim();
    auto heads = [&](const Tensor& projected, int64_t count) {
      return projected.view({batch, length, count, head_dim}).transpose(1, 2);
    };
    Tensor query = heads(layer.query.forward(input), config_.num_attention_heads);
    Tensor key = heads(layer.key.forward(input), config_.num_key_value_heads);
    Tensor value = heads(layer.value.forward(input), config_.num_key_value_heads);
    query = rotary_.apply(query, start);
    key = rotary_.apply(key, start);
    auto [all_keys, all_values] = cache.append(key, value);
    Tensor attended = fornace::attention(query, all_keys, all_values,
                                         1.0 / std::sqrt(static_cast<double>(head_dim)), length > 1);
    Tensor merged = reshape(attended.transpose(1, 2), {batch, length, -1});
    return layer.output.forward(merged);
  }

  Tensor mlp(const Qwen2Layer& layer, const Tensor& input) const {
    return layer.down.forward(mul(silu(layer.gate.forward(input)), layer.up.forward(input)));
  }

  ModelConfig config_;
  DType weight_dtype_ = DType::bf16;
  Embedding embedding_;
  std::vector<Qwen2Layer> layers_;
  RmsNorm final_norm_;
  Linear lm_head_;
  RotaryEmbedding rotary_;
};

}  // namespace

std::unique_ptr<Model> load_qwen2(const ModelConfig& config, const Checkpoint& checkpoint,
                                  const ModelOptions& options) {
  return std::make_unique<Qwen2Model>(config, checkpoint, options);
}

}  // namespace fornace
