// What the legacy block kernels (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) share across ISAs: the block
// layouts, the 8-bit activation layout, and the row and column loop of the dot products.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu/prefetch.h"
#include "cpu/quant.h"

namespace fornace::cpu::legacy {

constexpr int64_t kBlockElements = 32;

// Where the fields of a block sit, in bytes from its start, as ggml-common.h defines them; a
// field a format lacks is at -1. Element j < 16 is the low nibble of byte j of the nibbles,
// element j + 16 its high nibble; bit j of the 32-bit high bits is element j's fifth bit.
// A value is scale * (q - offset) + min.
struct BlockLayout {
  size_t bytes;
  int min_at;                // f16 min (after the f16 scale at 0)
  int high_bits_at;          // uint32 of fifth bits
  int values_at;             // nibbles, or int8 values for Q8_0
  int bits;                  // 4, 5 or 8
  int offset;                // subtracted from an unsigned q (Q8_0's values are signed: 0)
  bool interleaved = false;  // quads rearranged by interleave_quads (InterleavedQuad)
};
constexpr BlockLayout kQ4_0{18, -1, -1, 2, 4, 8};
constexpr BlockLayout kQ4_1{20, 2, -1, 4, 4, 0};
constexpr BlockLayout kQ5_0{22, -1, 2, 6, 5, 16};
constexpr BlockLayout kQ5_1{24, 2, 4, 8, 5, 0};
constexpr BlockLayout kQ8_0{34, -1, -1, 2, 8, 0};
constexpr bool has_min(const BlockLayout& layout) { return layout.min_at >= 0; }

// The formats with each quad of 4 blocks rearranged by interleave_quads (InterleavedQuad).
constexpr BlockLayout interleaved(BlockLayout layout) {
  layout.interleaved = true;
  return layout;
}
constexpr BlockLayout kQ4_0Interleaved = interleaved(kQ4_0);
constexpr BlockLayout kQ4_1Interleaved = interleaved(kQ4_1);
constexpr BlockLayout kQ5_0Interleaved = interleaved(kQ5_0);
constexpr BlockLayout kQ5_1Interleaved = interleaved(kQ5_1);
constexpr BlockLayout kQ8_0Interleaved = interleaved(kQ8_0);

// A quad of 4 blocks as interleave_quads rearranges it (the same bytes). Q8_0: elements 0-15 of
// the blocks (block k at byte 16k), then elements 16-31, as the activation quads hold them. The
// nibble formats: the blocks' 16 nibble bytes, block k at byte 16k; for 5-bit formats, a plane
// of 16 bytes of fifth bits: bit k of byte i is element i's of block k, bit 4 + k element
// 16 + i's. Then the 4 f16 scales, and the 4 f16 mins where the format has them. Each field
// loads whole; the plane, broadcast to every 128-bit lane, gives each lane's fifth bits by one
// test against a bit (AVX-512 masks) or one shift to bit 4 (AVX2: add_plane_bits).
template <const BlockLayout& Layout>
struct InterleavedQuad {
  static constexpr int kFifthBitsAt = 64;
  static constexpr int kScalesAt = Layout.bits == 8 ? 128 : Layout.bits == 5 ? 80 : 64;
  static constexpr int kMinsAt = kScalesAt + 8;
  static_assert(kScalesAt + (has_min(Layout) ? 16 : 8) == 4 * Layout.bytes);
};
// Rearranges `quads` quads of 4 blocks of `type` (Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0) into
// interleaved ones.
void interleave_quads(BlockType type, const uint8_t* blocks, uint8_t* out, int64_t quads);

// The offset the integer kernels take off a weight made unsigned: its own offset, or 128 for
// Q8_0, whose signed values the kernels flip to value + 128 for the unsigned x signed products.
constexpr int unsigned_offset(const BlockLayout& layout) {
  return layout.bits == 8 ? 128 : layout.offset;
}

// Activations: each 32-element block rounded to int8 with its own scale (max |x| / 127, round to
// nearest even), stored by quads of 4 blocks, so that each 32-bit lane of a 512-bit register
// (4 lanes per block) sees one block only and a quad takes one scale multiply per lane:
//   low:        64 int8, elements 0-15 of blocks 0, 1, 2, 3;
//   high:       64 int8, elements 16-31 of blocks 0, 1, 2, 3;
//   correction: 16 lanes of 32 bits, 4 per block, all zero but the block's first: for formats
//               without a min, -unsigned_offset * sum(q) as int32 (added to the integer sum of
//               unsigned weight x q, it makes the sum of (weight - offset) x q); for formats
//               with a min, scale * sum(q) as f32 (times the weight's min, the min's share);
//   scale:      16 f32, each block's scale 4 times.
// Blocks past the end of the row, in the last quad, are zero (values, correction and scale).
constexpr int64_t kQuadBlocks = kInterleavedQuadBlocks;
constexpr int kLanesPerBlock = 4;
struct ActivationQuad {
  int8_t low[kQuadBlocks * 16];
  int8_t high[kQuadBlocks * 16];
  int32_t correction[16];
  float scale[16];
};
static_assert(sizeof(ActivationQuad) == 256);

inline int64_t block_count(int64_t n) { return n / kBlockElements; }
inline size_t activation_row_bytes(int64_t n) {
  return static_cast<size_t>((block_count(n) + kQuadBlocks - 1) / kQuadBlocks) *
         sizeof(ActivationQuad);
}

// Block `block` of an activation row: its 16 low and 16 high values, and its lanes.
template <typename Quad, typename Value, typename Lane, typename Scale>
struct ActivationSlot {
  Value* low;
  Value* high;
  Lane* correction;
  Scale* scale;
  static ActivationSlot of(Quad* row, int64_t block) {
    Quad& quad = row[block / kQuadBlocks];
    const int slot = static_cast<int>(block % kQuadBlocks);
    return {quad.low + 16 * slot, quad.high + 16 * slot, quad.correction + kLanesPerBlock * slot,
            quad.scale + kLanesPerBlock * slot};
  }
};
using ActivationBlock =
    ActivationSlot<const ActivationQuad, const int8_t, const int32_t, const float>;
using ActivationOutput = ActivationSlot<ActivationQuad, int8_t, int32_t, float>;
inline ActivationBlock activation_block(const void* row, int64_t block) {
  return ActivationBlock::of(static_cast<const ActivationQuad*>(row), block);
}

// The tables of each ISA (null for other types). The vector tables reuse the portable
// dequantize_row and quantize_row.
namespace portable {
const BlockKernels* kernels(BlockType type);
}
namespace avx2 {
const BlockKernels* kernels(BlockType type);
// The legacy formats' interleaved quads; null for other types.
const BlockKernels* interleaved_kernels(BlockType type);
}  // namespace avx2
namespace avx512 {
const BlockKernels* kernels(BlockType type);
const BlockKernels* interleaved_kernels(BlockType type);
}  // namespace avx512

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

// Block `index`'s 32 fifth bits (bit j: element j's) from an interleaved quad's plane.
inline uint32_t fifth_bits_of(const uint8_t* plane, int index) {
  uint32_t bits = 0;
  for (int i = 0; i < 16; ++i) {
    bits |= static_cast<uint32_t>((plane[i] >> index) & 1) << i |
            static_cast<uint32_t>((plane[i] >> (4 + index)) & 1) << (16 + i);
  }
  return bits;
}

// One quad of 4 blocks of `Layout` to the interleaved arrangement (InterleavedQuad) and back.
template <const BlockLayout& Layout>
void interleave_quad(const uint8_t* blocks, uint8_t* quad) {
  using Quad = InterleavedQuad<Layout>;
  uint8_t plane[16] = {};
  for (int index = 0; index < 4; ++index) {
    const uint8_t* block = blocks + index * Layout.bytes;
    std::memcpy(quad + 16 * index, block + Layout.values_at, 16);
    if constexpr (Layout.bits == 8) {
      std::memcpy(quad + 64 + 16 * index, block + Layout.values_at + 16, 16);
    }
    std::memcpy(quad + Quad::kScalesAt + 2 * index, block, 2);
    if constexpr (has_min(Layout)) {
      std::memcpy(quad + Quad::kMinsAt + 2 * index, block + Layout.min_at, 2);
    }
    if constexpr (Layout.bits == 5) {
      const uint32_t bits = load_u32(block + Layout.high_bits_at);
      for (int i = 0; i < 16; ++i) {
        plane[i] |= static_cast<uint8_t>(((bits >> i) & 1) << index | ((bits >> (16 + i)) & 1)
                                                                          << (4 + index));
      }
    }
  }
  if constexpr (Layout.bits == 5) std::memcpy(quad + Quad::kFifthBitsAt, plane, 16);
}

template <const BlockLayout& Layout>
void deinterleave_quad(const uint8_t* quad, uint8_t* blocks) {
  using Quad = InterleavedQuad<Layout>;
  for (int index = 0; index < 4; ++index) {
    uint8_t* block = blocks + index * Layout.bytes;
    std::memcpy(block, quad + Quad::kScalesAt + 2 * index, 2);
    if constexpr (has_min(Layout)) {
      std::memcpy(block + Layout.min_at, quad + Quad::kMinsAt + 2 * index, 2);
    }
    if constexpr (Layout.bits == 5) {
      const uint32_t bits = fifth_bits_of(quad + Quad::kFifthBitsAt, index);
      std::memcpy(block + Layout.high_bits_at, &bits, 4);
    }
    std::memcpy(block + Layout.values_at, quad + 16 * index, 16);
    if constexpr (Layout.bits == 8) {
      std::memcpy(block + Layout.values_at + 16, quad + 64 + 16 * index, 16);
    }
  }
}

// Calls row(blocks, out + offset, 128) for each quad of an interleaved row of `n`, its blocks
// put back as stored: the kernels that interleaving does not speed up, on the stored layout.
template <const BlockLayout& Layout, typename Out, typename Row>
void for_each_deinterleaved_quad(const void* quads, Out* out, int64_t n, Row row) {
  constexpr int64_t kQuadElements = kQuadBlocks * kBlockElements;
  const auto* bytes = static_cast<const uint8_t*>(quads);
  uint8_t blocks[kQuadBlocks * Layout.bytes];
  for (int64_t quad = 0; quad < n / kQuadElements; ++quad) {
    deinterleave_quad<Layout>(bytes + quad * sizeof blocks, blocks);
    row(blocks, out + quad * kQuadElements, kQuadElements);
  }
}

// An activation block's scale for its largest magnitude, and the inverse that rounds it; the
// inverse is 0 for a zero or subnormal scale, so such a block rounds to zeros without overflow.
inline float activation_scale(float max_magnitude) { return max_magnitude / 127.0f; }
inline float activation_inverse_scale(float scale) {
  return scale >= FLT_MIN ? 1.0f / scale : 0.0f;
}

// Fills the correction and scale lanes of an activation block whose q sum to `sum`.
template <const BlockLayout& Layout>
inline void store_activation_lanes(const ActivationOutput& block, float scale, int32_t sum) {
  for (int lane = 0; lane < kLanesPerBlock; ++lane) {
    block.correction[lane] = 0;
    block.scale[lane] = scale;
  }
  if constexpr (has_min(Layout)) {
    const float share = scale * static_cast<float>(sum);
    std::memcpy(block.correction, &share, sizeof share);
  } else {
    block.correction[0] = -unsigned_offset(Layout) * sum;
  }
}

// Zeroes the blocks that pad the last quad of a row of `blocks`.
inline void finish_activation_row(ActivationQuad* quads, int64_t blocks) {
  for (int64_t block = blocks; block % kQuadBlocks != 0; ++block) {
    ActivationOutput padding = ActivationOutput::of(quads, block);
    std::memset(padding.low, 0, 16);
    std::memset(padding.high, 0, 16);
    std::memset(padding.correction, 0, kLanesPerBlock * sizeof(int32_t));
    std::memset(padding.scale, 0, kLanesPerBlock * sizeof(float));
  }
}

// The state of a tile kernel: where its rows start, and one vector of partial sums per
// (row, column), which store() reduces with Lanes::sum into out[column * out_stride + row].
// Lanes names the vector type (Lanes::Vector), its zero, sum and sum_four (4 vectors' sums), and
// the rows per pass for several columns; a single column (decode) takes one row at a time, which
// streams the weights from memory at about 2x the rate of two or four interleaved rows (measured
// on Zen 5).
template <typename Lanes, int Rows, int Columns>
class TileState {
 public:
  static constexpr int kRowsPerPass = Columns == 1 ? 1 : Lanes::kRowsPerPass;
  static constexpr Isa kIsa = Lanes::kIsa;
  using Vector = typename Lanes::Vector;

