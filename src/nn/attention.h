// Attention over the KV cache by one of two paths: Fornace's fused kernel, or Candle's op sequence.
#pragma once

#include <string_view>

#include "core/tensor.h"

namespace fornace {

// `fused` reads K and V in any layout and maps query heads to KV heads by index; `candle` runs
// the ops that Candle's models run (repeat_kv by cat and reshape, contiguous, matmul, softmax),
// so that the bench measures what Candle's users pay for each KV cache kind.
enum class AttentionPath { fused, candle };

const char* attention_path_name(AttentionPath path);
// Parses "fused" or "candle"; throws Error listing them otherwise.
AttentionPath parse_attention_path(std::string_view name);

// Candle's repeat_kv (candle-transformers/src/utils.rs): x [B, Hkv, S, D] repeated `repeats`
// times per KV head as cat(x × repeats, dim 2) then reshape to [B, Hkv * repeats, S, D]. On a
// non-contiguous x the cat takes its strided path and the reshape copies its transposed result
// through the strided copy, in runs of one head_dim.
Tensor repeat_kv(const Tensor& x, int64_t repeats);

// Candle's attention of a decoder layer, from the cache's K and V on: query [B, Hq, Sq, D] sits
// at the last Sq of the Skv positions in key and value [B, Hkv, Skv, D]. A prompt pass adds a
// causal mask (limited to the last `window` positions when window > 0). With `f32_operands`
// the repeated K and V are converted to f32 before the matmuls, as Candle's llama.rs does
// (qwen2.rs, qwen3.rs and gemma3.rs multiply in the cache's dtype). Returns [B, Hq, Sq, D] in
// f32 (query's dtype).
Tensor candle_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                        double scale_factor, int64_t window = 0, bool f32_operands = false);

}  // namespace fornace
