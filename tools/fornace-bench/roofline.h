// The roofline figures of a bench: bytes a decode step reads and the arithmetic of a prefill.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "io/config.h"
#include "nn/kv_cache.h"

namespace fornace::bench {

// K and V bytes that attention reads per decode step, averaged over `decode_steps` steps after a
// prompt of `prompt_tokens`: step i reads prompt_tokens + i + 1 positions of every layer, or only
// the window of a sliding-window layer (KvCacheSet::bytes_read).
double kv_bytes_read_per_token(const KvCacheShape& shape, int64_t num_layers, int64_t prompt_tokens,
                               int64_t decode_steps);

// GFLOP of a prefill of `tokens` tokens: every layer's projections for each token (2 FLOPs per
// weight), causal attention over the keys each query sees (its window on a sliding-window
// layer), and the lm_head at the last position only.
double prefill_gflop(const ModelConfig& config, const KvCacheShape& shape, int64_t tokens);
// The part of it that linear ops do: the projections and the lm_head row.
double prefill_linear_gflop(const ModelConfig& config, int64_t tokens);

}  // namespace fornace::bench
