// Candle's attention op sequence built from Fornace's ops, and its KV cache that grows by cat.
#include "nn/candle_path.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/math.h"

namespace fornace {

const char* attention_path_name(AttentionPath path) {
  return path == AttentionPath::candle ? "candle" : "fused";
}

AttentionPath parse_attention_path(std::string_view name) {
  if (name == "fused") return AttentionPath::fused;
  if (name == "candle") return AttentionPath::candle;
  fail("unknown attention path '", name, "' (expected fused or candle)");
}

CandleVariant candle_variant_of(std::string_view model_type) {
  if (model_type == "llama") return CandleVariant::llama;
  if (model_type == "qwen3") return CandleVariant::qwen3;
  if (model_type == "gemma3_text") return CandleVariant::gemma3;
  return CandleVariant::qwen2;
}

Tensor candle_value_for_cache(const Tensor& value, CandleVariant variant) {
  return variant == CandleVariant::qwen3 ? contiguous(value) : value;
}

Tensor repeat_kv(const Tensor& x, int64_t repeats) {
  if (repeats == 1) return x;
  // candle-transformers/src/utils.rs (commit 14d4d92), fn repeat_kv:
  //   Tensor::cat(&vec![&xs; n_rep], 2)?.reshape((b_sz, n_kv_head * n_rep, seq_len, head_dim))
  // and candle-core's Tensor::reshape copies any non-contiguous input (copy_strided_src).
  std::vector<Tensor> copies(static_cast<size_t>(repeats), x);
  return reshape(cat(copies, 2), {x.dim(0), x.dim(1) * repeats, x.dim(2), x.dim(3)},
                 ReshapeViews::only_when_contiguous);
}

namespace {

// qwen2.rs (commit 07c6edb) Model::prepare_causal_attention_mask: 0 where query i (at position
// start + i) may see key j, -inf after it, and with a window also before its last `window`
// positions; [1, 1, Sq, Skv].
Tensor causal_mask(int64_t query_length, int64_t key_length, int64_t window) {
  int64_t start = key_length - query_length;
  std::vector<float> values(static_cast<size_t>(query_length * key_length), 0.0f);
  for (int64_t i = 0; i < query_length; ++i) {
    for (int64_t j = 0; j < key_length; ++j) {
      bool visible = j <= start + i && (window == 0 || j > start + i - window);
      if (!visible) values[i * key_length + j] = -INFINITY;
    }
  }
  return from_vector(values, {1, 1, query_length, key_length});
}

}  // namespace

Tensor candle_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                        double scale_factor, int64_t window, CandleVariant variant) {
  if (query.rank() != 4 || key.rank() != 4 || value.rank() != 4 || query.dim(1) % key.dim(1) != 0) {
    fail("candle_attention: query ", query.describe(), ", key ", key.describe(), " and value ",
         value.describe(), " must be [B, H, S, D] with query heads a multiple of KV heads");
  }
  memory::OpScope scope("attention");
  int64_t groups = query.dim(1) / key.dim(1);
  // candle-transformers/src/models/qwen2.rs (commit 07c6edb), Attention::forward, after the
  // cache append (the same steps in gemma3.rs and qwen3.rs; llama.rs converts K and V to f32):
  //   let key_states = repeat_kv(key_states, self.num_kv_groups)?.contiguous()?;
  //   let value_states = repeat_kv(value_states, self.num_kv_groups)?.contiguous()?;
  Tensor keys = contiguous(repeat_kv(key, groups));
  Tensor values = contiguous(repeat_kv(value, groups));
  // llama.rs: let k = k.to_dtype(DType::F32)?; let v = v.to_dtype(DType::F32)?;
  if (variant == CandleVariant::llama) {
    keys = to_dtype(keys, DType::f32);
    values = to_dtype(values, DType::f32);
  }
  //   let attn_weights = (query_states.matmul(&key_states.transpose(2, 3)?)? * scale)?;
  Tensor weights = scale(matmul(query, keys.transpose(2, 3)), scale_factor);
  //   attention_mask (prompt passes only): attn_weights.broadcast_add(mask)?
  int64_t query_length = query.dim(2);
  if (query_length > 1) weights = add(weights, causal_mask(query_length, keys.dim(2), window));
  //   candle_nn::ops::softmax_last_dim(&attn_weights)?.matmul(&value_states)?
  return matmul(softmax(weights), values);
}

Tensor candle_attention_merged(const Tensor& query, const Tensor& key, const Tensor& value,
                               double scale_factor, int64_t window, CandleVariant variant) {
  Tensor attended = candle_attention(query, key, value, scale_factor, window, variant);
  //   attn_output.transpose(1, 2)?.reshape((b_sz, q_len, hidden))?
  return reshape(attended.transpose(1, 2), {1, query.dim(2), -1},
                 ReshapeViews::only_when_contiguous);
}

namespace {

// qwen2.rs's KvCache (candle-nn kv_cache.rs): Tensor::cat(&[prev, new], 2) at every append.
// With a window, the cat's result is narrowed to its last window - 1 positions, so the next cat
// copies the window rather than the whole history.
class CandleCatCache : public KvCache {
 public:
  CandleCatCache(bool contiguous_inputs, int64_t window)
      : contiguous_inputs_(contiguous_inputs), window_(window) {}

  std::pair<Tensor, Tensor> append(const Tensor& key, const Tensor& value) override {
    memory::OpScope scope("kv_cache");
    Tensor new_key = contiguous_inputs_ ? contiguous(key) : key;
    Tensor new_value = contiguous_inputs_ ? contiguous(value) : value;
    if (!keys_.defined()) {
      keys_ = new_key;
      values_ = new_value;
    } else {
      keys_ = cat({keys_, new_key}, 2);
      values_ = cat({values_, new_value}, 2);
    }
    length_ += key.dim(2);
    std::pair<Tensor, Tensor> attended{keys_, values_};
    int64_t held = keys_.dim(2);
    if (window_ > 0 && held > window_ - 1) {
      keys_ = keys_.narrow(2, held - (window_ - 1), window_ - 1);
      values_ = values_.narrow(2, held - (window_ - 1), window_ - 1);
    }
    return attended;
  }

  std::pair<Tensor, Tensor> contents() const override { return {keys_, values_}; }
  int64_t length() const override { return length_; }
  void clear() override {
    keys_ = Tensor();
    values_ = Tensor();
    length_ = 0;
  }
  bool can_truncate(int64_t length) const override {
    return length <= length_ && first_held() <= first_kept(length);
  }
  void truncate(int64_t length) override {
    if (length == 0) return clear();
    const int64_t first = first_kept(length);
    const int64_t offset = first - first_held();
    keys_ = keys_.narrow(2, offset, length - first);
    values_ = values_.narrow(2, offset, length - first);
    length_ = length;
  }

 private:
  // The first position held now, and the first that `length` positions would leave held.
  int64_t first_held() const { return length_ - (keys_.defined() ? keys_.dim(2) : 0); }
  int64_t first_kept(int64_t length) const {
    return window_ > 0 ? std::max<int64_t>(0, length - (window_ - 1)) : 0;
  }

  bool contiguous_inputs_;
  int64_t window_;
  Tensor keys_;
  Tensor values_;
  int64_t length_ = 0;
};

}  // namespace

std::unique_ptr<KvCache> make_candle_cat_cache(bool contiguous_inputs, int64_t window) {
  return std::make_unique<CandleCatCache>(contiguous_inputs, window);
}

}  // namespace fornace
