// The attention tile kernel, compiled once per ISA: attention.cpp (portable),
// attention_avx2.cpp and attention_avx512.cpp each define FORNACE_KERNEL_NAMESPACE and include
// this file, so every copy has its own namespace and no inline function crosses ISAs.
//
// A tile holds up to kAttentionTileRows query rows that share one kv head (the heads of a GQA
// group, for one or more positions). It walks its key range in blocks of kAttentionBlockKeys:
// each K and V row of a block is read once from memory (in place when it is unit-stride f32)
// and then from L1 by every row of the tile. Softmax is online (running max and sum), so no
// [Sq, Skv] matrix is ever formed.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/attention_internal.h"
#include "cpu/simd.h"
#include "cpu/strided_access.h"

namespace fornace::cpu::FORNACE_KERNEL_NAMESPACE {
namespace {

struct TileScratch {
  std::vector<float> query;         // [tile rows, D], pre-scaled.
  std::vector<float> accumulators;  // [tile rows, D].
  std::vector<float> scores;        // [tile rows, block keys].
  std::vector<float> keys;          // [block keys, D] when K needs conversion.
  std::vector<float> values;        // [block keys, D] when V needs conversion.
  std::vector<float> row;           // [D] for a converted output row.

  void reserve(int64_t head_dim) {
    auto grow = [](std::vector<float>& buffer, int64_t size) {
      if (static_cast<int64_t>(buffer.size()) < size) buffer.resize(size);
    };
    grow(query, kAttentionTileRows * head_dim);
    grow(accumulators, kAttentionTileRows * head_dim);
    grow(scores, kAttentionTileRows * kAttentionBlockKeys);
    grow(keys, kAttentionBlockKeys * head_dim);
    grow(values, kAttentionBlockKeys * head_dim);
    grow(row, head_dim);
  }
};

thread_local TileScratch tile_scratch;

// Offset of element [b, h, s, 0] of a 4-D layout.
inline int64_t row_start(const Layout& layout, int64_t batch, int64_t head, int64_t position) {
  return layout.offset + batch * layout.strides[0] + head * layout.strides[1] +
         position * layout.strides[2];
}

// Rows [first, first + count) of kv head (batch, head) as f32 rows `*row_stride` apart: in place
// when the operand is unit-stride f32, otherwise converted into `buffer`.
inline const float* kv_rows(const StridedInput& input, int64_t batch, int64_t head, int64_t first,
                            int64_t count, int64_t head_dim, float* buffer,
                            int64_t* row_stride) {
  const Layout& layout = input.layout;
  int64_t start = row_start(layout, batch, head, first);
  if (input.dtype == DType::f32 && (layout.strides[3] == 1 || head_dim == 1)) {
    *row_stride = layout.strides[2];
    return static_cast<const float*>(input.base) + start;
  }
  for (int64_t j = 0; j < count; ++j) {
    load_f32(input.base, input.dtype, start + j * layout.strides[2], layout.strides[3], head_dim,
             buffer + j * head_dim);
  }
  *row_stride = head_dim;
  return buffer;
}

using simd::Vec;

inline void scale_in_place(float* values, float factor, int64_t count) {
  const Vec scale = simd::broadcast(factor);
  simd::transform(values, values, count, [&](Vec x) { return simd::multiply(x, scale); });
}

// accumulators = accumulators * correction + sum over j < count of weights[j] * rows[j].
// With a head dim known at compile time the accumulators stay in registers across the keys.
template <int64_t kFixedDim>
inline void accumulate_rows(float* accumulators, float correction, const float* weights,
                            const float* rows, int64_t row_stride, int64_t count,
                            int64_t runtime_dim) {
  if constexpr (kFixedDim != 0) {
    constexpr int kVectors = kFixedDim / simd::kWidth;
    static_assert(kFixedDim % simd::kWidth == 0);
    const Vec scale = simd::broadcast(correction);
    Vec sums[kVectors];
    for (int c = 0; c < kVectors; ++c) {
      sums[c] = simd::multiply(simd::load(accumulators + c * simd::kWidth), scale);
    }
    for (int64_t j = 0; j < count; ++j) {
      const Vec weight = simd::broadcast(weights[j]);
      const float* row = rows + j * row_stride;
      for (int c = 0; c < kVectors; ++c) {
        sums[c] = simd::multiply_add(weight, simd::load(row + c * simd::kWidth), sums[c]);
      }
    }
    for (int c = 0; c < kVectors; ++c) simd::store(accumulators + c * simd::kWidth, sums[c]);
  } else {
    if (correction != 1.0f) scale_in_place(accumulators, correction, runtime_dim);
    for (int64_t j = 0; j < count; ++j) {
      const float* row = rows + j * row_stride;
      const Vec weight = simd::broadcast(weights[j]);
      int64_t d = 0;
      for (; d + simd::kWidth <= runtime_dim; d += simd::kWidth) {
        simd::store(accumulators + d, simd::multiply_add(weight, simd::load(row + d),
                                                         simd::load(accumulators + d)));
      }
      for (; d < runtime_dim; ++d) accumulators[d] += weights[j] * row[d];
    }
  }
}

// One work item: tile `tile` of (batch, kv_head) over key split `split`.
template <int64_t kFixedDim>
void process_item(const AttentionPlan& plan, int64_t batch, int64_t kv_head, int64_t tile,
                  int64_t split, float* partial) {
  const int64_t head_dim = kFixedDim ? kFixedDim : plan.head_dim;
  TileScratch& scratch = tile_scratch;
  scratch.reserve(head_dim);

  int64_t first_row = tile * kAttentionTileRows;
  int64_t rows = std::min(kAttentionTileRows, plan.rows_per_group - first_row);
  int64_t heads[kAttentionTileRows];
  int64_t positions[kAttentionTileRows];
  int64_t key_limits[kAttentionTileRows];  // Keys [0, limit) are visible to the row.
  float maxima[kAttentionTileRows];
  float sums[kAttentionTileRows];
  int64_t tile_key_end = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t row = first_row + r;
    positions[r] = row / plan.group;
    heads[r] = kv_head * plan.group + row % plan.group;
    key_limits[r] = plan.causal
                        ? std::min(plan.kv_length,
                                   plan.kv_length - plan.query_length + positions[r] + 1)
                        : plan.kv_length;
    tile_key_end = std::max(tile_key_end, key_limits[r]);
    maxima[r] = -std::numeric_limits<float>::infinity();
    sums[r] = 0.0f;
  }
  int64_t key_begin = split * plan.split_keys;
  int64_t key_end = std::min(tile_key_end, key_begin + plan.split_keys);

