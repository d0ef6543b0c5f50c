// The attention tile kernel, compiled once per ISA: attention.cpp (portable),
// attention_avx2.cpp and attention_avx512.cpp each define FORNACE_KERNEL_NAMESPACE and include
// this file, so every copy has its own namespace and no inline function crosses ISAs.
//
// A tile holds up to kAttentionTileRows query rows that share one kv head (the heads of a GQA
// group, for one or more positions), so every K and V row is read once for all of them. The tile
// walks its key range in blocks of kAttentionBlockKeys, flash-attention style:
//   1. the block's K rows are transposed into a [D, block keys] f32 scratch (always, whatever
//      the layout, so the arithmetic never depends on where K came from; bf16 widened on the way);
//   2. scores = Q · K^T by a register-blocked product: a few rows by a few vectors of keys,
//      vertical FMAs only, with no horizontal sums;
//   3. an online softmax per row (running max and sum) turns the scores into weights;
//   4. accumulators += weights · V by the same register-blocked product, V rows read in place
//      (bf16 rows widened as they are loaded).
// A quantized cache's K and V (Q8_0, Q4_0 blocks) are widened block by block into the f32
// scratch of steps 1 and 4, 128 keys at a time: never a widened copy of the cache.
// No [Sq, Skv] matrix is ever formed, and keys past a row's causal limit are masked or skipped.
// With AVX512_BF16 and bf16 K and V (a bf16 KV cache), both products run on vdpbf16ps instead:
// Q, K, V and the softmax weights as bf16 pairs, f32 sums, twice the FMA path's arithmetic rate;
// where the CPU has AMX-BF16 (cpu::amx_selected), on AMX tiles (AmxOperands). A quantized cache
// takes the same pairs there: its blocks' integer levels, exact in bf16, with each key's scales
// applied in f32 to its sums over K's blocks and folded into its weights for V's.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "cpu/amx_tiles.h"
#include "cpu/attention_internal.h"
#include "cpu/cpu_features.h"
#include "cpu/prefetch.h"
#include "cpu/simd.h"
#include "cpu/strided_access.h"

namespace fornace::cpu::FORNACE_KERNEL_NAMESPACE {
namespace {

using simd::Vec;

// The register tile of the products: up to kMaxTileRows rows by kColumnVectors vectors, sized
// to the register file (32 vector registers with AVX-512, 16 otherwise). Seven rows cover a
// Qwen2 GQA group in one pass (a decode step); but a 7 x 4 tile spills two of its sums to the
// stack, so longer runs of rows (prefill) go kRunTileRows at a time, whose tile fits.
#if defined(__AVX512F__)
constexpr int kColumnVectors = 4;
constexpr int kMaxTileRows = 7;
constexpr int kRunTileRows = 6;
#else
constexpr int kColumnVectors = 2;
constexpr int kMaxTileRows = 6;
constexpr int kRunTileRows = 6;
#endif
constexpr int64_t kColumns = kColumnVectors * simd::kWidth;
constexpr int64_t kBlockKeys = kAttentionBlockKeys;
static_assert(kBlockKeys % kColumns == 0);
// Columns of the transposed Q words of the AMX path: every row of a tile, rounded up to 16.
constexpr int64_t kQueryColumns = (kAttentionTileRows + 15) / 16 * 16;

inline int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

struct TileScratch {
  std::vector<float> query;          // [tile rows, D], pre-scaled.
  std::vector<float> accumulators;   // [tile rows, padded D].
  std::vector<float> scores;         // [tile rows, block keys]: scores, then softmax weights.
  std::vector<float> keys;           // [block keys, D] when K needs conversion.
  std::vector<float> keys_by_dim;    // [D, block keys]: the block's K transposed.
  std::vector<float> values;         // [block keys, padded D] when V is not used in place.
  std::vector<float> row;            // [D] for a converted output row.
  // The bf16 pair path: 32-bit words that each hold two bf16 values.
  std::vector<uint32_t> query_pairs;   // [tile rows, D / 2]: pre-scaled Q.
  std::vector<uint32_t> key_pairs;     // [D / 2, block keys]: the block's K transposed by pairs.
  std::vector<uint32_t> value_pairs;   // [block keys / 2, D]: V rows j and j + 1 interleaved
                                       // (AMX); the pair path's odd last key and a zero row.
  std::vector<uint32_t> weight_pairs;  // [tile rows, block keys / 2]: softmax weights.
  std::vector<uint32_t> query_by_pair;  // [D / 2, kQueryColumns]: Q's words transposed (AMX).
  // The pair path over a quantized cache: the block's V levels as bf16 rows [keys, D], K's and
  // V's scales [D / 32, block keys], and the weights times V's scales as bf16 pairs
  // [D / 32, kMaxTileRows, block keys / 2].
  std::vector<uint16_t> value_levels;
  std::vector<float> key_scales;
  std::vector<float> value_scales;
  std::vector<uint32_t> scaled_weight_pairs;

  void reserve(int64_t head_dim, int64_t padded_dim) {
    auto grow = [](std::vector<float>& buffer, int64_t size) {
      if (static_cast<int64_t>(buffer.size()) < size) buffer.resize(size);
    };
    grow(query, kAttentionTileRows * head_dim);
    grow(accumulators, kAttentionTileRows * padded_dim);
    grow(scores, kAttentionTileRows * kBlockKeys);
    grow(keys, kBlockKeys * head_dim);
    grow(keys_by_dim, head_dim * kBlockKeys);
    grow(values, kBlockKeys * padded_dim);
    grow(row, head_dim);
    auto grow_pairs = [](std::vector<uint32_t>& buffer, int64_t size) {
      if (static_cast<int64_t>(buffer.size()) < size) buffer.resize(size);
    };
    grow_pairs(query_pairs, kAttentionTileRows * head_dim / 2);
    grow_pairs(key_pairs, head_dim / 2 * kBlockKeys);
    grow_pairs(value_pairs, kBlockKeys / 2 * head_dim);
    grow_pairs(weight_pairs, kAttentionTileRows * kBlockKeys / 2);
    grow_pairs(query_by_pair, head_dim / 2 * kQueryColumns);
    if (static_cast<int64_t>(value_levels.size()) < kBlockKeys * head_dim) {
      value_levels.resize(kBlockKeys * head_dim);
      const int64_t blocks = (head_dim + 31) / 32;
      key_scales.resize(blocks * kBlockKeys);
      value_scales.resize(blocks * kBlockKeys);
      scaled_weight_pairs.resize(blocks * kMaxTileRows * kBlockKeys / 2);
    }
  }
};

thread_local TileScratch tile_scratch;

inline bool unit_stride_f32(const StridedInput& input, int64_t head_dim) {
  return input.dtype == DType::f32 && (input.layout.strides[3] == 1 || head_dim == 1);
}

// A quantized cache's GGUF blocks of 32 values: q * d for Q8_0 (an f16 d, 32 int8 q); (q - 8) * d
// for Q4_0 (an f16 d, 16 bytes: elements 0-15 in the low nibbles, 16-31 in the high ones).

// The block's f16 scale d as f32: one instruction where the ISA has F16C.
inline float block_scale(const uint8_t* block) {
  uint16_t bits;
  std::memcpy(&bits, block, sizeof bits);
#if defined(__F16C__)
  return _cvtsh_ss(bits);
#else
  return f16_to_f32(bits);
#endif
}

#if defined(__AVX512F__)
// The block's levels, q for Q8_0 and q - 8 for Q4_0 (integers, exact in f32 and in bf16): values
// 0-15 in halves[0], 16-31 in halves[1]. Times block_scale(block) they are the block's values.
inline void widen_levels(BlockType type, const uint8_t* block, __m512 halves[2]) {
  const uint8_t* quants = block + sizeof(uint16_t);
  if (type == BlockType::q8_0) {
    for (int half = 0; half < 2; ++half) {
      __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quants + 16 * half));
      halves[half] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes));
    }
    return;
  }
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quants));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m128i nibbles[2] = {_mm_and_si128(packed, nibble),
                              _mm_and_si128(_mm_srli_epi16(packed, 4), nibble)};
  for (int half = 0; half < 2; ++half) {
    __m512i q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(nibbles[half]), _mm512_set1_epi32(8));
    halves[half] = _mm512_cvtepi32_ps(q);
  }
}
#endif

