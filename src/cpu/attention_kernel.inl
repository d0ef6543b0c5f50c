// The attention tile kernel, compiled once per ISA: attention.cpp (portable),
// attention_avx2.cpp and attention_avx512.cpp each define FORNACE_KERNEL_NAMESPACE and include
// this file, so every copy has its own namespace and no inline function crosses ISAs.
//
// A tile holds up to kAttentionTileRows query rows that share one kv head (the heads of a GQA
// group, for one or more positions), so every K and V row is read once for all of them. The tile
// walks its key range in blocks of kAttentionBlockKeys, flash-attention style:
//   1. the block's K rows are transposed into a [D, block keys] scratch (always, whatever the
//      layout, so the arithmetic never depends on where K came from);
//   2. scores = Q · K^T by a register-blocked product: a few rows by a few vectors of keys,
//      vertical FMAs only, with no horizontal sums;
//   3. an online softmax per row (running max and sum) turns the scores into weights;
//   4. accumulators += weights · V by the same register-blocked product, V rows read in place.
// No [Sq, Skv] matrix is ever formed, and keys past a row's causal limit are masked or skipped.

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "cpu/attention_internal.h"
#include "cpu/simd.h"
#include "cpu/strided_access.h"

namespace fornace::cpu::FORNACE_KERNEL_NAMESPACE {
namespace {

using simd::Vec;

// The register tile of the products: up to kMaxTileRows rows by kColumnVectors vectors, sized
// to the register file (32 vector registers with AVX-512, 16 otherwise). Seven rows cover a
// Qwen2 GQA group in one pass.
#if defined(__AVX512F__)
constexpr int kColumnVectors = 4;
constexpr int kMaxTileRows = 7;
#else
constexpr int kColumnVectors = 2;
constexpr int kMaxTileRows = 6;
#endif
constexpr int64_t kColumns = kColumnVectors * simd::kWidth;
constexpr int64_t kBlockKeys = kAttentionBlockKeys;
static_assert(kBlockKeys % kColumns == 0);

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
  }
};

thread_local TileScratch tile_scratch;

// Offset of element [b, h, s, 0] of a 4-D layout.
inline int64_t row_start(const Layout& layout, int64_t batch, int64_t head, int64_t position) {
  return layout.offset + batch * layout.strides[0] + head * layout.strides[1] +
         position * layout.strides[2];
}

inline bool unit_stride_f32(const StridedInput& input, int64_t head_dim) {
  return input.dtype == DType::f32 && (input.layout.strides[3] == 1 || head_dim == 1);
}

// Rows [first, first + count) of kv head (batch, head) as f32 rows `*row_stride` apart, each
// `width` >= D wide with zeros past D: in place when the operand is unit-stride f32 and no
// padding is needed, otherwise converted into `buffer`.
inline const float* kv_rows(const StridedInput& input, int64_t batch, int64_t head, int64_t first,
                            int64_t count, int64_t head_dim, int64_t width, float* buffer,
                            int64_t* row_stride) {
  const Layout& layout = input.layout;
  int64_t start = row_start(layout, batch, head, first);
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
  *row_stride = width;
  return buffer;
}

// Transposes the kWidth x kWidth block at `source` (rows `source_stride` apart) into
// `destination` (rows `destination_stride` apart).
inline void transpose_block(const float* source, int64_t source_stride, float* destination,
                            int64_t destination_stride) {
#if defined(__AVX512F__)
  __m512 rows[16];
  __m512 pairs[16];
  for (int i = 0; i < 16; ++i) rows[i] = _mm512_loadu_ps(source + i * source_stride);
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
#elif defined(__AVX2__)
  __m256 rows[8];
  __m256 pairs[8];
  for (int i = 0; i < 8; ++i) rows[i] = _mm256_loadu_ps(source + i * source_stride);
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
  __m128 row0 = _mm_loadu_ps(source);
  __m128 row1 = _mm_loadu_ps(source + source_stride);
  __m128 row2 = _mm_loadu_ps(source + 2 * source_stride);
  __m128 row3 = _mm_loadu_ps(source + 3 * source_stride);
  _MM_TRANSPOSE4_PS(row0, row1, row2, row3);
  _mm_storeu_ps(destination, row0);
  _mm_storeu_ps(destination + destination_stride, row1);
  _mm_storeu_ps(destination + 2 * destination_stride, row2);
  _mm_storeu_ps(destination + 3 * destination_stride, row3);
#else
  (void)source_stride;
  (void)destination_stride;
  *destination = *source;
#endif
}

// keys_by_dim[d * kBlockKeys + j] = keys[j * key_stride + d] for j < count, and 0 for
// count <= j < round_up(count, kWidth).
void transpose_keys(const float* keys, int64_t key_stride, int64_t count, int64_t head_dim,
                    float* keys_by_dim) {
  constexpr int64_t width = simd::kWidth;
  const int64_t full_keys = count / width * width;
  const int64_t full_dims = head_dim / width * width;
  const int64_t columns = round_up(count, width);
  for (int64_t j = 0; j < full_keys; j += width) {
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
        simd::store(padded + r * width, j < count ? simd::load(keys + j * key_stride + d) : zero);
      }
      transpose_block(padded, width, keys_by_dim + d * kBlockKeys + full_keys, kBlockKeys);
    }
  }
  for (int64_t d = full_dims; d < head_dim; ++d) {
    for (int64_t j = 0; j < columns; ++j) {
      keys_by_dim[d * kBlockKeys + j] = j < count ? keys[j * key_stride + d] : 0.0f;
    }
  }
}

