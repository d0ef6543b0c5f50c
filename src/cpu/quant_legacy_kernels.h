// What the legacy block kernels (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) share across ISAs: the block
// layouts, the 8-bit activation layout, and the row and column loop of the dot products.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/quant.h"

namespace fornace::cpu::legacy {

constexpr int64_t kBlockElements = 32;

// Where the fields of a block sit, in bytes from its start, as ggml-common.h defines them; a
// field a format lacks is at -1. Element j < 16 is the low nibble of byte j of the nibbles,
// element j + 16 its high nibble; bit j of the 32-bit high bits is element j's fifth bit.
// A value is scale * (q - offset) + min.
struct BlockLayout {
  size_t bytes;
  int min_at;        // f16 min (after the f16 scale at 0)
  int high_bits_at;  // uint32 of fifth bits
  int values_at;     // nibbles, or int8 values for Q8_0
  int bits;          // 4, 5 or 8
  int offset;        // subtracted from an unsigned q (Q8_0's values are signed: 0)
};
constexpr BlockLayout kQ4_0{18, -1, -1, 2, 4, 8};
constexpr BlockLayout kQ4_1{20, 2, -1, 4, 4, 0};
constexpr BlockLayout kQ5_0{22, -1, 2, 6, 5, 16};
constexpr BlockLayout kQ5_1{24, 2, 4, 8, 5, 0};
constexpr BlockLayout kQ8_0{34, -1, -1, 2, 8, 0};

constexpr bool has_min(const BlockLayout& layout) { return layout.min_at >= 0; }

// The offset the integer kernels take off a weight made unsigned: its own offset, or 128 for
// Q8_0, whose signed values the kernels flip to value + 128 for the unsigned x signed products.
constexpr int unsigned_offset(const BlockLayout& layout) {
  return layout.bits == 8 ? 128 : layout.offset;
}

// Activations: each 32-element block rounded to int8 with its own scale (max |x| / 127, round to
// nearest even), stored by pairs of blocks so that a 512-bit register takes both:
//   values:     64 int8, block 0 then block 1;
//   correction: 16 lanes of 32 bits, 8 per block, all zero but the block's first: for formats
//               without a min, -unsigned_offset * sum(q) as int32 (added to the integer sum of
//               unsigned weight x q, it makes the sum of (weight - offset) x q); for formats
//               with a min, scale * sum(q) as f32 (times the weight's min, the min's share);
//   scale:      16 f32, each block's scale 8 times.
// Lanes are per block so that vector kernels load them and multiply lane by lane. An odd last
// block pairs with a zero block (values, correction and scale all 0).
struct ActivationPair {
  int8_t values[2 * kBlockElements];
  int32_t correction[16];
  float scale[16];
};
static_assert(sizeof(ActivationPair) == 192);

inline int64_t block_count(int64_t n) { return n / kBlockElements; }
inline size_t activation_row_bytes(int64_t n) {
  return static_cast<size_t>((block_count(n) + 1) / 2) * sizeof(ActivationPair);
}

// Block `block` of an activation row: its values, correction lanes and scale lanes.
struct ActivationBlock {
  const int8_t* values;
  const int32_t* correction;
  const float* scale;
};
inline ActivationBlock activation_block(const void* row, int64_t block) {
  const auto* pair = static_cast<const ActivationPair*>(row) + block / 2;
  const int half = static_cast<int>(block % 2);
  return {pair->values + half * kBlockElements, pair->correction + half * 8,
          pair->scale + half * 8};
}

// The tables of each ISA (null for other types). The vector tables reuse the portable
// dequantize_row and quantize_row.
namespace portable {
const BlockKernels* kernels(BlockType type);
}
namespace avx2 {
const BlockKernels* kernels(BlockType type);
}
namespace avx512 {
const BlockKernels* kernels(BlockType type);
}

namespace {

inline uint16_t load_u16(const uint8_t* source) {
  uint16_t value;
  std::memcpy(&value, source, sizeof value);
  return value;
}
inline uint32_t load_u32(const uint8_t* source) {
  uint32_t value;
  std::memcpy(&value, source, sizeof value);
  return value;
}

// An activation block's scale for its largest magnitude, and the inverse that rounds it; the
// inverse is 0 for a zero or subnormal scale, so such a block rounds to zeros without overflow.
inline float activation_scale(float max_magnitude) { return max_magnitude / 127.0f; }
inline float activation_inverse_scale(float scale) {
  return scale >= FLT_MIN ? 1.0f / scale : 0.0f;
}

// Fills the correction and scale lanes of block `half` of a pair, whose q sum to `sum`.
template <const BlockLayout& Layout>
inline void store_activation_lanes(ActivationPair& pair, int half, float scale, int32_t sum) {
  int32_t* correction = pair.correction + 8 * half;
  float* scales = pair.scale + 8 * half;
  for (int lane = 0; lane < 8; ++lane) {
    correction[lane] = 0;
    scales[lane] = scale;
  }
  if constexpr (has_min(Layout)) {
    const float share = scale * static_cast<float>(sum);
    std::memcpy(correction, &share, sizeof share);
  } else {
    correction[0] = -unsigned_offset(Layout) * sum;
  }
}

// Zeroes the block that pads an odd last block to a pair.
inline void finish_activation_row(ActivationPair* pairs, int64_t blocks) {
  if (blocks % 2 == 0) return;
  ActivationPair& last = pairs[blocks / 2];
  std::memset(last.values + kBlockElements, 0, kBlockElements);
  std::memset(last.correction + 8, 0, 8 * sizeof(int32_t));
  std::memset(last.scale + 8, 0, 8 * sizeof(float));
}

// The state of a tile kernel: where its rows start, and one vector of partial sums per
// (row, column), which store() reduces with Lanes::sum into out[column * out_stride + row].
// Lanes names the vector type (Lanes::Vector) and its sum.
template <typename Lanes, int Rows, int Columns>
class TileState {
  using Vector = typename Lanes::Vector;