// One block widened to f32 in registers, exactly as cpu/quant's dequantize_row gives it: a
// level times d is exact in f32 (8 bits times the 11 of an f16), and so is q * d + (-8 * d).
inline void dequantize_block(BlockType type, const uint8_t* block, float* out) {
#if defined(__AVX512F__)
  __m512 halves[2];
  widen_levels(type, block, halves);
  const __m512 d = _mm512_set1_ps(block_scale(block));
  _mm512_storeu_ps(out, _mm512_mul_ps(halves[0], d));
  _mm512_storeu_ps(out + 16, _mm512_mul_ps(halves[1], d));
#else
  const uint8_t* quants = block + sizeof(uint16_t);
  const float scale = block_scale(block);
#if defined(__AVX2__)
  const __m256 d = _mm256_set1_ps(scale);
  if (type == BlockType::q8_0) {
    for (int group = 0; group < 4; ++group) {
      __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(quants + 8 * group));
      _mm256_storeu_ps(out + 8 * group,
                       _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)), d));
    }
    return;
  }
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quants));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m128i halves[2] = {_mm_and_si128(packed, nibble),
                             _mm_and_si128(_mm_srli_epi16(packed, 4), nibble)};
  const __m256 shift = _mm256_set1_ps(-8.0f * scale);
  for (int half = 0; half < 2; ++half) {
    for (int quarter = 0; quarter < 2; ++quarter) {
      __m128i bytes = quarter == 0 ? halves[half] : _mm_srli_si128(halves[half], 8);
      __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
      _mm256_storeu_ps(out + 16 * half + 8 * quarter, _mm256_fmadd_ps(q, d, shift));
    }
  }
#else
  if (type == BlockType::q8_0) {
    for (int j = 0; j < 32; ++j)
      out[j] = static_cast<float>(static_cast<int8_t>(quants[j])) * scale;
    return;
  }
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>((quants[j] & 0x0f) - 8) * scale;
    out[j + 16] = static_cast<float>((quants[j] >> 4) - 8) * scale;
  }
#endif
#endif
}

// Row `position` of kv head (batch, head) of a block-quantized operand, in place.
inline const uint8_t* block_rows(const StridedInput& input, int64_t batch, int64_t head,
                                 int64_t position) {
  return static_cast<const uint8_t*>(input.base) +
         sizeof(uint32_t) * attention_row_offset(input.layout, batch, head, position);
}

// Rows [first, first + count) of kv head (batch, head) as f32 rows `*row_stride` apart, each
// `width` >= D wide with zeros past D: in place when the operand is unit-stride f32 and no
// padding is needed, otherwise converted into `buffer` (quantized rows block by block).
inline const float* kv_rows(const StridedInput& input, int64_t batch, int64_t head, int64_t first,
                            int64_t count, int64_t head_dim, int64_t width, float* buffer,
                            int64_t* row_stride) {
  const Layout& layout = input.layout;
  *row_stride = width;
  if (input.blocks) {
    const BlockFormat& format = block_format(*input.blocks);
    const uint8_t* row = block_rows(input, batch, head, first);
    for (int64_t j = 0; j < count; ++j, row += sizeof(uint32_t) * layout.strides[2]) {
      float* out = buffer + j * width;
      for (int64_t block = 0; block < head_dim / format.block_elements; ++block) {
        dequantize_block(format.type, row + block * format.block_bytes,
                         out + block * format.block_elements);
      }
      std::fill(out + head_dim, out + width, 0.0f);
    }
    return buffer;
  }
  int64_t start = attention_row_offset(layout, batch, head, first);
  if (unit_stride_f32(input, head_dim) && width == head_dim) {
    *row_stride = layout.strides[2];
    return static_cast<const float*>(input.base) + start;
  }
  for (int64_t j = 0; j < count; ++j) {
    float* row = buffer + j * width;
    load_f32(input.base, input.dtype, start + j * layout.strides[2], layout.strides[3], head_dim,
             row);
    std::fill(row + head_dim, row + width, 0.0f);
  }
  return buffer;
}

// kWidth elements of a K row as f32: f32 as it is, bf16 widened.
inline Vec load_row(const float* source) { return simd::load(source); }
inline Vec load_row(const uint16_t* source) { return simd::load_bf16(source); }
inline float element_f32(float value) { return value; }
inline float element_f32(uint16_t value) { return bf16_to_f32(value); }

// Row `position` of kv head (batch, head) of a bf16 operand, in place.
inline const uint16_t* bf16_rows(const StridedInput& input, int64_t batch, int64_t head,
                                 int64_t position) {
  return static_cast<const uint16_t*>(input.base) +
         attention_row_offset(input.layout, batch, head, position);
}

// Decode reads the cache once, from memory. The next block's K and V lines are prefetched a few
// at a time between pieces of this block's work: a burst of hundreds would wait on the core's
// few outstanding misses and stall the work behind it. Into L1 on Zen 5; into L2 on Intel (model
// 167, micro-attention at 16,384 keys with caches inside that VM's 480 MiB LLC, 2 threads,
// paired: 543 -> 490 us a layer on vector pairs, 360 -> 319 on AMX) and on Zen 4 (bf16 cache,
// 2 threads: 652-753 -> 423-447 us a layer, the other cache types unchanged).
class PrefetchStream {
 public:
  PrefetchStream(const AttentionPlan& plan, int64_t batch, int64_t head, int64_t first,
                 int64_t keys, int64_t lines_per_step)
      : plan_(plan), lines_per_step_(lines_per_step), batch_(batch), head_(head), first_(first),
        keys_(std::max<int64_t>(0, std::min(keys, plan.kv_length - first))) {
    start_operand();
  }

  // Prefetches the next lines_per_step lines, if any are left.
  void step() {
    if (into_l2_) {
      step_with<2>();
    } else {
      step_with<3>();
    }
  }

 private:
  template <int Locality>
  void step_with() {
    for (int64_t line = 0; line < lines_per_step_ && row_ != nullptr; ++line) {
      __builtin_prefetch(row_ + offset_, 0, Locality);
      offset_ += 64;
      if (offset_ < row_bytes_) continue;
      offset_ = 0;
      row_ += row_stride_;
      if (++row_index_ < rows_) continue;
      ++operand_;
      start_operand();
    }
  }

  // Points at the first row of the current operand (K, then V), or at nothing when done; rows
  // that follow each other in memory are one run of bytes.
  void start_operand() {
    row_ = nullptr;
    for (; operand_ < 2; ++operand_) {
      const StridedInput& input = operand_ == 0 ? plan_.key : plan_.value;
      if (input.layout.strides[3] != 1 || keys_ == 0) continue;
      const int64_t element_bytes = dtype_size(input.dtype);
      row_bytes_ = input.blocks
                       ? static_cast<int64_t>(block_row_bytes(*input.blocks, plan_.head_dim))
                       : plan_.head_dim * element_bytes;
      row_stride_ = input.layout.strides[2] * element_bytes;
      row_ = static_cast<const char*>(input.base) +
             attention_row_offset(input.layout, batch_, head_, first_) * element_bytes;
      rows_ = keys_;
      if (row_stride_ == row_bytes_) {
        row_bytes_ *= keys_;
        rows_ = 1;
      }
      row_index_ = 0;
      offset_ = 0;
      return;
    }
  }

  const AttentionPlan& plan_;
  const bool into_l2_ = kIntelCpu || kAmdFamily19h;
  int64_t lines_per_step_;
  int64_t batch_, head_, first_, keys_;
  int operand_ = 0;
  const char* row_ = nullptr;
  int64_t row_bytes_ = 0, row_stride_ = 0, rows_ = 0, row_index_ = 0, offset_ = 0;
};

#if defined(__AVX512F__)
// Transposes the 16 x 16 block in `rows` (clobbered) into `destination` (rows
// `destination_stride` apart).
inline void transpose_registers(__m512 rows[16], float* destination, int64_t destination_stride) {
  __m512 pairs[16];
  // Interleave neighbouring rows, then pairs of rows: rows[4i + c] holds, in 128-bit lane l,
  // element 4l + c of rows 4i..4i+3.
  for (int i = 0; i < 8; ++i) {
    pairs[2 * i] = _mm512_unpacklo_ps(rows[2 * i], rows[2 * i + 1]);
    pairs[2 * i + 1] = _mm512_unpackhi_ps(rows[2 * i], rows[2 * i + 1]);
  }
  auto as_double = [](__m512 value) { return _mm512_castps_pd(value); };
  for (int i = 0; i < 4; ++i) {
    for (int half = 0; half < 2; ++half) {
      __m512d low = as_double(pairs[4 * i + half]);
      __m512d high = as_double(pairs[4 * i + 2 + half]);
      rows[4 * i + 2 * half] = _mm512_castpd_ps(_mm512_unpacklo_pd(low, high));
      rows[4 * i + 2 * half + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(low, high));
    }
  }
  // Gather lane l of the four row groups into column 4l + c.
  for (int c = 0; c < 4; ++c) {
    __m512 first_low = _mm512_shuffle_f32x4(rows[c], rows[4 + c], 0x44);
    __m512 first_high = _mm512_shuffle_f32x4(rows[c], rows[4 + c], 0xEE);
    __m512 second_low = _mm512_shuffle_f32x4(rows[8 + c], rows[12 + c], 0x44);
    __m512 second_high = _mm512_shuffle_f32x4(rows[8 + c], rows[12 + c], 0xEE);
    _mm512_storeu_ps(destination + c * destination_stride,
                     _mm512_shuffle_f32x4(first_low, second_low, 0x88));
    _mm512_storeu_ps(destination + (4 + c) * destination_stride,
                     _mm512_shuffle_f32x4(first_low, second_low, 0xDD));
    _mm512_storeu_ps(destination + (8 + c) * destination_stride,
                     _mm512_shuffle_f32x4(first_high, second_high, 0x88));
    _mm512_storeu_ps(destination + (12 + c) * destination_stride,
                     _mm512_shuffle_f32x4(first_high, second_high, 0xDD));
  }
}
#endif