  TileState(const uint8_t* weights, size_t weight_row_bytes, const void* activations,
            size_t activation_row_bytes)
      : weights_(weights),
        weight_row_bytes_(weight_row_bytes),
        activations_(static_cast<const uint8_t*>(activations)),
        activation_row_bytes_(activation_row_bytes) {}

  // The sums of row 0, column 0 before their reduction.
  Vector first_sums() const { return sums_[0][0]; }
  // out[i] = the sum of the lanes of sums[i].
  static void store_four(const Vector (&sums)[4], float* out) { Lanes::sum_four(sums, out); }

  void store(float* out, int64_t out_stride) const {
    for (int row = 0; row < Rows; ++row) {
      for (int column = 0; column < Columns; ++column) {
        out[column * out_stride + row] = Lanes::sum(sums_[row][column]);
      }
    }
  }

 protected:
  const uint8_t* activation_row(int column) const {
    return activations_ + column * activation_row_bytes_;
  }

  // Clears the sums, then runs step(first_row_block, row_stride, block) over the row's blocks,
  // StepBlocks at a time; a last, partial step runs on a zero-padded copy of its blocks (a zero
  // block adds 0, its activations being zero too), so kernels never read past a row.
  template <int StepBlocks, size_t BlockBytes, typename Step>
  void run_steps(int64_t n, Step&& step) {
    run_step_pairs<StepBlocks, BlockBytes>(n, nullptr, step);
  }

