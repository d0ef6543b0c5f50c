// Attention: plans the work (tiles of GQA rows, key-range splits when there are too few tiles
// for the threads, as in decode), runs the ISA's tile kernel on the thread pool, and combines
// the splits. Also the portable instance of the tile kernel.
#include "cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/attention_internal.h"
#include "cpu/cpu_features.h"
#include "cpu/strided_access.h"
#include "cpu/thread_pool.h"

#define FORNACE_KERNEL_NAMESPACE portable
#include "cpu/attention_kernel.inl"
#undef FORNACE_KERNEL_NAMESPACE

namespace fornace::cpu {
namespace {

// A split covers at least this many keys, so that its fixed costs stay small.
constexpr int64_t kMinSplitKeys = 256;
// (query row, key, dim) products worth one more thread: about 4 µs of work, a few times the
// pool's hand-off (1,024 keys of one row at head_dim 64). Decode of Qwen2.5-0.5B at 513 keys
// (14 rows) then takes both threads: 17.6 -> 12.1 µs a layer with an f32 cache, 13.1 -> 9.0 µs
// with bf16 (micro-attention, Zen 5); at 4,096 keys a row it took one.
constexpr int64_t kMinWorkPerThread = 1024 * 64;

thread_local std::vector<float> split_partials;
thread_local std::vector<float> combined_row;

// Combines the key-range splits of every tile into the output rows.
void combine_splits(const AttentionPlan& plan) {
  int64_t stride = attention_partial_stride(plan);
  if (static_cast<int64_t>(combined_row.size()) < plan.head_dim) combined_row.resize(plan.head_dim);
  float* result = combined_row.data();
  for (int64_t batch = 0; batch < plan.batch; ++batch) {
    for (int64_t kv_head = 0; kv_head < plan.kv_heads; ++kv_head) {
      for (int64_t tile = 0; tile < plan.tiles; ++tile) {
        int64_t first_row = tile * kAttentionTileRows;
        int64_t rows = std::min(kAttentionTileRows, plan.rows_per_group - first_row);
        int64_t order = attention_order_of_tile(tile, plan.tiles);
        int64_t first_item = ((batch * plan.kv_heads + kv_head) * plan.tiles + order) * plan.splits;
        for (int64_t r = 0; r < rows; ++r) {
          float maximum = -INFINITY;
          for (int64_t split = 0; split < plan.splits; ++split) {
            const float* record =
                plan.partials + ((first_item + split) * kAttentionTileRows + r) * stride;
            maximum = std::max(maximum, record[0]);
          }
          float total = 0.0f;
          std::fill(result, result + plan.head_dim, 0.0f);
          for (int64_t split = 0; split < plan.splits; ++split) {
            const float* record =
                plan.partials + ((first_item + split) * kAttentionTileRows + r) * stride;
            if (record[1] == 0.0f) continue;
            float weight = std::exp(record[0] - maximum);
            total += weight * record[1];
            for (int64_t d = 0; d < plan.head_dim; ++d) result[d] += weight * record[2 + d];
          }
          float inverse = 1.0f / total;
          for (int64_t d = 0; d < plan.head_dim; ++d) result[d] *= inverse;
          int64_t row = first_row + r;
          int64_t head = kv_head * plan.group + row % plan.group;
          int64_t position = row / plan.group;
          store_f32(plan.output.base, plan.output.dtype,
                    attention_row_offset(plan.output.layout, batch, head, position), result,
                    plan.head_dim);
        }
      }
    }
  }
}

// The products below AVX-512, where every cache type runs on f32.
const char* f32_attention_kernel_name() {
  return active_isa() == Isa::avx2 ? "f32 FMA (AVX2)" : "f32, portable";
}

}  // namespace

const char* bf16_attention_kernel_name() {
  if (amx_selected()) return "AMX bf16 tiles";
  return active_isa() == Isa::avx512 ? "bf16 pairs (vdpbf16ps)" : f32_attention_kernel_name();
}

const char* quantized_cache_attention_kernel_name() {
  return active_isa() == Isa::avx512 ? "bf16 pairs over levels (vdpbf16ps)"
                                     : f32_attention_kernel_name();
}

void attention(const StridedInput& query, const StridedInput& key, const StridedInput& value,
               const StridedOutput& output, float scale, bool causal, int64_t window) {
  AttentionPlan plan{query, key, value, output, scale, causal, causal ? window : 0};
  plan.batch = query.layout.shape[0];
  plan.query_heads = query.layout.shape[1];
  plan.query_length = query.layout.shape[2];
  plan.head_dim = query.layout.shape[3];
  plan.kv_heads = key.layout.shape[1];
  plan.kv_length = key.layout.shape[2];
  plan.group = plan.query_heads / plan.kv_heads;
  plan.rows_per_group = plan.query_length * plan.group;
  plan.tiles = (plan.rows_per_group + kAttentionTileRows - 1) / kAttentionTileRows;
  if (plan.batch * plan.query_heads * plan.query_length == 0) return;

  // Threads that pay for their hand-off, then key-range splits when the tiles are fewer than
  // those threads (decode). The work is counted in (query row, visible key, dim) products.
  ThreadPool& pool = ThreadPool::global();
  int64_t keys_per_row = plan.causal ? plan.kv_length - plan.query_length / 2 : plan.kv_length;
  int64_t work = plan.batch * plan.query_heads * plan.query_length * keys_per_row * plan.head_dim;
  int64_t threads = std::clamp<int64_t>(work / kMinWorkPerThread, 1, pool.threads());
  int64_t units = plan.batch * plan.kv_heads * plan.tiles;
  plan.splits = 1;
  if (units < threads) {
    int64_t by_length = (plan.kv_length + kMinSplitKeys - 1) / kMinSplitKeys;
    plan.splits = std::max<int64_t>(1, std::min((threads + units - 1) / units, by_length));
  }
  int64_t per_split = (plan.kv_length + plan.splits - 1) / plan.splits;
  plan.split_keys =
      (per_split + kAttentionBlockKeys - 1) / kAttentionBlockKeys * kAttentionBlockKeys;
  plan.splits = (plan.kv_length + plan.split_keys - 1) / plan.split_keys;
  plan.partials = nullptr;
  if (plan.splits > 1) {
    size_t needed = static_cast<size_t>(
        attention_item_count(plan) * kAttentionTileRows * attention_partial_stride(plan));
    if (split_partials.size() < needed) split_partials.resize(needed);
    plan.partials = split_partials.data();
  }

  auto kernel = portable::attention_items;
  switch (active_isa()) {
    case Isa::avx512:
      kernel = avx512::attention_items;
      break;
    case Isa::avx2:
      kernel = avx2::attention_items;
      break;
    case Isa::portable:
      break;
  }
  int64_t items = attention_item_count(plan);
  // Items differ in cost (causal tiles): threads claim them as they finish.
  if (threads <= 1) {
    kernel(plan, 0, items);
  } else {
    pool.run_balanced(items, 1, [&](int64_t begin, int64_t end) { kernel(plan, begin, end); });
  }
  if (plan.splits > 1) combine_splits(plan);
}

}  // namespace fornace::cpu
