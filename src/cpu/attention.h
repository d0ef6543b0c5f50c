// Scaled dot-product attention on raw strided operands: grouped-query heads by index mapping,
// K and V read in place through their strides, softmax online in f32, row by row.
#pragma once

#include <optional>

#include "core/block_type.h"
#include "core/dtype.h"
#include "core/layout.h"

namespace fornace::cpu {

// A read-only operand: the base of its storage, its dtype and its layout (offset included).
// With `blocks` (Q8_0 or Q4_0: a quantized KV cache), each row of D values is stored as GGUF
// blocks of 32 in 32-bit words (dtype u32): the layout is [B, H, S, words] and counts words.
struct StridedInput {
  const void* base;
  DType dtype;
  Layout layout;
  std::optional<BlockType> blocks = std::nullopt;
};

// The result: the base of its storage, its dtype and a [B, Hq, Sq, D] layout whose D is
// unit-stride (a transposed view of [B, Sq, Hq, D] writes the heads merged, with no copy).
struct StridedOutput {
  void* base;
  DType dtype;
  Layout layout;
};

// query [B, Hq, Sq, D], key and value [B, Hkv, Skv, D] (shapes already checked by the caller;
// Hq a multiple of Hkv, Skv >= 1, Sq <= Skv when causal). Writes the [B, Hq, Sq, D] result
// through `output`'s layout. Query head h reads kv head h / (Hq / Hkv). With
// `causal`, query row i sits at position Skv - Sq + i and sees keys 0..that position; a
// `window` above 0 narrows that to the last `window` keys (a sliding-window layer).
// Quantized K and V are read in place: each block of keys widened as the tile loads it (to bf16
// levels and f32 scales with AVX512_BF16, to f32 otherwise).
// Runs on the global thread pool.
void attention(const StridedInput& query, const StridedInput& key, const StridedInput& value,
               const StridedOutput& output, float scale, bool causal, int64_t window = 0);

// The products that attention over a bf16 cache runs on at the active level, in words.
const char* bf16_attention_kernel_name();
// The products that attention over a q8_0 or q4_0 cache runs on at the active level, in words.
const char* quantized_cache_attention_kernel_name();

}  // namespace fornace::cpu