  // The same, two steps at a time through pair_step(first_row_block, row_stride, block) while
  // two fit (with pair_step null, one at a time throughout).
  template <int StepBlocks, size_t BlockBytes, typename PairStep, typename Step>
  void run_step_pairs(int64_t n, PairStep&& pair_step, Step&& step) {
    clear();
    const int64_t blocks = n / kBlockElements;
    int64_t block = 0;
    if constexpr (!std::is_null_pointer_v<std::remove_reference_t<PairStep>>) {
      for (; block + 2 * StepBlocks <= blocks; block += 2 * StepBlocks) {
        pair_step(weights_ + block * BlockBytes, weight_row_bytes_, block);
      }
    }
    for (; block + StepBlocks <= blocks; block += StepBlocks) {
      step(weights_ + block * BlockBytes, weight_row_bytes_, block);
    }
    if (block == blocks) return;
    alignas(64) uint8_t padded[Rows][StepBlocks * BlockBytes] = {};
    for (int row = 0; row < Rows; ++row) {
      std::memcpy(padded[row], weights_ + row * weight_row_bytes_ + block * BlockBytes,
                  (blocks - block) * BlockBytes);
    }
    step(&padded[0][0], sizeof(padded[0]), block);
  }

  // Clears the sums, then runs body(row, weight block, block) block by block, rows inner.
  template <size_t BlockBytes, typename Body>
  void run_blocks(int64_t n, Body&& body) {
    clear();
    for (int64_t block = 0; block < n / kBlockElements; ++block) {
      for (int row = 0; row < Rows; ++row) {
        body(row, weights_ + row * weight_row_bytes_ + block * BlockBytes, block);
      }
    }
  }