// Transposes the kWidth x kWidth block at `source` (rows `source_stride` apart; f32, or bf16
// widened on the way) into `destination` (f32 rows `destination_stride` apart).
template <typename Element>
void transpose_block(const Element* source, int64_t source_stride, float* destination,
                     int64_t destination_stride) {
#if defined(__AVX512F__)
  __m512 rows[16];
  for (int i = 0; i < 16; ++i) rows[i] = load_row(source + i * source_stride);
  transpose_registers(rows, destination, destination_stride);
#elif defined(__AVX2__)
  __m256 rows[8];
  __m256 pairs[8];
  for (int i = 0; i < 8; ++i) rows[i] = load_row(source + i * source_stride);
  for (int i = 0; i < 4; ++i) {
    pairs[2 * i] = _mm256_unpacklo_ps(rows[2 * i], rows[2 * i + 1]);
    pairs[2 * i + 1] = _mm256_unpackhi_ps(rows[2 * i], rows[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    for (int half = 0; half < 2; ++half) {
      __m256d low = _mm256_castps_pd(pairs[4 * i + half]);
      __m256d high = _mm256_castps_pd(pairs[4 * i + 2 + half]);
      rows[4 * i + 2 * half] = _mm256_castpd_ps(_mm256_unpacklo_pd(low, high));
      rows[4 * i + 2 * half + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(low, high));
    }
  }
  for (int c = 0; c < 4; ++c) {
    _mm256_storeu_ps(destination + c * destination_stride,
                     _mm256_permute2f128_ps(rows[c], rows[4 + c], 0x20));
    _mm256_storeu_ps(destination + (4 + c) * destination_stride,
                     _mm256_permute2f128_ps(rows[c], rows[4 + c], 0x31));
  }
#elif defined(__SSE2__)
  __m128 row0 = load_row(source);
  __m128 row1 = load_row(source + source_stride);
  __m128 row2 = load_row(source + 2 * source_stride);
  __m128 row3 = load_row(source + 3 * source_stride);
  _MM_TRANSPOSE4_PS(row0, row1, row2, row3);
  _mm_storeu_ps(destination, row0);
  _mm_storeu_ps(destination + destination_stride, row1);
  _mm_storeu_ps(destination + 2 * destination_stride, row2);
  _mm_storeu_ps(destination + 3 * destination_stride, row3);
#else
  (void)source_stride;
  (void)destination_stride;
  *destination = load_row(source);
#endif
}

// keys_by_dim[d * kBlockKeys + j] = keys[j * key_stride + d] for j < count, and 0 for
// count <= j < round_up(count, kWidth); `prefetch` takes a step per group of kWidth keys.
template <typename Element>
void transpose_keys(const Element* keys, int64_t key_stride, int64_t count, int64_t head_dim,
                    float* keys_by_dim, PrefetchStream& prefetch) {
  constexpr int64_t width = simd::kWidth;
  const int64_t full_keys = count / width * width;
  const int64_t full_dims = head_dim / width * width;
  const int64_t columns = round_up(count, width);
  for (int64_t j = 0; j < full_keys; j += width) {
    prefetch.step();
    for (int64_t d = 0; d < full_dims; d += width) {
      transpose_block(keys + j * key_stride + d, key_stride, keys_by_dim + d * kBlockKeys + j,
                      kBlockKeys);
    }
  }
  if (full_keys < count) {
    // The last, partial group of keys goes through a zero-padded block, with whole-vector
    // stores only (narrow stores read back by wide loads would stall store forwarding).
    float padded[width * width];
    const Vec zero = simd::broadcast(0.0f);
    for (int64_t d = 0; d < full_dims; d += width) {
      for (int64_t r = 0; r < width; ++r) {
        int64_t j = full_keys + r;
        simd::store(padded + r * width, j < count ? load_row(keys + j * key_stride + d) : zero);
      }
      transpose_block(padded, width, keys_by_dim + d * kBlockKeys + full_keys, kBlockKeys);
    }
  }
  for (int64_t d = full_dims; d < head_dim; ++d) {
    for (int64_t j = 0; j < columns; ++j) {
      keys_by_dim[d * kBlockKeys + j] = j < count ? element_f32(keys[j * key_stride + d]) : 0.0f;
    }
  }
}

// How the register tile multiplies: F32Product takes f32 left values and f32 right rows (one k
// per step, FMA); PairProduct takes 32-bit words of two bf16 values on both sides (two k per
// step, vdpbf16ps). Right rows are read vector by vector with `load`, except where kRowPairs
// says that a step takes two rows (ValuePairProduct's load_columns). kColumnScales: the sums
// are multiplied column by column by the tile's column scales before they are stored.
struct F32Product {
  using Left = float;
  using Right = float;
  using Factor = Vec;
  using Column = Vec;
  static constexpr bool kRowPairs = false;
  static constexpr bool kColumnScales = false;
  static Factor broadcast(Left value) { return simd::broadcast(value); }
  static Column load(const Right* source) { return simd::load(source); }
  static Vec multiply_add(Factor factor, Column column, Vec sum) {
    return simd::multiply_add(factor, column, sum);
  }
};
// F32Product with bf16 right rows, widened as they are loaded (V read in place from a bf16 cache).
struct Bf16RightProduct : F32Product {
  using Right = uint16_t;
  static Column load(const Right* source) { return simd::load_bf16(source); }
};
#if defined(__AVX512BF16__)
struct PairProduct {
  using Left = uint32_t;
  using Right = uint32_t;
  using Factor = __m512bh;
  using Column = __m512bh;
  static constexpr bool kRowPairs = false;
  static constexpr bool kColumnScales = false;
  static Factor broadcast(Left value) {
    return (__m512bh)_mm512_set1_epi32(static_cast<int32_t>(value));
  }
  static Column load(const Right* source) { return (__m512bh)_mm512_loadu_si512(source); }
  static Vec multiply_add(Factor factor, Column column, Vec sum) {
    return _mm512_dpbf16_ps(sum, factor, column);
  }
};
// PairProduct over K levels (a quantized cache's, exact in bf16) of one block of 32 dims: each
// key's sum times its scale.
struct ScaledPairProduct : PairProduct {
  static constexpr bool kColumnScales = true;
};
// PairProduct whose right words pair two bf16 V rows read in place: step k takes rows 2k and
// 2k + 1 (`stride` / 2 apart) and interleaves them in registers, 128-bit lane by lane. So the
// sums of each 32 dims come in the order PairOperands::finish puts back.
struct ValuePairProduct : PairProduct {
  static constexpr bool kRowPairs = true;
  using Right = uint16_t;
  template <int kVectors>
  static void load_columns(const Right* source, int64_t stride, Column* columns) {
    if constexpr (kVectors % 2 != 0) {
      __builtin_trap();  // The pair path's D is a multiple of 32: whole pairs of vectors.
    }
    for (int v = 0; v + 1 < kVectors; v += 2) {
      const __m512i first = _mm512_loadu_si512(source + v * simd::kWidth);
      const __m512i second = _mm512_loadu_si512(source + stride / 2 + v * simd::kWidth);
      columns[v] = (Column)_mm512_unpacklo_epi16(first, second);
      columns[v + 1] = (Column)_mm512_unpackhi_epi16(first, second);
    }
  }
};
#endif

// The register tile: out[r][0, kVectors * kWidth) = (accumulate ? out[r] : 0) + the sum over
// k < depth, in order, of left[r * left_stride + k] * right[k * right_stride + (0, kVectors *
// kWidth)], for r < kRows (k counts words for PairProduct, each a product of two pairs); with
// kColumnScales the sum times column_scales[0, kVectors * kWidth), column by column.
template <typename Product, int kRows, int kVectors>
void multiply_tile(const typename Product::Left* left, int64_t left_stride,
                   const typename Product::Right* right, int64_t right_stride, int64_t depth,
                   float* out, int64_t out_stride, bool accumulate, const float* column_scales) {
  // Loops unrolled from the start, so that the sums live in registers from load to store (left
  // to later passes, GCC kept them on the stack around the k loop: ~100 moves a call).
  Vec sums[kRows][kVectors];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      sums[r][v] = accumulate && !Product::kColumnScales
                       ? simd::load(out + r * out_stride + v * simd::kWidth)
                       : simd::broadcast(0.0f);
    }
  }
  for (int64_t k = 0; k < depth; ++k) {
    typename Product::Column columns[kVectors];
    if constexpr (Product::kRowPairs) {
      Product::template load_columns<kVectors>(right + k * right_stride, right_stride, columns);
    } else {
      for (int v = 0; v < kVectors; ++v) {
        columns[v] = Product::load(right + k * right_stride + v * simd::kWidth);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const typename Product::Factor factor = Product::broadcast(left[r * left_stride + k]);
      for (int v = 0; v < kVectors; ++v) {
        sums[r][v] = Product::multiply_add(factor, columns[v], sums[r][v]);
      }
    }
  }
  if constexpr (Product::kColumnScales) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      const Vec scale = simd::load(column_scales + v * simd::kWidth);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        float* destination = out + r * out_stride + v * simd::kWidth;
        sums[r][v] = accumulate ? simd::multiply_add(sums[r][v], scale, simd::load(destination))
                                : simd::multiply(sums[r][v], scale);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      simd::store(out + r * out_stride + v * simd::kWidth, sums[r][v]);
    }
  }
}