// The register tile: out[r][0, kVectors * kWidth) = (accumulate ? out[r] : 0) + the sum over
// k < depth, in order, of left[r * left_stride + k] * right[k * right_stride + (0, kVectors *
// kWidth)], for r < kRows.
template <int kRows, int kVectors>
void multiply_tile(const float* left, int64_t left_stride, const float* right,
                   int64_t right_stride, int64_t depth, float* out, int64_t out_stride,
                   bool accumulate) {
  Vec sums[kRows][kVectors];
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectors; ++v) {
      sums[r][v] = accumulate ? simd::load(out + r * out_stride + v * simd::kWidth)
                              : simd::broadcast(0.0f);
    }
  }
  for (int64_t k = 0; k < depth; ++k) {
    Vec columns[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      columns[v] = simd::load(right + k * right_stride + v * simd::kWidth);
    }
    for (int r = 0; r < kRows; ++r) {
      const Vec factor = simd::broadcast(left[r * left_stride + k]);
      for (int v = 0; v < kVectors; ++v) {
        sums[r][v] = simd::multiply_add(factor, columns[v], sums[r][v]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectors; ++v) {
      simd::store(out + r * out_stride + v * simd::kWidth, sums[r][v]);
    }
  }
}

// Every register tile shape: kTiles[vectors - 1][rows - 1].
using TileFunction = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*,
                              int64_t, bool);
template <int kVectors, int... kRowsBelow>
constexpr std::array<TileFunction, kMaxTileRows> tiles_of_width(
    std::integer_sequence<int, kRowsBelow...>) {
  return {&multiply_tile<kRowsBelow + 1, kVectors>...};
}
template <int... kVectorsBelow>
constexpr auto tile_table(std::integer_sequence<int, kVectorsBelow...>) {
  return std::array{
      tiles_of_width<kVectorsBelow + 1>(std::make_integer_sequence<int, kMaxTileRows>())...};
}
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kColumnVectors>());

// out[rows, columns] = (accumulate ? out : 0) + left[rows, depth] · right[depth, columns], for
// 1 <= rows <= kMaxTileRows and `columns` a multiple of kWidth.
void multiply(const float* left, int64_t left_stride, const float* right, int64_t right_stride,
              int64_t depth, float* out, int64_t out_stride, int64_t rows, int64_t columns,
              bool accumulate) {
  for (int64_t column = 0; column < columns; column += kColumns) {
    int64_t vectors = std::min<int64_t>(kColumnVectors, (columns - column) / simd::kWidth);
    kTiles[vectors - 1][rows - 1](left, left_stride, right + column, right_stride, depth,
                                  out + column, out_stride, accumulate);
  }
}

inline void scale_in_place(float* values, float factor, int64_t count) {
  const Vec scale = simd::broadcast(factor);
  simd::transform(values, values, count, [&](Vec x) { return simd::multiply(x, scale); });
}