 public:
  TileState(const uint8_t* weights, size_t weight_row_bytes, const void* activations,
            size_t activation_row_bytes)
      : weights_(weights),
        weight_row_bytes_(weight_row_bytes),
        activations_(static_cast<const uint8_t*>(activations)),
        activation_row_bytes_(activation_row_bytes) {}

  void store(float* out, int64_t out_stride) const {
    for (int row = 0; row < Rows; ++row) {
      for (int column = 0; column < Columns; ++column) {
        out[column * out_stride + row] = Lanes::sum(sums_[row][column]);
      }
    }
  }

 protected:
  const uint8_t* weight_row(int row) const { return weights_ + row * weight_row_bytes_; }
  const uint8_t* activation_row(int column) const {
    return activations_ + column * activation_row_bytes_;
  }
  void clear() {
    for (auto& row : sums_) {
      for (Vector& sum : row) sum = Lanes::zero();
    }
  }

  Vector sums_[Rows][Columns];

 private:
  const uint8_t* weights_;
  size_t weight_row_bytes_;
  const uint8_t* activations_;
  size_t activation_row_bytes_;
};

// The row and column loop of dot_rows and dot_rows_f32, over a kernel that holds the
// accumulators of a Rows x Columns tile:
//   Tile<Rows, Columns> tile(weights, weight_row_bytes, activations, activation_row_bytes);
//   tile.run(n);  tile.store(out, out_stride);
// Rows go RowsPerPass at a time, then one by one.
template <template <int, int> class Tile, int Columns>
void dot_columns(const uint8_t* weights, size_t weight_row_bytes, int64_t rows,
                 const void* activations, size_t activation_row_bytes, int64_t n, float* out,
                 int64_t out_stride) {
  constexpr int kRowsPerPass = Tile<1, 1>::kRowsPerPass;
  int64_t row = 0;
  for (; row + kRowsPerPass <= rows; row += kRowsPerPass) {
    Tile<kRowsPerPass, Columns> tile(weights + row * weight_row_bytes, weight_row_bytes,
                                     activations, activation_row_bytes);
    tile.run(n);
    tile.store(out + row, out_stride);
  }
  for (; row < rows; ++row) {
    Tile<1, Columns> tile(weights + row * weight_row_bytes, weight_row_bytes, activations,
                          activation_row_bytes);
    tile.run(n);
    tile.store(out + row, out_stride);
  }
}

// Columns beyond kQuantMaxColumns go in further passes over the weights.
template <template <int, int> class Tile>
void dot_tiles(const void* weights, size_t weight_row_bytes, int64_t rows,
               const void* activations, size_t activation_row_bytes, int64_t columns, int64_t n,
               float* out, int64_t out_stride) {
  const auto* bytes = static_cast<const uint8_t*>(weights);
  for (int64_t column = 0; column < columns; column += kQuantMaxColumns) {
    const void* first = static_cast<const uint8_t*>(activations) + column * activation_row_bytes;
    float* column_out = out + column * out_stride;
    switch (columns - column) {
      case 1:
        dot_columns<Tile, 1>(bytes, weight_row_bytes, rows, first, activation_row_bytes, n,
                             column_out, out_stride);
        break;
      case 2:
        dot_columns<Tile, 2>(bytes, weight_row_bytes, rows, first, activation_row_bytes, n,
                             column_out, out_stride);
        break;
      case 3:
        dot_columns<Tile, 3>(bytes, weight_row_bytes, rows, first, activation_row_bytes, n,
                             column_out, out_stride);
        break;
      default:
        dot_columns<Tile, 4>(bytes, weight_row_bytes, rows, first, activation_row_bytes, n,
                             column_out, out_stride);
        break;
    }
  }
}
static_assert(kQuantMaxColumns == 4);

}  // namespace
}  // namespace fornace::cpu::legacy