// Every register tile shape of a product: Tiles<Product>::table[vectors - 1][rows - 1].
template <typename Product>
struct Tiles {
  using Function = void (*)(const typename Product::Left*, int64_t,
                            const typename Product::Right*, int64_t, int64_t, float*, int64_t,
                            bool, const float*);
  template <int kVectors, int... kRowsBelow>
  static constexpr std::array<Function, kMaxTileRows> of_width(
      std::integer_sequence<int, kRowsBelow...>) {
    return {&multiply_tile<Product, kRowsBelow + 1, kVectors>...};
  }
  template <int... kVectorsBelow>
  static constexpr auto make(std::integer_sequence<int, kVectorsBelow...>) {
    return std::array{
        of_width<kVectorsBelow + 1>(std::make_integer_sequence<int, kMaxTileRows>())...};
  }
  static constexpr auto table = make(std::make_integer_sequence<int, kColumnVectors>());
};

// out[rows, columns] = (accumulate ? out : 0) + left[rows, depth] · right[depth, columns], for
// 1 <= rows <= kMaxTileRows and `columns` a multiple of kWidth (the product's columns times
// column_scales[columns] where it has kColumnScales); `prefetch` takes a step per register-tile
// call.
template <typename Product>
void multiply(const typename Product::Left* left, int64_t left_stride,
              const typename Product::Right* right, int64_t right_stride, int64_t depth,
              float* out, int64_t out_stride, int64_t rows, int64_t columns, bool accumulate,
              PrefetchStream& prefetch, const float* column_scales = nullptr) {
  for (int64_t column = 0; column < columns; column += kColumns) {
    prefetch.step();
    int64_t vectors = std::min<int64_t>(kColumnVectors, (columns - column) / simd::kWidth);
    Tiles<Product>::table[vectors - 1][rows - 1](
        left, left_stride, right + column, right_stride, depth, out + column, out_stride,
        accumulate, column_scales ? column_scales + column : nullptr);
  }
}

inline void scale_in_place(float* values, float factor, int64_t count) {
  const Vec scale = simd::broadcast(factor);
  simd::transform(values, values, count, [&](Vec x) { return simd::multiply(x, scale); });
}

// A softmax weight, e^(score - maximum) for score <= maximum.
#if defined(__AVX512F__)
// As 2^x for x = (score - maximum) log2 e: 2^(x - floor x) by a degree-5 polynomial
// fitted on [0, 1) (relative error under 2e-7; p(0) = 1 exactly), reduce_ps giving x - floor x
// in one instruction, times 2^floor(x) by scalef. Where x < -120 (a score of -inf too) it gives
// 2^-120 (subnormal scalef results cost a microcode assist per lane): softmax_block zeroes
// masked keys itself. NaN stays NaN.
inline Vec softmax_weight(Vec score, Vec maximum) {
  const Vec log2e = _mm512_set1_ps(1.44269504088896341f);
  const Vec x = _mm512_max_ps(_mm512_set1_ps(-120.0f),
                              _mm512_mul_ps(_mm512_sub_ps(score, maximum), log2e));
  const Vec r = _mm512_reduce_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  Vec p = _mm512_set1_ps(1.867130515165627e-3f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(9.017028845846653e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.579991266131401e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.4016444385051727e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(6.931512951850891e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, x);
}
#else
// A score of -inf gives 0.
inline Vec softmax_weight(Vec score, Vec maximum) {
  return simd::exp(simd::subtract(score, maximum));
}
#endif

// `values` in lanes [0, count) and `fill` in the others; count may be anything.
inline Vec keep_first(Vec values, int64_t count, Vec fill) {
  int32_t kept = static_cast<int32_t>(std::clamp<int64_t>(count, 0, simd::kWidth));
#if defined(__AVX512F__)
  return _mm512_mask_blend_ps(static_cast<__mmask16>((1u << kept) - 1), fill, values);
#elif defined(__AVX2__)
  __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 mask = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(kept), lanes));
  return _mm256_blendv_ps(fill, values, mask);
#elif defined(__SSE2__)
  __m128 mask = _mm_castsi128_ps(_mm_cmpgt_epi32(_mm_set1_epi32(kept), _mm_setr_epi32(0, 1, 2, 3)));
  return _mm_or_ps(_mm_and_ps(mask, values), _mm_andnot_ps(mask, fill));
#else
  return kept > 0 ? values : fill;
#endif
}

// One row's step of the online softmax over a block: turns scores[0, columns) into weights
// exp(score - running max), with keys before `hidden` (outside a sliding window) and from
// `visible` on weighted 0, and updates the running max and the running sum, kept per lane in
// `sum_lanes` (kWidth floats: no reduction across lanes per block). Returns the factor by which
// the row's earlier accumulators must be scaled.
inline float softmax_block(float* scores, int64_t hidden, int64_t visible, int64_t columns,
                           float* maximum, float* sum_lanes) {
  const Vec zero = simd::broadcast(0.0f);
  if (hidden >= visible) {
    for (int64_t j = 0; j < columns; j += simd::kWidth) simd::store(scores + j, zero);
    return 1.0f;
  }
  // Masked in registers: narrow stores followed by wide loads would stall store forwarding.
  const Vec lowest = simd::broadcast(-std::numeric_limits<float>::infinity());
  auto visible_scores = [&](int64_t j) {
    Vec values = simd::load(scores + j);
    if (j + simd::kWidth > visible) values = keep_first(values, visible - j, lowest);
    return j < hidden ? keep_first(lowest, hidden - j, values) : values;
  };
  Vec largest = lowest;
  for (int64_t j = 0; j < columns; j += simd::kWidth) {
    largest = simd::maximum(visible_scores(j), largest);
  }
  float new_max = std::max(*maximum, simd::max_lane(largest));
  // Unchanged max: no rescale (exactly 1). The row's first block: nothing to rescale (0).
  float correction = 1.0f;
  if (*maximum == -std::numeric_limits<float>::infinity()) {
    correction = 0.0f;
  } else if (new_max != *maximum) {
    float factors[simd::kWidth];
    simd::store(factors, softmax_weight(simd::broadcast(*maximum), simd::broadcast(new_max)));
    correction = factors[0];
  }
  const Vec shift = simd::broadcast(new_max);
  Vec total = zero;
  for (int64_t j = 0; j < columns; j += simd::kWidth) {
    Vec weight = softmax_weight(simd::load(scores + j), shift);
    // Masked keys weigh exactly 0.
    if (j + simd::kWidth > visible) weight = keep_first(weight, visible - j, zero);
    if (j < hidden) weight = keep_first(zero, hidden - j, weight);
    simd::store(scores + j, weight);
    total = simd::add(total, weight);
  }
  simd::store(sum_lanes, simd::multiply_add(simd::load(sum_lanes), simd::broadcast(correction),
                                            total));
  *maximum = new_max;
  return correction;
}

