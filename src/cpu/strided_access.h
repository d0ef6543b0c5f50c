// Reading and writing strided runs as f32, and walking several layouts of one shape together
// (the broadcasting odometer that every elementwise and row op shares).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/dtype.h"
#include "core/layout.h"

namespace fornace::cpu {

// Element offset (including layout.offset) of row `row`, where rows enumerate every dim but the
// last in row-major order.
int64_t row_offset(const Layout& layout, int64_t row);

// Reads base[offset + i * stride], i < count, converted to f32 into `buffer`.
void load_f32(const void* base, DType dtype, int64_t offset, int64_t stride, int64_t count,
              float* buffer);
// Like load_f32, but returns a pointer into `base` instead when the run is already unit-stride f32.
const float* read_f32(const void* base, DType dtype, int64_t offset, int64_t stride,
                      int64_t count, float* buffer);
// Writes `count` f32 values to the unit-stride run base[offset...], converted to `dtype`.
void store_f32(void* base, DType dtype, int64_t offset, const float* values, int64_t count);

// N layouts of one shape with their extent-1 dims dropped and neighbouring dims merged where
// every operand is one block across them. Rank is at least 1.
template <int N>
struct MergedLayouts {
  Dims shape;
  std::array<Dims, N> strides;
  std::array<int64_t, N> offsets{};

  int64_t numel() const { return shape.product(); }
  int64_t inner_stride(int operand) const { return strides[operand].back(); }
};

template <int N>
MergedLayouts<N> merge_layouts(const std::array<const Layout*, N>& layouts) {
  MergedLayouts<N> merged;
  const Dims& shape = layouts[0]->shape;
  for (int operand = 0; operand < N; ++operand) merged.offsets[operand] = layouts[operand]->offset;
  for (int dim = 0; dim < shape.size(); ++dim) {
    int64_t extent = shape[dim];
    if (extent == 1) continue;
    int last = merged.shape.size() - 1;
    bool mergeable = last >= 0;
    for (int operand = 0; mergeable && operand < N; ++operand) {
      mergeable = merged.strides[operand][last] == layouts[operand]->strides[dim] * extent;
    }
    if (mergeable) {
      merged.shape[last] *= extent;
      for (int operand = 0; operand < N; ++operand) {
        merged.strides[operand][last] = layouts[operand]->strides[dim];
      }
      continue;
    }
    merged.shape.push_back(extent);
    for (int operand = 0; operand < N; ++operand) {
      merged.strides[operand].push_back(layouts[operand]->strides[dim]);
    }
  }
  if (merged.shape.empty()) {
    merged.shape.push_back(1);
    for (int operand = 0; operand < N; ++operand) merged.strides[operand].push_back(0);
  }
  return merged;
}

// Calls run(offsets, length) for each stretch along the innermost merged dim that covers the
// row-major element range [begin, end); offsets[i] is operand i's element offset of the first
// element, and consecutive elements are inner_stride(i) apart.
template <int N, typename Run>
void for_each_run(const MergedLayouts<N>& layouts, int64_t begin, int64_t end, Run&& run) {
  const Dims& shape = layouts.shape;
  int rank = shape.size();
  Dims index = shape;
  std::array<int64_t, N> offsets = layouts.offsets;
  int64_t remainder = begin;
  for (int dim = rank - 1; dim >= 0; --dim) {
    index[dim] = remainder % shape[dim];
    remainder /= shape[dim];
    for (int operand = 0; operand < N; ++operand) {
      offsets[operand] += index[dim] * layouts.strides[operand][dim];
    }
  }
  int64_t inner = shape[rank - 1];
  int64_t position = begin;
  while (position < end) {
    int64_t length = std::min(inner - index[rank - 1], end - position);
    run(offsets, length);
    position += length;
    index[rank - 1] += length;
    for (int operand = 0; operand < N; ++operand) {
      offsets[operand] += length * layouts.strides[operand][rank - 1];
    }
    for (int dim = rank - 1; dim > 0 && index[dim] == shape[dim]; --dim) {
      index[dim] = 0;
      ++index[dim - 1];
      for (int operand = 0; operand < N; ++operand) {
        offsets[operand] += layouts.strides[operand][dim - 1] -
                            shape[dim] * layouts.strides[operand][dim];
      }
    }
  }
}

}  // namespace fornace::cpu
