// Gemma 3 (text: Gemma 3 270M and 1B), top to bottom:
//   x = embed(ids) * sqrt(hidden_size), the factor rounded to the weights' dtype
//   per layer: x += post_attention_norm(attention(input_norm(x)))
//              x += post_feedforward_norm(mlp(pre_feedforward_norm(x)))
//   logits = soft_cap(lm_head(norm(x)))
// Every RMSNorm scales by (1 + w); the MLP is GeGLU with the tanh GELU; Q and K get per-head
// norms; scores are scaled by query_pre_attn_scalar^-1/2. Local (sliding-window) layers see the
// last sliding_window positions and rotate by rope_local_base_freq; global layers see all and
// rotate by rope_theta (and rope_scaling).
#include <cmath>

#include "models/architectures.h"
#include "models/decoder.h"
#include "nn/mlp.h"
#include "ops/creation.h"
#include "ops/math.h"

namespace fornace {
namespace {

// Gemma's RMSNorm multiplies by (1 + w), computed in f32: kept as one f32 weight.
RmsNorm gemma_norm(const WeightReader& weights, const std::string& name, int64_t size,
                   double eps) {
  std::vector<float> values = to_f32_vector(weights.norm_weight(name, size));
  for (float& value : values) value += 1.0f;
  return RmsNorm(from_vector(values, {size}), eps);
}

// sqrt(hidden_size) as HF applies it: a float rounded to the embedding's dtype.
double embedding_scale(int64_t hidden_size, DType dtype) {
  float factor = static_cast<float>(std::sqrt(static_cast<double>(hidden_size)));
  return dtype == DType::bf16 ? bf16_to_f32(f32_to_bf16(factor))
         : dtype == DType::f16 ? f16_to_f32(f32_to_f16(factor))
                               : factor;
}

struct Gemma3Layer {
  RmsNorm input_norm;
  SelfAttention attention;
  RmsNorm post_attention_norm;
  RmsNorm pre_feedforward_norm;
  GatedMlp mlp;
  RmsNorm post_feedforward_norm;
};

class Gemma3Model : public DecoderModel {
 public:
  Gemma3Model(const ModelConfig& config, const WeightSource& source, const ModelOptions& options)
      : DecoderModel(config, options) {
    WeightReader weights = weight_reader(source);
    const int64_t hidden = config.hidden_size;
    const int64_t head_dim = config.head_dim();
    const double eps = config.rms_norm_eps;
    DType embedding_dtype = options.dtype.value_or(weights.stored_dtype("model.embed_tokens.weight"));
    load_ends(weights, gemma_norm(weights, "model.norm.weight", hidden, eps),
              embedding_scale(hidden, embedding_dtype));
    auto local_rotary = std::make_shared<RotaryEmbedding>(
        rope_inverse_frequencies(head_dim, config.rope_local_base_freq),
        config.max_position_embeddings);
    auto global_rotary = std::make_shared<RotaryEmbedding>(
        rope_inverse_frequencies(head_dim, config.rope_theta, config.rope_scaling),
        config.max_position_embeddings);
    const double scale = 1.0 / std::sqrt(config.query_pre_attn_scalar);
    memory::OpScope scope("load_weights");
    for (int64_t index = 0; index < config.num_hidden_layers; ++index) {
      const std::string layer = "model.layers." + std::to_string(index) + ".";
      const std::string attention = layer + "self_attn.";
      const bool local = config.is_sliding(index);
      auto norm = [&](const std::string& name, int64_t size) {
        return gemma_norm(weights, name, size, eps);
      };
      layers_.push_back(Gemma3Layer{
          norm(layer + "input_layernorm.weight", hidden),
          SelfAttention::read(weights, attention,
                              attention_shape(scale, local ? config.sliding_window : 0), hidden,
                              config.attention_bias, config.attention_bias,
                              norm(attention + "q_norm.weight", head_dim),
                              norm(attention + "k_norm.weight", head_dim),
                              local ? local_rotary : global_rotary),
          norm(layer + "post_attention_layernorm.weight", hidden),
          norm(layer + "pre_feedforward_layernorm.weight", hidden),
          GatedMlp::read(weights, layer + "mlp.", hidden, config.intermediate_size,
                         GateActivation::gelu_tanh),
          norm(layer + "post_feedforward_layernorm.weight", hidden)});
      reserve_buffers(layers_.back().attention, layers_.back().mlp);
    }
  }

 private:
  void forward_layers(const Tensor& hidden, const Tensor& normed, const Sequences& sequences,
                      Activations& activations) const override {
    for (size_t index = 0; index < layers_.size(); ++index) {
      const Gemma3Layer& layer = layers_[index];
      layer.input_norm.forward_into(normed, hidden);
      Tensor attended = layer.attention.forward(normed, sequences,
                                                static_cast<int64_t>(index), activations);
      layer.post_attention_norm.forward_into(attended, attended);
      add_into(hidden, hidden, attended);
      layer.pre_feedforward_norm.forward_into(normed, hidden);
      Tensor transformed = layer.mlp.forward(normed, activations);
      layer.post_feedforward_norm.forward_into(transformed, transformed);
      add_into(hidden, hidden, transformed);
    }
  }

  std::vector<Gemma3Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_gemma3(const ModelConfig& config, const WeightSource& source,
                                   const ModelOptions& options) {
  return std::make_unique<Gemma3Model>(config, source, options);
}

}  // namespace fornace