// Operands whose products leave the accumulators' dims in order: finish has nothing to do.
struct AccumulatorsInOrder {
  void finish(float* /*accumulators*/, int64_t /*rows*/) {}
};

// How many query rows the register-tile products take a pass: a GQA group of up to
// kMaxTileRows in one, longer runs kRunTileRows at a time.
struct RegisterTileGroups : AccumulatorsInOrder {
  static int64_t group_rows(int64_t rows) {
    return rows <= kMaxTileRows ? kMaxTileRows : kRunTileRows;
  }
};

// The operands of the f32 path: K transposed into [D, block keys], V rows read in place when
// they are unit-stride f32 or bf16 (converted into scratch otherwise), FMA products.
class F32Operands : public RegisterTileGroups {
 public:
  F32Operands(const AttentionPlan& plan, TileScratch& scratch, int64_t rows)
      : plan_(plan), scratch_(scratch) {
    (void)rows;
  }

  void load_block(int64_t batch, int64_t kv_head, int64_t block, int64_t block_keys) {
    const int64_t head_dim = plan_.head_dim;
    // With AVX2, 16 key groups transposed and 8 register-tile calls a product (a GQA group of
    // 7 rows, 64 dims): 32 steps cover the 512 lines of 128 keys of a bf16 cache.
    prefetch_.emplace(plan_, batch, kv_head, block + kBlockKeys, kBlockKeys, 16);
    if (unit_stride_bf16(plan_.key)) {
      transpose_keys(bf16_rows(plan_.key, batch, kv_head, block), plan_.key.layout.strides[2],
                     block_keys, head_dim, scratch_.keys_by_dim.data(), *prefetch_);
    } else {
      int64_t key_stride = 0;
      const float* keys = kv_rows(plan_.key, batch, kv_head, block, block_keys, head_dim,
                                  head_dim, scratch_.keys.data(), &key_stride);
      transpose_keys(keys, key_stride, block_keys, head_dim, scratch_.keys_by_dim.data(),
                     *prefetch_);
    }
    if (bf16_values_) {
      bf16_values_rows_ = bf16_rows(plan_.value, batch, kv_head, block);
      value_stride_ = plan_.value.layout.strides[2];
    } else {
      values_ = kv_rows(plan_.value, batch, kv_head, block, block_keys, head_dim,
                        round_up(head_dim, simd::kWidth), scratch_.values.data(), &value_stride_);
    }
  }

  // scores[first, first + count) = Q · K^T over the block's `columns` keys.
  void score(int64_t first, int64_t count, int64_t columns) {
    const int64_t head_dim = plan_.head_dim;
    multiply<F32Product>(scratch_.query.data() + first * head_dim, head_dim,
                         scratch_.keys_by_dim.data(), kBlockKeys, head_dim,
                         scratch_.scores.data() + first * kBlockKeys, kBlockKeys, count, columns,
                         false, *prefetch_);
  }

  // accumulators[first, first + count) += weights · V over the block's keys.
  void accumulate(int64_t first, int64_t count, int64_t block_keys, int64_t columns) {
    (void)columns;
    const int64_t padded_dim = round_up(plan_.head_dim, simd::kWidth);
    const float* weights = scratch_.scores.data() + first * kBlockKeys;
    float* sums = scratch_.accumulators.data() + first * padded_dim;
    if (bf16_values_) {
      multiply<Bf16RightProduct>(weights, kBlockKeys, bf16_values_rows_, value_stride_,
                                 block_keys, sums, padded_dim, count, padded_dim, true,
                                 *prefetch_);
    } else {
      multiply<F32Product>(weights, kBlockKeys, values_, value_stride_, block_keys, sums,
                           padded_dim, count, padded_dim, true, *prefetch_);
    }
  }

 private:
  static bool unit_stride_bf16(const StridedInput& input) {
    return input.dtype == DType::bf16 && input.layout.strides[3] == 1;
  }

  const AttentionPlan& plan_;
  TileScratch& scratch_;
  // bf16 V rows are read in place (widened by the product) when a row is whole vectors.
  const bool bf16_values_ =
      unit_stride_bf16(plan_.value) && plan_.head_dim % simd::kWidth == 0;
  std::optional<PrefetchStream> prefetch_;  // The next block's K and V lines.
  const float* values_ = nullptr;
  const uint16_t* bf16_values_rows_ = nullptr;
  int64_t value_stride_ = 0;
};

#if defined(__AVX512BF16__)
// The pair path takes bf16 K and V with a unit-stride D that is a multiple of 32 and rows that
// start at even elements, so that every two dims of a row form one 32-bit word; or quantized K
// and V (whose D is a multiple of 32), widened block by block to bf16 levels.
bool pair_path_applies(const AttentionPlan& plan) {
  auto fits = [](const StridedInput& input) {
    const Layout& layout = input.layout;
    return input.blocks ||
           (input.dtype == DType::bf16 && layout.strides[3] == 1 && layout.offset % 2 == 0 &&
            layout.strides[0] % 2 == 0 && layout.strides[1] % 2 == 0 &&
            layout.strides[2] % 2 == 0);
  };
  return plan.head_dim % 32 == 0 && fits(plan.key) && fits(plan.value);
}

// A quantized operand's rows [first, first + count) of kv head (batch, head) split into levels
// and scales, both exact: the value cpu/quant's dequantize_row gives at row j, dim d is its
// level times scales[(d / 32) * kBlockKeys + j]. Scales past `count`, up to the next 16 keys,
// are 0.
inline void block_scales(const StridedInput& input, int64_t batch, int64_t head, int64_t first,
                         int64_t count, int64_t head_dim, float* scales) {
  const BlockFormat& format = block_format(*input.blocks);
  const int64_t row_bytes = sizeof(uint32_t) * input.layout.strides[2];
  const uint8_t* rows = block_rows(input, batch, head, first);
  for (int64_t block = 0; block < head_dim / 32; ++block) {
    float* out = scales + block * kBlockKeys;
    const uint8_t* source = rows + block * format.block_bytes;
    for (int64_t j = 0; j < count; ++j) out[j] = block_scale(source + j * row_bytes);
    std::fill(out + count, out + round_up(count, 16), 0.0f);
  }
}

// The same rows' levels as bf16 rows of D in `levels`; `prefetch` takes a step per 16 rows.
inline void widen_levels_bf16(const StridedInput& input, int64_t batch, int64_t head,
                              int64_t first, int64_t count, int64_t head_dim, uint16_t* levels,
                              PrefetchStream& prefetch) {
  const BlockFormat& format = block_format(*input.blocks);
  const int64_t row_bytes = sizeof(uint32_t) * input.layout.strides[2];
  const uint8_t* row = block_rows(input, batch, head, first);
  for (int64_t j = 0; j < count; ++j, row += row_bytes, levels += head_dim) {
    if (j % 16 == 0) prefetch.step();
    for (int64_t block = 0; block < head_dim / 32; ++block) {
      __m512 halves[2];
      widen_levels(format.type, row + block * format.block_bytes, halves);
      _mm512_storeu_si512(levels + 32 * block,
                          (__m512i)_mm512_cvtne2ps_pbh(halves[1], halves[0]));
    }
  }
}

// f32 -> bf16 (nearest even) for a count that is a multiple of 16; with `scales`, each value
// times its scale first.
inline void to_bf16(const float* source, uint32_t* destination, int64_t count,
                    const float* scales = nullptr) {
  auto* out = reinterpret_cast<__m256i*>(destination);
  for (int64_t i = 0; i < count; i += 16) {
    __m512 values = _mm512_loadu_ps(source + i);
    if (scales) values = _mm512_mul_ps(values, _mm512_loadu_ps(scales + i));
    _mm256_storeu_si256(out + i / 16, (__m256i)_mm512_cvtneps_pbh(values));
  }
}

// The tile's `rows` pre-scaled Q rows rounded to bf16 pairs: scratch.query_pairs, [rows, D / 2].
inline const uint32_t* round_query_pairs(TileScratch& scratch, int64_t rows, int64_t head_dim) {
  for (int64_t r = 0; r < rows; ++r) {
    to_bf16(scratch.query.data() + r * head_dim, scratch.query_pairs.data() + r * head_dim / 2,
            head_dim);
  }
  return scratch.query_pairs.data();
}