  float* query = scratch.query.data();
  float* accumulators = scratch.accumulators.data();
  const Layout& query_layout = plan.query.layout;
  for (int64_t r = 0; r < rows; ++r) {
    float* query_row = query + r * head_dim;
    load_f32(plan.query.base, plan.query.dtype,
             row_start(query_layout, batch, heads[r], positions[r]), query_layout.strides[3],
             head_dim, query_row);
    scale_in_place(query_row, plan.scale, head_dim);
    std::fill(accumulators + r * head_dim, accumulators + (r + 1) * head_dim, 0.0f);
  }

  for (int64_t block = key_begin; block < key_end; block += kAttentionBlockKeys) {
    int64_t block_keys = std::min(kAttentionBlockKeys, key_end - block);
    int64_t key_stride = 0;
    int64_t value_stride = 0;
    const float* keys = kv_rows(plan.key, batch, kv_head, block, block_keys, head_dim,
                                scratch.keys.data(), &key_stride);
    const float* values = kv_rows(plan.value, batch, kv_head, block, block_keys, head_dim,
                                  scratch.values.data(), &value_stride);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t visible = std::clamp<int64_t>(key_limits[r] - block, 0, block_keys);
      if (visible == 0) continue;
      const float* query_row = query + r * head_dim;
      float* scores = scratch.scores.data() + r * kAttentionBlockKeys;
      for (int64_t j = 0; j < visible; ++j) {
        scores[j] = simd::dot(query_row, keys + j * key_stride, head_dim);
      }
      float new_max = std::max(maxima[r], simd::max_value(scores, visible));
      float correction = std::exp(maxima[r] - new_max);  // 0 for the first block.
      const Vec shift = simd::broadcast(new_max);
      simd::transform(scores, scores, visible,
                      [&](Vec x) { return simd::exp(simd::subtract(x, shift)); });
      sums[r] = sums[r] * correction + simd::sum(scores, visible);
      maxima[r] = new_max;
      accumulate_rows<kFixedDim>(accumulators + r * head_dim, correction, scores, values,
                                 value_stride, visible, head_dim);
    }
  }

  if (partial) {
    // Key-range split: leave the running state for attention.cpp to combine.
    int64_t stride = attention_partial_stride(plan);
    for (int64_t r = 0; r < rows; ++r) {
      float* record = partial + r * stride;
      record[0] = maxima[r];
      record[1] = sums[r];
      std::copy(accumulators + r * head_dim, accumulators + (r + 1) * head_dim, record + 2);
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    int64_t out_offset =
        ((batch * plan.query_heads + heads[r]) * plan.query_length + positions[r]) * head_dim;
    float* result = plan.output_dtype == DType::f32
                        ? static_cast<float*>(plan.output) + out_offset
                        : scratch.row.data();
    const Vec inverse = simd::broadcast(1.0f / sums[r]);
    simd::transform(accumulators + r * head_dim, result, head_dim,
                    [&](Vec x) { return simd::multiply(x, inverse); });
    if (plan.output_dtype != DType::f32) {
      store_f32(plan.output, plan.output_dtype, out_offset, result, head_dim);
    }
  }
}

}  // namespace

void attention_items(const AttentionPlan& plan, int64_t begin, int64_t end) {
  for (int64_t item = begin; item < end; ++item) {
    int64_t split = item % plan.splits;
    int64_t rest = item / plan.splits;
    int64_t order = rest % plan.tiles;
    rest /= plan.tiles;
    int64_t kv_head = rest % plan.kv_heads;
    int64_t batch = rest / plan.kv_heads;
    int64_t tile = attention_tile_of_order(order, plan.tiles);
    float* partial = plan.splits > 1 ? plan.partials + item * kAttentionTileRows *
                                                            attention_partial_stride(plan)
                                     : nullptr;
    if (plan.head_dim == 64) {
      process_item<64>(plan, batch, kv_head, tile, split, partial);
    } else if (plan.head_dim == 128) {
      process_item<128>(plan, batch, kv_head, tile, split, partial);
    } else {
      process_item<0>(plan, batch, kv_head, tile, split, partial);
    }
  }
}

}  // namespace fornace::cpu::FORNACE_KERNEL_NAMESPACE
