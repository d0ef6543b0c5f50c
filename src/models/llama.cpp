// Llama (Llama 3.x, SmolLM2, TinyLlama), top to bottom:
//   x = embed(ids)
//   per layer: x += attention(rms_norm(x)); x += mlp(rms_norm(x))
//   logits = lm_head(rms_norm(x))
// with rotary frequencies as rope_scaling says (llama3 bands, or none).
#include "models/llama.h"

#include <cmath>

#include "models/architectures.h"
#include "models/decoder.h"
#include "nn/mlp.h"
#include "ops/math.h"

namespace fornace {
namespace {

struct LlamaLayer {
  RmsNorm input_norm;
  SelfAttention attention;
  RmsNorm post_attention_norm;
  GatedMlp mlp;
};

class LlamaModel : public DecoderModel {
 public:
  LlamaModel(const ModelConfig& config, const WeightSource& source, const ModelOptions& options,
             LlamaVariant variant)
      : DecoderModel(config, options) {
    WeightReader weights = weight_reader(source);
    const int64_t hidden = config.hidden_size;
    const int64_t head_dim = config.head_dim();
    const double eps = config.rms_norm_eps;
    load_ends(weights, weights.rms_norm("model.norm.weight", hidden, eps));
    auto rotary = std::make_shared<RotaryEmbedding>(
        rope_inverse_frequencies(head_dim, config.rope_theta, config.rope_scaling,
                                 config.rope_frequency_divisors),
        config.max_position_embeddings);
    AttentionShape shape = attention_shape(1.0 / std::sqrt(static_cast<double>(head_dim)));
    memory::OpScope scope("load_weights");
    for (int64_t index = 0; index < config.num_hidden_layers; ++index) {
      const std::string layer = "model.layers." + std::to_string(index) + ".";
      const std::string attention = layer + "self_attn.";
      std::optional<RmsNorm> query_norm;
      std::optional<RmsNorm> key_norm;
      if (variant.query_key_norms) {
        query_norm = weights.rms_norm(attention + "q_norm.weight", head_dim, eps);
        key_norm = weights.rms_norm(attention + "k_norm.weight", head_dim, eps);
      }
      layers_.push_back(LlamaLayer{
          weights.rms_norm(layer + "input_layernorm.weight", hidden, eps),
          SelfAttention::read(weights, attention, shape, hidden, config.attention_bias,
                              config.attention_bias && variant.output_bias, query_norm, key_norm,
                              rotary),
          weights.rms_norm(layer + "post_attention_layernorm.weight", hidden, eps),
          GatedMlp::read(weights, layer + "mlp.", hidden, config.intermediate_size,
                         GateActivation::silu)});
      reserve_buffers(layers_.back().attention, layers_.back().mlp);
    }
  }

 private:
  void forward_layers(const Tensor& hidden, const Tensor& normed, const Sequences& sequences,
                      Activations& activations) const override {
    // Each residual add runs in one pass with the norm after it (the next layer's input norm).
    if (!layers_.empty()) layers_.front().input_norm.forward_into(normed, hidden);
    for (size_t index = 0; index < layers_.size(); ++index) {
      const LlamaLayer& layer = layers_[index];
      Tensor attended =
          layer.attention.forward(normed, sequences, static_cast<int64_t>(index), activations);
      layer.post_attention_norm.add_then_forward_into(normed, hidden, attended);
      Tensor transformed = layer.mlp.forward(normed, activations);
      if (index + 1 < layers_.size()) {
        layers_[index + 1].input_norm.add_then_forward_into(normed, hidden, transformed);
      } else {
        add_into(hidden, hidden, transformed);
      }
    }
  }

  std::vector<LlamaLayer> layers_;
};

}  // namespace

std::unique_ptr<Model> load_llama_variant(const ModelConfig& config, const WeightSource& source,
                                          const ModelOptions& options, LlamaVariant variant) {
  return std::make_unique<LlamaModel>(config, source, options, variant);
}

std::unique_ptr<Model> load_llama(const ModelConfig& config, const WeightSource& source,
                                  const ModelOptions& options) {
  return load_llama_variant(config, source, options, {});
}

}  // namespace fornace