// destination[p * D + d] = V[2p][d] in the low half, V[2p + 1][d] in the high half, for pairs
// [first_pair, end_pair) of the block (0 past its keys); `prefetch` takes a step per 8 pairs.
inline void pack_value_pairs(const AttentionPlan& plan, int64_t batch, int64_t kv_head,
                             int64_t block, int64_t block_keys, int64_t first_pair,
                             int64_t end_pair, uint32_t* destination, PrefetchStream& prefetch) {
  const int64_t head_dim = plan.head_dim;
  const uint16_t* values = bf16_rows(plan.value, batch, kv_head, block);
  const int64_t value_stride = plan.value.layout.strides[2];
  // Lane 2i takes dim i of the first row, lane 2i + 1 dim i of the second (index + 32).
  alignas(64) static constexpr auto kIndices = [] {
    std::array<std::array<uint16_t, 32>, 2> indices{};
    for (int half = 0; half < 2; ++half) {
      for (int i = 0; i < 16; ++i) {
        indices[half][2 * i] = static_cast<uint16_t>(16 * half + i);
        indices[half][2 * i + 1] = static_cast<uint16_t>(32 + 16 * half + i);
      }
    }
    return indices;
  }();
  const __m512i low = _mm512_load_si512(kIndices[0].data());
  const __m512i high = _mm512_load_si512(kIndices[1].data());
  for (int64_t pair = first_pair; pair < end_pair; ++pair) {
    if (pair % 8 == 0) prefetch.step();
    const uint16_t* first = values + 2 * pair * value_stride;
    const bool has_first = 2 * pair < block_keys;
    const bool has_second = 2 * pair + 1 < block_keys;
    for (int64_t d = 0; d < head_dim; d += 32) {
      __m512i a = has_first ? _mm512_loadu_si512(first + d) : _mm512_setzero_si512();
      __m512i b = has_second ? _mm512_loadu_si512(first + value_stride + d)
                             : _mm512_setzero_si512();
      uint32_t* out = destination + pair * head_dim + d;
      _mm512_storeu_si512(out, _mm512_permutex2var_epi16(a, low, b));
      _mm512_storeu_si512(out + 16, _mm512_permutex2var_epi16(a, high, b));
    }
  }
}

// The operands of the pair path: Q, K, V and the softmax weights as bf16 pairs, vdpbf16ps
// products. K goes to [D / 2, block keys] words (16 x 16 word transposes: the pair of dims stays
// together); V rows j and j + 1 are interleaved into [block keys / 2, D] words.
class PairOperands : public RegisterTileGroups {
 public:
  PairOperands(const AttentionPlan& plan, TileScratch& scratch, int64_t rows)
      : plan_(plan), scratch_(scratch), words_(plan.head_dim / 2) {
    round_query_pairs(scratch_, rows, plan.head_dim);
  }

  void load_block(int64_t batch, int64_t kv_head, int64_t block, int64_t block_keys) {
    // bf16: 8 groups of 16 keys and 3 register-tile calls, 11 steps of 48 lines for the 512
    // lines of the next 128 keys. Quantized (Q8_0, D 64): 8 groups of 16 keys, 8 of 16 V rows
    // and 6 register-tile calls, 22 steps of 16 lines for 272.
    const bool quantized = plan_.key.blocks || plan_.value.blocks;
    prefetch_.emplace(plan_, batch, kv_head, block + kBlockKeys, kBlockKeys, quantized ? 16 : 48);
    const int64_t head_dim = plan_.head_dim;
    if (plan_.key.blocks) {
      block_scales(plan_.key, batch, kv_head, block, block_keys, head_dim,
                   scratch_.key_scales.data());
      pack_key_levels(batch, kv_head, block, block_keys);
    } else {
      pack_keys(bf16_rows(plan_.key, batch, kv_head, block), plan_.key.layout.strides[2],
                block_keys);
    }
    if (plan_.value.blocks) {
      block_scales(plan_.value, batch, kv_head, block, block_keys, head_dim,
                   scratch_.value_scales.data());
      widen_levels_bf16(plan_.value, batch, kv_head, block, block_keys, head_dim,
                        scratch_.value_levels.data(), *prefetch_);
      values_ = scratch_.value_levels.data();
      value_stride_ = head_dim;
    } else {
      values_ = bf16_rows(plan_.value, batch, kv_head, block);
      value_stride_ = plan_.value.layout.strides[2];
    }
    if (block_keys % 2 != 0) {
      // An odd last key pairs with a zero row, in value_pairs' scratch: its partner's weight
      // is 0, but whatever follows the key in memory might be NaN.
      auto* tail = reinterpret_cast<uint16_t*>(scratch_.value_pairs.data());
      const uint16_t* last = values_ + (block_keys - 1) * value_stride_;
      std::copy(last, last + plan_.head_dim, tail);
      std::fill(tail + plan_.head_dim, tail + 2 * plan_.head_dim, uint16_t{0});
    }
  }

  // Puts the accumulators' dims back in order (ValuePairProduct permutes each 32 of them).
  void finish(float* accumulators, int64_t rows) {
    alignas(64) static constexpr int32_t kFirst[16] = {0, 1, 2, 3, 16, 17, 18, 19,
                                                       4, 5, 6, 7, 20, 21, 22, 23};
    alignas(64) static constexpr int32_t kSecond[16] = {8,  9,  10, 11, 24, 25, 26, 27,
                                                        12, 13, 14, 15, 28, 29, 30, 31};
    const __m512i first = _mm512_load_si512(kFirst);
    const __m512i second = _mm512_load_si512(kSecond);
    for (int64_t i = 0; i < rows * plan_.head_dim; i += 32) {
      const __m512 low = _mm512_loadu_ps(accumulators + i);
      const __m512 high = _mm512_loadu_ps(accumulators + i + 16);
      _mm512_storeu_ps(accumulators + i, _mm512_permutex2var_ps(low, first, high));
      _mm512_storeu_ps(accumulators + i + 16, _mm512_permutex2var_ps(low, second, high));
    }
  }

  void score(int64_t first, int64_t count, int64_t columns) {
    const uint32_t* query = scratch_.query_pairs.data() + first * words_;
    float* scores = scratch_.scores.data() + first * kBlockKeys;
    if (!plan_.key.blocks) {
      multiply<PairProduct>(query, words_, scratch_.key_pairs.data(), kBlockKeys, words_, scores,
                            kBlockKeys, count, columns, false, *prefetch_);
      return;
    }
    // Quantized K: block by block of 32 dims (16 words), each key's sum times its scale.
    for (int64_t block = 0; block < words_ / 16; ++block) {
      multiply<ScaledPairProduct>(query + 16 * block, words_,
                                  scratch_.key_pairs.data() + 16 * block * kBlockKeys, kBlockKeys,
                                  16, scores, kBlockKeys, count, columns, block > 0, *prefetch_,
                                  scratch_.key_scales.data() + block * kBlockKeys);
    }
  }

  void accumulate(int64_t first, int64_t count, int64_t block_keys, int64_t columns) {
    const int64_t head_dim = plan_.head_dim;
    float* sums = scratch_.accumulators.data() + first * head_dim;
    if (!plan_.value.blocks) {
      uint32_t* weights = scratch_.weight_pairs.data() + first * kWeightWords;
      for (int64_t r = 0; r < count; ++r) {
        to_bf16(scratch_.scores.data() + (first + r) * kBlockKeys, weights + r * kWeightWords,
                columns);
      }
      accumulate_dims(weights, sums, count, block_keys, 0, head_dim);
      return;
    }
    // Quantized V: block by block of 32 dims, each weight times its key's scale there.
    const float* scores = scratch_.scores.data() + first * kBlockKeys;
    for (int64_t block = 0; block < head_dim / 32; ++block) {
      uint32_t* weights =
          scratch_.scaled_weight_pairs.data() + block * kMaxTileRows * kWeightWords;
      const float* scales = scratch_.value_scales.data() + block * kBlockKeys;
      for (int64_t r = 0; r < count; ++r) {
        to_bf16(scores + r * kBlockKeys, weights + r * kWeightWords, columns, scales);
      }
      accumulate_dims(weights, sums, count, block_keys, 32 * block, 32);
    }
  }

 private:
  static constexpr int64_t kWeightWords = kBlockKeys / 2;

  // sums[count, dims [first_dim, first_dim + dims)] += weights · V there, for `weights` the
  // rows' bf16 pairs (kWeightWords apart; past the block's keys 0, so an odd last key pairs with
  // a zero weight).
  void accumulate_dims(const uint32_t* weights, float* sums, int64_t count, int64_t block_keys,
                       int64_t first_dim, int64_t dims) {
    const int64_t head_dim = plan_.head_dim;
    const int64_t pairs = block_keys / 2;
    multiply<ValuePairProduct>(weights, kWeightWords, values_ + first_dim, 2 * value_stride_,
                               pairs, sums + first_dim, head_dim, count, dims, true, *prefetch_);
    if (block_keys % 2 != 0) {
      const auto* tail = reinterpret_cast<const uint16_t*>(scratch_.value_pairs.data());
      multiply<ValuePairProduct>(weights + pairs, kWeightWords, tail + first_dim, 2 * head_dim, 1,
                                 sums + first_dim, head_dim, count, dims, true, *prefetch_);
    }
  }

