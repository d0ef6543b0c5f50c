// Candle's attention as its models run it, op by op: the KV cache append by cat, repeat_kv,
// and the attention itself, so that the bench measures what Candle's users pay for each cache
// kind. Fornace's own path (nn/self_attention.h's fused kernel, the prealloc cache) is apart.
#pragma once

#include <memory>
#include <string_view>

#include "core/tensor.h"
#include "nn/kv_cache.h"

namespace fornace {

// `fused` reads K and V in any layout and maps query heads to KV heads by index; `candle` runs
// the ops that Candle's models run (repeat_kv by cat and reshape, contiguous, matmul, softmax).
enum class AttentionPath { fused, candle };

const char* attention_path_name(AttentionPath path);
// Parses "fused" or "candle"; throws Error listing them otherwise.
AttentionPath parse_attention_path(std::string_view name);

// The candle-transformers model file whose attention a family reproduces. They differ in two
// steps: llama.rs converts the repeated K and V to f32 before the matmuls (the others multiply
// in the cache's dtype), and qwen3.rs hands the cache a contiguous V (the others the transposed
// view of V's projection).
enum class CandleVariant { qwen2, llama, qwen3, gemma3 };
// The variant of a config.json model_type ("llama", "qwen2", "qwen3", "gemma3_text"); qwen2's
// for any other.
CandleVariant candle_variant_of(std::string_view model_type);

// V [B, H, S, D] as the family's Candle model hands it to the KV cache: made contiguous
// (qwen3.rs: kv_cache.append(&k.contiguous()?, &v.contiguous()?)) or the view as it is. Every
// attention path takes it, so that a cat cache holds what it holds in Candle.
Tensor candle_value_for_cache(const Tensor& value, CandleVariant variant);

// Candle's repeat_kv (candle-transformers/src/utils.rs): x [B, Hkv, S, D] repeated `repeats`
// times per KV head as cat(x × repeats, dim 2) then reshape to [B, Hkv * repeats, S, D]. On a
// non-contiguous x the cat takes its strided path and the reshape copies its transposed result
// through the strided copy, in runs of one head_dim.
Tensor repeat_kv(const Tensor& x, int64_t repeats);

// Candle's attention of a decoder layer, from the cache's K and V on: query [B, Hq, Sq, D] sits
// at the last Sq of the Skv positions in key and value [B, Hkv, Skv, D]. A prompt pass adds a
// causal mask (limited to the last `window` positions when window > 0). Returns [B, Hq, Sq, D]
// in f32 (query's dtype).
Tensor candle_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                        double scale_factor, int64_t window = 0,
                        CandleVariant variant = CandleVariant::qwen2);

// The same for batch 1, with the heads merged as Candle's models merge them
// (attn_output.transpose(1, 2)?.reshape((b_sz, q_len, hidden))?): [1, Sq, Hq * D].
Tensor candle_attention_merged(const Tensor& query, const Tensor& key, const Tensor& value,
                               double scale_factor, int64_t window, CandleVariant variant);

// The cat and cat-contiguous cache kinds: Candle's KvCache of qwen2.rs, which keeps the whole
// cache as one tensor per side and grows it by cat along the position dim. With
// `contiguous_inputs` (cat-contiguous, Candle PR #4077's fix) K and V are made contiguous first;
// without, a transposed V sends cat down its strided path and the cache stays non-contiguous.
// With `window` > 0 only the last window - 1 positions are kept after each append.
std::unique_ptr<KvCache> make_candle_cat_cache(bool contiguous_inputs, int64_t window);

}  // namespace fornace