// e^x for softmax arguments x <= 0 (or -inf, which gives 0). With AVX-512: x = n ln2 + r with
// |r| <= ln2/2, e^r by its degree-6 Taylor polynomial and the 2^n scaling by one scalef, about
// half the instructions of the general simd::exp.
inline Vec softmax_exp(Vec x) {
#if defined(__AVX512F__)
  // Below -86 the weight is 0 (e^-86 is below 2^-124); a mask sets it, because letting scalef
  // underflow costs a slow microcode assist per lane. NaN stays NaN.
  const __m512 lowest = _mm512_set1_ps(-86.0f);
  __mmask16 kept = _mm512_cmp_ps_mask(x, lowest, _CMP_NLT_UQ);
  x = _mm512_max_ps(x, lowest);
  Vec n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln 2 split so that n * high is exact.
  Vec r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  Vec polynomial = _mm512_set1_ps(1.0f / 720.0f);
  polynomial = _mm512_fmadd_ps(polynomial, r, _mm512_set1_ps(1.0f / 120.0f));
  polynomial = _mm512_fmadd_ps(polynomial, r, _mm512_set1_ps(1.0f / 24.0f));
  polynomial = _mm512_fmadd_ps(polynomial, r, _mm512_set1_ps(1.0f / 6.0f));
  polynomial = _mm512_fmadd_ps(polynomial, r, _mm512_set1_ps(0.5f));
  polynomial = _mm512_fmadd_ps(polynomial, r, _mm512_set1_ps(1.0f));
  polynomial = _mm512_fmadd_ps(polynomial, r, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(kept, polynomial, n);
#else
  return simd::exp(x);
#endif
}

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
// exp(score - running max), with keys from `visible` on weighted 0, and updates the running max
// and sum. Returns the factor by which the row's earlier accumulators must be scaled.
inline float softmax_block(float* scores, int64_t visible, int64_t columns, float* maximum,
                           float* sum) {
  const Vec zero = simd::broadcast(0.0f);
  if (visible == 0) {
    for (int64_t j = 0; j < columns; j += simd::kWidth) simd::store(scores + j, zero);
    return 1.0f;
  }
  // Masked in registers: narrow stores followed by wide loads would stall store forwarding.
  const Vec lowest = simd::broadcast(-std::numeric_limits<float>::infinity());
  auto visible_scores = [&](int64_t j) {
    Vec values = simd::load(scores + j);
    return j + simd::kWidth <= visible ? values : keep_first(values, visible - j, lowest);
  };
  Vec largest = lowest;
  for (int64_t j = 0; j < columns; j += simd::kWidth) {
    largest = simd::maximum(visible_scores(j), largest);
  }
  float new_max = std::max(*maximum, simd::max_lane(largest));
  // Unchanged max: no rescale (exactly 1). The row's first block gives exp(-inf) = 0.
  float correction = 1.0f;
  if (new_max != *maximum) {
    float factors[simd::kWidth];
    simd::store(factors, softmax_exp(simd::broadcast(*maximum - new_max)));
    correction = factors[0];
  }
  const Vec shift = simd::broadcast(new_max);
  Vec total = zero;
  for (int64_t j = 0; j < columns; j += simd::kWidth) {
    Vec weight = softmax_exp(simd::subtract(visible_scores(j), shift));
    simd::store(scores + j, weight);
    total = simd::add(total, weight);
  }
  *sum = *sum * correction + simd::sum(total);
  *maximum = new_max;
  return correction;
}

// One work item: tile `tile` of (batch, kv_head) over key split `split`.
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
  float* scores = scratch.scores.data();
  const Layout& query_layout = plan.query.layout;
  for (int64_t r = 0; r < rows; ++r) {
    float* query_row = query + r * head_dim;
    load_f32(plan.query.base, plan.query.dtype,
             row_start(query_layout, batch, heads[r], positions[r]), query_layout.strides[3],
             head_dim, query_row);
    scale_in_place(query_row, plan.scale, head_dim);
  }
  std::fill(accumulators, accumulators + rows * padded_dim, 0.0f);

  for (int64_t block = key_begin; block < key_end; block += kBlockKeys) {
    int64_t block_keys = std::min(kBlockKeys, key_end - block);
    int64_t columns = round_up(block_keys, simd::kWidth);

    int64_t key_stride = 0;
    const float* keys = kv_rows(plan.key, batch, kv_head, block, block_keys, head_dim, head_dim,
                                scratch.keys.data(), &key_stride);
    const float* keys_by_dim = scratch.keys_by_dim.data();
    transpose_keys(keys, key_stride, block_keys, head_dim, scratch.keys_by_dim.data());
    int64_t value_stride = 0;
    const float* values = kv_rows(plan.value, batch, kv_head, block, block_keys, head_dim,
                                  padded_dim, scratch.values.data(), &value_stride);

    // Row group by row group (balanced: 7 rows with at most 6 a group run as 4 + 3, not 6 + 1),
    // so that one group's softmax overlaps the products of the next.
    int64_t groups = (rows + kMaxTileRows - 1) / kMaxTileRows;
    for (int64_t group = 0, first = 0; group < groups; ++group) {
      int64_t count = (rows - first + (groups - group) - 1) / (groups - group);
      float* group_scores = scores + first * kBlockKeys;
      float* group_accumulators = accumulators + first * padded_dim;
      // Scores against the block's keys.
      multiply(query + first * head_dim, head_dim, keys_by_dim, kBlockKeys, head_dim,
               group_scores, kBlockKeys, count, columns, false);
      // Online softmax: weights relative to each row's running max; rescale what came before.
      for (int64_t r = first; r < first + count; ++r) {
        int64_t visible = std::clamp<int64_t>(key_limits[r] - block, 0, block_keys);
        float correction =
            softmax_block(scores + r * kBlockKeys, visible, columns, &maxima[r], &sums[r]);
        if (correction != 1.0f) {
          scale_in_place(accumulators + r * padded_dim, correction, padded_dim);
        }
      }
      // accumulators += weights · V.
      multiply(group_scores, kBlockKeys, values, value_stride, block_keys, group_accumulators,
               padded_dim, count, padded_dim, true);
      first += count;
    }
  }

  if (partial) {
    // Key-range split: leave the running state for attention.cpp to combine.
    int64_t stride = attention_partial_stride(plan);
    for (int64_t r = 0; r < rows; ++r) {
      float* record = partial + r * stride;
      record[0] = maxima[r];
      record[1] = sums[r];
      std::copy(accumulators + r * padded_dim, accumulators + r * padded_dim + head_dim,
                record + 2);
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
    simd::transform(accumulators + r * padded_dim, result, head_dim,
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
    process_item(plan, batch, kv_head, tile, split, partial);
  }
}

}  // namespace fornace::cpu::FORNACE_KERNEL_NAMESPACE