  // Quantized K: key_pairs as pack_keys leaves them, of the keys' levels (widen_levels_bf16's);
  // each 16 keys' levels go from the blocks to the transpose in registers.
  void pack_key_levels(int64_t batch, int64_t kv_head, int64_t block, int64_t block_keys) {
    const BlockFormat& format = block_format(*plan_.key.blocks);
    const int64_t row_bytes = sizeof(uint32_t) * plan_.key.layout.strides[2];
    const uint8_t* rows = block_rows(plan_.key, batch, kv_head, block);
    auto* destination = reinterpret_cast<float*>(scratch_.key_pairs.data());
    for (int64_t j = 0; j < block_keys; j += 16) {
      prefetch_->step();
      const int64_t count = std::min<int64_t>(16, block_keys - j);
      for (int64_t b = 0; b < words_ / 16; ++b) {
        __m512 levels[16];
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) {
          const uint8_t* source = rows + (j + r) * row_bytes + b * format.block_bytes;
          __m512 halves[2];
          if (r < count) widen_levels(format.type, source, halves);
          levels[r] = r < count ? (__m512)_mm512_cvtne2ps_pbh(halves[1], halves[0])
                                : _mm512_setzero_ps();
        }
        transpose_registers(levels, destination + 16 * b * kBlockKeys + j, kBlockKeys);
      }
    }
  }

  // key_pairs[w * kBlockKeys + j] = word w of key j (bf16 rows `stride` apart), zero for keys
  // past block_keys up to the next 16. The words move through the f32 transpose as bits.
  void pack_keys(const uint16_t* rows, int64_t stride, int64_t block_keys) {
    const auto* keys = reinterpret_cast<const float*>(rows);
    const int64_t key_stride = stride / 2;
    auto* destination = reinterpret_cast<float*>(scratch_.key_pairs.data());
    float* padded = scratch_.keys.data();  // [16, words]
    for (int64_t j = 0; j < block_keys; j += 16) {
      prefetch_->step();
      const float* source = keys + j * key_stride;
      int64_t source_stride = key_stride;
      if (j + 16 > block_keys) {
        for (int64_t r = 0; r < 16; ++r) {
          if (j + r < block_keys) {
            std::copy(source + r * key_stride, source + r * key_stride + words_,
                      padded + r * words_);
          } else {
            std::fill(padded + r * words_, padded + (r + 1) * words_, 0.0f);
          }
        }
        source = padded;
        source_stride = words_;
      }
      for (int64_t w = 0; w < words_; w += 16) {
        transpose_block(source + w, source_stride, destination + w * kBlockKeys + j, kBlockKeys);
      }
    }
  }

  const AttentionPlan& plan_;
  TileScratch& scratch_;
  int64_t words_;
  std::optional<PrefetchStream> prefetch_;  // The next block's K and V lines.
  const uint16_t* values_ = nullptr;  // The block's first V row: in place, or widened to bf16.
  int64_t value_stride_ = 0;
};

#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
// The pair path on AMX tiles (a CPU with AMX-BF16 and FORNACE_AMX on): the same bf16 operands
// and f32 sums, the products as tile dot products, up to 16 query rows a pass.
//   - Scores go transposed: tile A takes 16 K rows (32 dims each) straight from the cache, tile B
//     Q's words transposed ([dim pairs, rows]), and the 16 keys x rows f32 tile is transposed
//     into `scores` through the 16 x 16 word transpose: no K transpose, no per-head FMA chains.
//   - weights · V: tile A the rows' bf16 weights (32 keys), tile B 16 V rows interleaved by pairs
//     (pack_value_pairs), tile C 16 dims of the rows' accumulators, loaded and stored in place.
// Tiles: 0 scores^T, 1 keys, 2 Q words, 3 and 6 accumulators, 4 weights, 5 and 7 value pairs.
class AmxOperands : public AccumulatorsInOrder {
 public:
  static int64_t group_rows(int64_t rows) {
    (void)rows;
    return 16;
  }

  AmxOperands(const AttentionPlan& plan, TileScratch& scratch, int64_t rows)
      : plan_(plan), scratch_(scratch), words_(plan.head_dim / 2) {
    const uint32_t* query = round_query_pairs(scratch_, rows, plan.head_dim);
    uint32_t* transposed = scratch_.query_by_pair.data();
    for (int64_t w = 0; w < words_; ++w) {
      for (int64_t r = 0; r < rows; ++r) transposed[w * kQueryColumns + r] = query[r * words_ + w];
    }
  }
  AmxOperands(const AmxOperands&) = delete;
  AmxOperands& operator=(const AmxOperands&) = delete;
  // The tile state is released, so that the OS need not save it while this thread does else.
  ~AmxOperands() { _tile_release(); }

  void load_block(int64_t batch, int64_t kv_head, int64_t block, int64_t block_keys) {
    // 8 groups of 16 keys, 8 groups of 8 value pairs: 16 steps for 512 lines.
    prefetch_.emplace(plan_, batch, kv_head, block + kBlockKeys, kBlockKeys, 32);
    batch_ = batch;
    kv_head_ = kv_head;
    block_ = block;
    block_keys_ = block_keys;
  }

  void score(int64_t first, int64_t count, int64_t columns) {
    configure(count);
    const int64_t key_stride = plan_.key.layout.strides[2];
    const uint16_t* keys = bf16_rows(plan_.key, batch_, kv_head_, block_);
    const uint32_t* query = scratch_.query_by_pair.data() + first;
    alignas(64) float tile[16 * 16];
    alignas(64) float transposed[16 * 16];
    // The first row group packs V as it goes, so that the core reads K and V side by side.
    const bool pack = first == 0;
    for (int64_t j = 0; j < columns; j += 16) {
      prefetch_->step();
      if (pack) pack_pairs(j / 2, j / 2 + 8);
      const uint16_t* rows = keys + j * key_stride;
      int64_t stride = key_stride;
      if (j + 16 > block_keys_) {
        rows = padded_keys(rows, key_stride, block_keys_ - j);
        stride = plan_.head_dim;
      }
      _tile_zero(0);
      for (int64_t w = 0; w < words_; w += 16) {
        _tile_loadd(1, rows + 2 * w, stride * sizeof(uint16_t));
        _tile_loadd(2, query + w * kQueryColumns, kQueryColumns * sizeof(uint32_t));
        _tile_dpbf16ps(0, 1, 2);
      }
      _tile_stored(0, tile, 16 * sizeof(float));
      transpose_block(tile, 16, transposed, 16);
      for (int64_t r = 0; r < count; ++r) {
        _mm512_storeu_ps(scratch_.scores.data() + (first + r) * kBlockKeys + j,
                         _mm512_load_ps(transposed + r * 16));
      }
    }
    if (pack) pack_pairs(columns / 2, round_up(block_keys_, 32) / 2);
  }

  void accumulate(int64_t first, int64_t count, int64_t block_keys, int64_t columns) {
    configure(count);
    const int64_t head_dim = plan_.head_dim;
    constexpr int64_t kWeightWords = kBlockKeys / 2;
    const int64_t padded = round_up(block_keys, 32);
    uint32_t* weights = scratch_.weight_pairs.data() + first * kWeightWords;
    for (int64_t r = 0; r < count; ++r) {
      uint32_t* row = weights + r * kWeightWords;
      to_bf16(scratch_.scores.data() + (first + r) * kBlockKeys, row, columns);
      std::fill(row + columns / 2, row + padded / 2, 0u);
    }
    float* sums = scratch_.accumulators.data() + first * head_dim;
    const uint32_t* values = scratch_.value_pairs.data();
    // Two 16-dim tiles a pass (D is a multiple of 32 here): two chains of sums in flight.
    const int64_t sum_bytes = head_dim * sizeof(float);
    const int64_t value_bytes = head_dim * sizeof(uint32_t);
    for (int64_t d = 0; d < head_dim; d += 32) {
      _tile_loadd(3, sums + d, sum_bytes);
      _tile_loadd(6, sums + d + 16, sum_bytes);
      for (int64_t pair = 0; 2 * pair < padded; pair += 16) {
        _tile_loadd(4, weights + pair, kWeightWords * sizeof(uint32_t));
        _tile_loadd(5, values + pair * head_dim + d, value_bytes);
        _tile_dpbf16ps(3, 4, 5);
        _tile_loadd(7, values + pair * head_dim + d + 16, value_bytes);
        _tile_dpbf16ps(6, 4, 7);
      }
      _tile_stored(3, sums + d, sum_bytes);
      _tile_stored(6, sums + d + 16, sum_bytes);
    }
  }