  Vector sums_[Rows][Columns];

 private:
  void clear() {
    for (auto& row : sums_) {
      for (Vector& sum : row) sum = Lanes::zero();
    }
  }

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
  constexpr int kRowsPerPass = Tile<1, Columns>::kRowsPerPass;
  int64_t row = 0;
  if constexpr (Columns == 1) {
    // Decode where several streams pay: 4 rows a pass, `spacing` rows apart.
    constexpr int kStreams = 4;
    auto pass = [&](int64_t first, int64_t spacing) {
      Tile<kStreams, 1> tile(weights + first * weight_row_bytes, spacing * weight_row_bytes,
                             activations, activation_row_bytes);
      tile.run(n);
      float sums[kStreams];
      tile.store(sums, 1);
      for (int stream = 0; stream < kStreams; ++stream)
        out[first + stream * spacing] = sums[stream];
    };
    row = run_row_streams(Tile<kStreams, 1>::kIsa, weights, weight_row_bytes, rows, kStreams, pass);
    // Otherwise one row at a time, their lanes reduced 4 rows at once: each row's own
    // reduction, a chain of dependent shuffles and adds, held half the profile samples of
    // 896-wide Q4_0 rows read from L2 (Zen 4). Decode steps alternating without and with (Zen 4,
    // AVX-512, 2 runs of 128 steps, median ratios): Q4_1 +14 %, Q5_0 +11 %, Q5_1 +10-11 %,
    // Q4_K_M +5 %, Q4_0 and Q8_0 1.00.
    for (; row + 4 <= rows; row += 4) {
      typename Tile<1, 1>::Vector sums[4];
      for (int r = 0; r < 4; ++r) {
        Tile<1, 1> tile(weights + (row + r) * weight_row_bytes, weight_row_bytes, activations,
                        activation_row_bytes);
        tile.run(n);
        sums[r] = tile.first_sums();
      }
      Tile<1, 1>::store_four(sums, out + row);
    }
  }
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
static_assert(kQuantMaxColumns == 4);
template <template <int, int> class Tile>
void dot_tiles(const void* weights, size_t weight_row_bytes, int64_t rows, const void* activations,
               size_t activation_row_bytes, int64_t columns, int64_t n, float* out,
               int64_t out_stride) {
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

// The entry for `type` of a table ordered Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; null for other types.
inline const BlockKernels* pick(BlockType type, const BlockKernels (&table)[5]) {
  switch (type) {
    case BlockType::q4_0:
      return &table[0];
    case BlockType::q4_1:
      return &table[1];
    case BlockType::q5_0:
      return &table[2];
    case BlockType::q5_1:
      return &table[3];
    case BlockType::q8_0:
      return &table[4];
    default:
      return nullptr;
  }
}

// A vector ISA's table from its tiles, IntegerTile<Layout, Rows, Columns> (dot_rows) and
// FloatTile<Layout, Rows, Columns> (dot_rows_f32), and its activation rounding,
// RoundActivations<Layout>::run (quantize_activations); the portable table supplies the rest.
template <template <const BlockLayout&, int, int> class Tile, const BlockLayout& Layout>
struct TileOf {
  template <int Rows, int Columns>
  using type = Tile<Layout, Rows, Columns>;
};

// dot_rows on IntegerTile<Layout, Rows, Columns> tiles.
template <template <const BlockLayout&, int, int> class IntegerTile, const BlockLayout& Layout>
void tiled_dot_rows(const void* weights, size_t weight_row_bytes, int64_t rows,
                    const void* activations, size_t activation_row_bytes, int64_t columns,
                    int64_t n, float* out, int64_t out_stride) {
  dot_tiles<TileOf<IntegerTile, Layout>::template type>(weights, weight_row_bytes, rows,
                                                        activations, activation_row_bytes, columns,
                                                        n, out, out_stride);
}

template <template <const BlockLayout&, int, int> class IntegerTile,
          template <const BlockLayout&, int, int> class FloatTile,
          template <const BlockLayout&> class RoundActivations, const BlockLayout& Layout>
BlockKernels vector_kernels_of(BlockType type) {
  BlockKernels kernels = *portable::kernels(type);
  kernels.quantize_activations = RoundActivations<Layout>::run;
  kernels.dot_rows = tiled_dot_rows<IntegerTile, Layout>;
  kernels.dot_rows_f32 = [](const void* weights, size_t weight_row_bytes, int64_t rows,
                            const float* activations, int64_t activation_stride, int64_t columns,
                            int64_t n, float* out, int64_t out_stride) {
    dot_tiles<TileOf<FloatTile, Layout>::template type>(
        weights, weight_row_bytes, rows, activations, activation_stride * sizeof(float), columns, n,
        out, out_stride);
  };
  return kernels;
}

// The kernels of interleaved rows of `Layout` (Interleaved: its interleaved twin) from a vector
// ISA's table: the integer tiles on the quads as they are, dequantize_row on quads put back as
// stored; no f32-input kernel (a layer with f32 input keeps its rows as stored), no quantize_row,
// and no widening unless the ISA adds its own.
template <template <const BlockLayout&, int, int> class IntegerTile, BlockType Type,
          const BlockLayout& Layout, const BlockLayout& Interleaved>
BlockKernels interleaved_kernels_of(const BlockKernels& stored) {
  BlockKernels kernels = stored;
  kernels.dequantize_row = [](const void* quads, float* out, int64_t n) {
    for_each_deinterleaved_quad<Layout>(quads, out, n, portable::kernels(Type)->dequantize_row);
  };
  kernels.widen_row_bf16 = nullptr;
  kernels.widen_row_f32 = nullptr;
  kernels.quantize_row = nullptr;
  kernels.dot_rows = tiled_dot_rows<IntegerTile, Interleaved>;
  kernels.dot_rows_f32 = nullptr;
  return kernels;
}

template <template <const BlockLayout&, int, int> class IntegerTile,
          template <const BlockLayout&, int, int> class FloatTile,
          template <const BlockLayout&> class RoundActivations>
const BlockKernels* vector_kernels(BlockType type) {
  static const BlockKernels table[5] = {
      vector_kernels_of<IntegerTile, FloatTile, RoundActivations, kQ4_0>(BlockType::q4_0),
      vector_kernels_of<IntegerTile, FloatTile, RoundActivations, kQ4_1>(BlockType::q4_1),
      vector_kernels_of<IntegerTile, FloatTile, RoundActivations, kQ5_0>(BlockType::q5_0),
      vector_kernels_of<IntegerTile, FloatTile, RoundActivations, kQ5_1>(BlockType::q5_1),
      vector_kernels_of<IntegerTile, FloatTile, RoundActivations, kQ8_0>(BlockType::q8_0)};
  return pick(type, table);
}

}  // namespace
}  // namespace fornace::cpu::legacy
