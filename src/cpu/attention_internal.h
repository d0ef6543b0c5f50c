// The attention work plan shared by attention.cpp and the per-ISA tile kernels.
#pragma once

#include <cstdint>

#include "cpu/attention.h"

namespace fornace::cpu {

// Query rows of one (batch, kv head) are numbered position-major, head-minor; a tile is up to
// kTileRows consecutive such rows. A work item is one tile over one split of the key range.
constexpr int64_t kAttentionTileRows = 84;
constexpr int64_t kAttentionBlockKeys = 128;

struct AttentionPlan {
  StridedInput query;
  StridedInput key;
  StridedInput value;
  StridedOutput output;
  float scale;
  bool causal;
  int64_t window = 0;  // With causal: a row sees only the last `window` keys up to it (0: all).
  int64_t batch = 0;
  int64_t query_heads = 0;
  int64_t query_length = 0;
  int64_t head_dim = 0;
  int64_t kv_heads = 0;
  int64_t kv_length = 0;
  int64_t group = 0;           // Query heads per kv head.
  int64_t rows_per_group = 0;  // query_length * group.
  int64_t tiles = 0;           // Tiles per (batch, kv head).
  int64_t splits = 1;          // Key-range splits per tile.
  int64_t split_keys = 0;      // Keys per split, a multiple of kAttentionBlockKeys.
  // With splits > 1: per item, kAttentionTileRows records of [max, sum, accumulators[head_dim]].
  float* partials = nullptr;
};

// Offset of element [b, h, s, 0] of a 4-D layout.
inline int64_t attention_row_offset(const Layout& layout, int64_t batch, int64_t head,
                                    int64_t position) {
  return layout.offset + batch * layout.strides[0] + head * layout.strides[1] +
         position * layout.strides[2];
}

inline int64_t attention_item_count(const AttentionPlan& plan) {
  return plan.batch * plan.kv_heads * plan.tiles * plan.splits;
}
inline int64_t attention_partial_stride(const AttentionPlan& plan) {
  return plan.head_dim + 2;
}

// Items run tiles in an order that alternates cheap and dear causal tiles (first, last, second,
// second to last, ...), so that the thread pool's contiguous parts carry similar work.
inline int64_t attention_tile_of_order(int64_t order, int64_t tiles) {
  return order % 2 == 0 ? order / 2 : tiles - 1 - order / 2;
}
inline int64_t attention_order_of_tile(int64_t tile, int64_t tiles) {
  return tile < (tiles + 1) / 2 ? 2 * tile : 2 * (tiles - 1 - tile) + 1;
}

// Processes work items [begin, end) of the plan; one definition per ISA.
namespace portable {
void attention_items(const AttentionPlan& plan, int64_t begin, int64_t end);
}
namespace avx2 {
void attention_items(const AttentionPlan& plan, int64_t begin, int64_t end);
}
namespace avx512 {
void attention_items(const AttentionPlan& plan, int64_t begin, int64_t end);
}

}  // namespace fornace::cpu