 private:
  // The tile shapes for `rows` query rows, loaded when they change.
  void configure(int64_t rows) {
    if (rows == configured_rows_) return;
    AmxTileConfig config;
    const auto row_bytes = static_cast<uint16_t>(4 * rows);
    const auto tile_rows = static_cast<uint8_t>(rows);
    const std::array<std::pair<uint8_t, uint16_t>, 8> shapes = {{{16, row_bytes},
                                                                 {16, 64},
                                                                 {16, row_bytes},
                                                                 {tile_rows, 64},
                                                                 {tile_rows, 64},
                                                                 {16, 64},
                                                                 {tile_rows, 64},
                                                                 {16, 64}}};
    for (size_t tile = 0; tile < shapes.size(); ++tile) {
      config.rows[tile] = shapes[tile].first;
      config.bytes_per_row[tile] = shapes[tile].second;
    }
    _tile_loadconfig(&config);
    configured_rows_ = rows;
  }

  void pack_pairs(int64_t first_pair, int64_t end_pair) {
    pack_value_pairs(plan_, batch_, kv_head_, block_, block_keys_, first_pair, end_pair,
                     scratch_.value_pairs.data(), *prefetch_);
  }

  // The block's last keys (fewer than 16) copied into zero-padded rows of D.
  const uint16_t* padded_keys(const uint16_t* rows, int64_t stride, int64_t count) {
    auto* padded = reinterpret_cast<uint16_t*>(scratch_.keys.data());
    for (int64_t r = 0; r < 16; ++r) {
      uint16_t* out = padded + r * plan_.head_dim;
      if (r < count) {
        std::copy(rows + r * stride, rows + r * stride + plan_.head_dim, out);
      } else {
        std::fill(out, out + plan_.head_dim, uint16_t{0});
      }
    }
    return padded;
  }

  const AttentionPlan& plan_;
  TileScratch& scratch_;
  int64_t words_;
  int64_t configured_rows_ = 0;
  int64_t batch_ = 0, kv_head_ = 0, block_ = 0, block_keys_ = 0;
  std::optional<PrefetchStream> prefetch_;  // The next block's K and V lines.
};
#endif
#endif

// One work item: tile `tile` of (batch, kv_head) over key split `split`.
template <typename Operands>
void process_item(const AttentionPlan& plan, int64_t batch, int64_t kv_head, int64_t tile,
                  int64_t split, float* partial) {
  const int64_t head_dim = plan.head_dim;
  const int64_t padded_dim = round_up(head_dim, simd::kWidth);
  TileScratch& scratch = tile_scratch;
  scratch.reserve(head_dim, padded_dim);

  int64_t first_row = tile * kAttentionTileRows;
  int64_t rows = std::min(kAttentionTileRows, plan.rows_per_group - first_row);
  int64_t heads[kAttentionTileRows];
  int64_t positions[kAttentionTileRows];
  int64_t key_starts[kAttentionTileRows];  // Keys [start, limit) are visible to the row.
  int64_t key_limits[kAttentionTileRows];
  float maxima[kAttentionTileRows];
  float sum_lanes[kAttentionTileRows][simd::kWidth];
  int64_t tile_key_end = 0;
  int64_t tile_key_start = plan.kv_length;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t row = first_row + r;
    positions[r] = row / plan.group;
    heads[r] = kv_head * plan.group + row % plan.group;
    key_limits[r] = plan.causal
                        ? std::min(plan.kv_length,
                                   plan.kv_length - plan.query_length + positions[r] + 1)
                        : plan.kv_length;
    key_starts[r] = plan.window ? std::max<int64_t>(0, key_limits[r] - plan.window) : 0;
    tile_key_end = std::max(tile_key_end, key_limits[r]);
    tile_key_start = std::min(tile_key_start, key_starts[r]);
    maxima[r] = -std::numeric_limits<float>::infinity();
    std::fill(sum_lanes[r], sum_lanes[r] + simd::kWidth, 0.0f);
  }
  // Blocks wholly before every row's window are skipped; blocks stay aligned to kBlockKeys.
  int64_t split_begin = split * plan.split_keys;
  int64_t key_begin =
      std::max(split_begin, tile_key_start / kBlockKeys * kBlockKeys);
  int64_t key_end = std::min(tile_key_end, split_begin + plan.split_keys);

  float* query = scratch.query.data();
  float* accumulators = scratch.accumulators.data();
  float* scores = scratch.scores.data();
  const Layout& query_layout = plan.query.layout;
  // Q rows scaled as they are read (unit-stride f32 in place: no narrow stores reloaded wide).
  const Vec scale = simd::broadcast(plan.scale);
  for (int64_t r = 0; r < rows; ++r) {
    float* query_row = query + r * head_dim;
    const float* source =
        read_f32(plan.query.base, plan.query.dtype,
                 attention_row_offset(query_layout, batch, heads[r], positions[r]),
                 query_layout.strides[3], head_dim, query_row);
    simd::transform(source, query_row, head_dim, [&](Vec x) { return simd::multiply(x, scale); });
  }
  std::fill(accumulators, accumulators + rows * padded_dim, 0.0f);
  Operands operands(plan, scratch, rows);

  for (int64_t block = key_begin; block < key_end; block += kBlockKeys) {
    int64_t block_keys = std::min(kBlockKeys, key_end - block);
    int64_t columns = round_up(block_keys, simd::kWidth);
    operands.load_block(batch, kv_head, block, block_keys);

    // Row group by row group (balanced: 9 rows with at most 6 a group run as 5 + 4, not 6 + 3),
    // so that one group's softmax overlaps the products of the next.
    int64_t group_rows = Operands::group_rows(rows);
    int64_t groups = (rows + group_rows - 1) / group_rows;
    for (int64_t group = 0, first = 0; group < groups; ++group) {
      int64_t count = (rows - first + (groups - group) - 1) / (groups - group);
      operands.score(first, count, columns);
      // Online softmax: weights relative to each row's running max; rescale what came before.
      for (int64_t r = first; r < first + count; ++r) {
        int64_t visible = std::clamp<int64_t>(key_limits[r] - block, 0, block_keys);
        int64_t hidden = std::clamp<int64_t>(key_starts[r] - block, 0, block_keys);
        float correction = softmax_block(scores + r * kBlockKeys, hidden, visible, columns,
                                         &maxima[r], sum_lanes[r]);
        if (correction != 1.0f) {
          scale_in_place(accumulators + r * padded_dim, correction, padded_dim);
        }
      }
      operands.accumulate(first, count, block_keys, columns);
      first += count;
    }
  }

  operands.finish(accumulators, rows);
  if (partial) {
    // Key-range split: leave the running state for attention.cpp to combine.
    int64_t stride = attention_partial_stride(plan);
    for (int64_t r = 0; r < rows; ++r) {
      float* record = partial + r * stride;
      record[0] = maxima[r];
      record[1] = simd::sum(simd::load(sum_lanes[r]));
      std::copy(accumulators + r * padded_dim, accumulators + r * padded_dim + head_dim,
                record + 2);
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    int64_t out_offset = attention_row_offset(plan.output.layout, batch, heads[r], positions[r]);
    float* result = plan.output.dtype == DType::f32
                        ? static_cast<float*>(plan.output.base) + out_offset
                        : scratch.row.data();
    const Vec inverse = simd::broadcast(1.0f / simd::sum(simd::load(sum_lanes[r])));
    simd::transform(accumulators + r * padded_dim, result, head_dim,
                    [&](Vec x) { return simd::multiply(x, inverse); });
    if (plan.output.dtype != DType::f32) {
      store_f32(plan.output.base, plan.output.dtype, out_offset, result, head_dim);
    }
  }
}

}  // namespace

void attention_items(const AttentionPlan& plan, int64_t begin, int64_t end) {
#if defined(__AVX512BF16__)
  const bool pair_path = pair_path_applies(plan);
#endif
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
  const bool amx_path = pair_path && amx_selected() && !plan.key.blocks && !plan.value.blocks;
#endif
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
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
    if (amx_path) {
      process_item<AmxOperands>(plan, batch, kv_head, tile, split, partial);
      continue;
    }
#endif
#if defined(__AVX512BF16__)
    if (pair_path) {
      process_item<PairOperands>(plan, batch, kv_head, tile, split, partial);
      continue;
    }
#endif
    process_item<F32Operands>(plan, batch, kv_head, tile, split, partial);
  }
}

}  // namespace fornace::cpu::FORNACE_KERNEL_NAMESPACE
