// The forward pass around the layers: embed, run the family's layers, final norm, lm_head.
#include "models/decoder.h"

#include "core/error.h"
#include "ops/creation.h"
#include "ops/math.h"

namespace fornace {

void DecoderModel::load_ends(const WeightReader& weights, RmsNorm final_norm,
                             double embedding_scale) {
  memory::OpScope scope("load_weights");
  const int64_t hidden = config_.hidden_size;
  embedding_ = weights.embedding("model.embed_tokens.weight", config_.vocab_size, hidden);
  // A quantized model computes in f32 and keeps its KV cache in bf16.
  quantized_ = embedding_.quantized_table().has_value();
  weight_dtype_ = quantized_ ? DType::f32 : embedding_.table().dtype();
  kv_dtype_ = options_.kv_dtype.value_or(options_.kv_blocks ? DType::f32
                                         : quantized_       ? DType::bf16
                                                            : weight_dtype_);
  if (options_.kv_blocks) {
    const char* type = kv_cache_type_name(*options_.kv_blocks);
    if (config_.head_dim() % 32 != 0) {
      fail("a ", type, " KV cache needs a head_dim that is a multiple of 32 (blocks of 32); ",
           config_.model_type, " has ", config_.head_dim());
    }
    if (options_.attention != AttentionPath::fused) {
      fail("a ", type, " KV cache needs the fused attention path (Candle's reads float tensors)");
    }
  }
  embedding_scale_ = embedding_scale;
  final_norm_ = std::move(final_norm);
  lm_head_ = config_.tie_word_embeddings
                 ? weights.linear_of(embedding_)
                 : weights.linear("lm_head", config_.vocab_size, hidden, false);
  step_buffers_.reserve(ActivationBuffer::hidden, {1, 1, hidden});
  step_buffers_.reserve(ActivationBuffer::normed, {1, 1, hidden}, normed_dtype(1));
  step_buffers_.reserve(ActivationBuffer::logits, {1, 1, config_.vocab_size});
}

DType DecoderModel::normed_dtype(int64_t rows) const {
  return weight_dtype_ == DType::bf16 || quantized_ ? lm_head_.input_dtype(rows) : DType::f32;
}

void DecoderModel::reserve_buffers(const SelfAttention& attention, const GatedMlp& mlp) {
  attention.reserve(step_buffers_);
  mlp.reserve(step_buffers_);
}

AttentionShape DecoderModel::attention_shape(double scale, int64_t window) const {
  AttentionShape shape;
  shape.query_heads = config_.num_attention_heads;
  shape.kv_heads = config_.num_key_value_heads;
  shape.head_dim = config_.head_dim();
  shape.scale = scale;
  shape.window = window;
  shape.path = options_.attention;
  shape.candle = candle_variant_of(config_.model_type);
  shape.kv_dtype = kv_dtype_;
  shape.kv_blocks = options_.kv_blocks;
  return shape;
}

Tensor DecoderModel::forward(const Tensor& ids, KvCacheSet& cache, Logits wanted) {
  if (ids.rank() != 2 || ids.dim(0) != 1) {
    fail(config_.model_type, ": ids must be [1, S], got ", ids.describe());
  }
  const int64_t length = ids.dim(1);
  // The first pass must not use the buffers: a cat cache keeps its first K and V as given.
  const bool decode_step = length == 1 && cache.length() > 0;
  if (wanted == Logits::none) {
    run(ids, Sequences(cache), decode_step, 0);
    return Tensor();
  }
  return run(ids, Sequences(cache), decode_step, wanted == Logits::last ? 1 : length);
}

Tensor DecoderModel::forward_batch(const std::vector<uint32_t>& ids,
                                   std::span<KvCacheSet* const> caches) {
  if (ids.size() != caches.size()) {
    fail(config_.model_type, ": a batched step got ", ids.size(), " ids for ", caches.size(),
         " sequences");
  }
  Sequences sequences(caches);
  for (int64_t row = 0; row < sequences.count(); ++row) {
    if (sequences.start(row) == 0) {
      fail(config_.model_type, ": sequence ", row, " of a batched step has no prompt in its cache");
    }
  }
  std::vector<float> values(ids.begin(), ids.end());
  Tensor id_tensor = from_vector(values, {1, static_cast<int64_t>(ids.size())}, DType::u32);
  return run(id_tensor, sequences, false, sequences.count());
}

Tensor DecoderModel::run(const Tensor& ids, const Sequences& sequences, bool decode_step,
                         int64_t logit_rows) {
  const int64_t length = ids.dim(1);
  const int64_t width = config_.hidden_size;
  Activations activations(step_buffers_, decode_step);
  Tensor hidden = activations.get(ActivationBuffer::hidden, {1, length, width}, "embedding");
  embedding_.forward_into(hidden, ids);
  if (embedding_scale_ != 0) scale_into(hidden, hidden, embedding_scale_);
  Tensor normed =
      activations.get(ActivationBuffer::normed, {1, length, width}, "rms_norm", normed_dtype(length));
  forward_layers(hidden, normed, sequences, activations);
  if (logit_rows == 0) return Tensor();
  Tensor last_hidden = hidden.narrow(1, length - logit_rows, logit_rows);
  // The last rows' norm in the dtype lm_head takes as it is for them (f32 for a prompt's last
  // row of a quantized model, whose layers took bf16).
  const DType last_dtype = normed_dtype(logit_rows);
  Tensor last_normed = last_dtype == normed.dtype()
                           ? normed.narrow(1, length - logit_rows, logit_rows)
                           : activations.get(ActivationBuffer::normed, {1, logit_rows, width},
                                             "rms_norm", last_dtype);
  final_norm_.forward_into(last_normed, last_hidden);
  Tensor logits =
      activations.get(ActivationBuffer::logits, {1, logit_rows, config_.vocab_size}, "linear");
  lm_head_.forward_into(logits, last_normed);
  if (config_.final_logit_softcapping > 0) {
    soft_cap_into(logits, logits, config_.final_logit_softcapping);
  }
  return logits.view({logit_rows, config_.vocab_size});
}

}  // namespace fornace
