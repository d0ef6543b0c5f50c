// Candle's attention op sequence built from Fornace's ops, and the attention path names.
#include "nn/attention.h"

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
                        double scale_factor, int64_t window, bool f32_operands) {
  if (query.rank() != 4 || key.rank() != 4 || value.rank() != 4 ||
      query.dim(1) % key.dim(1) != 0) {
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
  if (f32_operands) {
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

}  // namespace fornace
