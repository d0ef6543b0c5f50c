// AVX-512 GEMV kernels: vdpbf16ps over bf16 weight rows, and FMA over f32/f16 weights.
#include <immintrin.h>

#include <algorithm>
#include <string>

#include "cpu/gemm.h"
#include "cpu/gemm_kernels.h"
#include "cpu/prefetch.h"
#include "cpu/simd.h"  // Also silences GCC 12's false "uninitialized" warnings.

namespace fornace::cpu::kernels {
namespace {

// Weight rows are read one after another as one sequential stream (interleaving several rows
// makes several short streams, which the hardware prefetcher follows poorly). There is no
// software prefetch: with the weights in 2 MiB pages the hardware prefetcher is not stopped at
// every 4 KiB, and an L2 prefetch 8 KiB ahead measured 4-8 % below no prefetch, in the same
// process against a streaming read of the same bytes.

// Vector chunks per step, each with its own accumulator (256 bytes of bf16 weights per step).
constexpr int kChunks = 4;

template <int Rows, int Chunks>
inline void store_row_sums(const GemvArguments& arguments, int64_t column,
                           const __m512 (&acc)[Rows][Chunks]) {
  for (int row = 0; row < Rows; ++row) {
    __m512 total = acc[row][0];
    for (int chunk = 1; chunk < Chunks; ++chunk) total = _mm512_add_ps(total, acc[row][chunk]);
    float sum = _mm512_reduce_add_ps(total);
    if (arguments.bias) sum += arguments.bias[column];
    arguments.output[row * arguments.output_stride + column] = sum;
  }
}

// Widen 16 weights to f32, in full or under a mask.
struct LoadF32 {
  using Element = float;
  static __m512 full(const float* source) { return _mm512_loadu_ps(source); }
  static __m512 part(const float* source, __mmask16 mask) {
    return _mm512_maskz_loadu_ps(mask, source);
  }
};
struct LoadF16 {
  using Element = uint16_t;
  static __m512 full(const uint16_t* source) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(source)));
  }
  static __m512 part(const uint16_t* source, __mmask16 mask) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, source));
  }
};

// f32 input, weights widened to f32: kChunks 16-wide chunks per step.
template <int Rows, typename Load>
void fma_rows(const GemvArguments& arguments, int64_t begin, int64_t end) {
  using Element = typename Load::Element;
  const float* input = static_cast<const float*>(arguments.input);
  const int64_t depth = arguments.depth;
  for (int64_t column = begin; column < end; ++column) {
    const Element* weight =
        static_cast<const Element*>(arguments.weight) + column * arguments.weight_stride;
    __m512 acc[Rows][kChunks];
    for (int row = 0; row < Rows; ++row) {
      for (int chunk = 0; chunk < kChunks; ++chunk) acc[row][chunk] = _mm512_setzero_ps();
    }
    int64_t k = 0;
    for (; k + 16 * kChunks <= depth; k += 16 * kChunks) {
      for (int chunk = 0; chunk < kChunks; ++chunk) {
        __m512 weights = Load::full(weight + k + 16 * chunk);
        for (int row = 0; row < Rows; ++row) {
          __m512 value = _mm512_loadu_ps(input + row * arguments.input_stride + k + 16 * chunk);
          acc[row][chunk] = _mm512_fmadd_ps(value, weights, acc[row][chunk]);
        }
      }
    }
    for (; k < depth; k += 16) {
      int64_t left = depth - k < 16 ? depth - k : 16;
      __mmask16 mask = static_cast<__mmask16>((1u << left) - 1u);
      __m512 part = Load::part(weight + k, mask);
      for (int row = 0; row < Rows; ++row) {
        __m512 value = _mm512_maskz_loadu_ps(mask, input + row * arguments.input_stride + k);
        acc[row][0] = _mm512_fmadd_ps(value, part, acc[row][0]);
      }
    }
    store_row_sums(arguments, column, acc);
  }
}

// bf16 input and weights, one weight row at a time: vdpbf16ps, Chunks 32-wide chunks per step.
// A single input row (decode of one sequence) is bound by the weight stream, not by this loop.
template <int Rows, int Chunks = kChunks>
void dot_rows(const GemvArguments& arguments, int64_t begin, int64_t end) {
  const uint16_t* input = static_cast<const uint16_t*>(arguments.input);
  const int64_t depth = arguments.depth;
  for (int64_t column = begin; column < end; ++column) {
    const uint16_t* weight =
        static_cast<const uint16_t*>(arguments.weight) + column * arguments.weight_stride;
    __m512 acc[Rows][Chunks];
    for (int row = 0; row < Rows; ++row) {
      for (int chunk = 0; chunk < Chunks; ++chunk) acc[row][chunk] = _mm512_setzero_ps();
    }
    int64_t k = 0;
    for (; k + 32 * Chunks <= depth; k += 32 * Chunks) {
      for (int chunk = 0; chunk < Chunks; ++chunk) {
        __m512bh weights = (__m512bh)_mm512_loadu_si512(weight + k + 32 * chunk);
        for (int row = 0; row < Rows; ++row) {
          __m512bh value =
              (__m512bh)_mm512_loadu_si512(input + row * arguments.input_stride + k + 32 * chunk);
          acc[row][chunk] = _mm512_dpbf16_ps(acc[row][chunk], value, weights);
        }
      }
    }
    for (int chunk = 0; k < depth; k += 32, chunk = (chunk + 1) % Chunks) {
      int64_t left = depth - k < 32 ? depth - k : 32;
      __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << left) - 1u);
      __m512bh part = (__m512bh)_mm512_maskz_loadu_epi16(mask, weight + k);
      for (int row = 0; row < Rows; ++row) {
        __m512bh value =
            (__m512bh)_mm512_maskz_loadu_epi16(mask, input + row * arguments.input_stride + k);
        acc[row][chunk] = _mm512_dpbf16_ps(acc[row][chunk], value, part);
      }
    }
    store_row_sums(arguments, column, acc);
  }
}

// bf16 input and weights for 2 to 8 rows: a tile of Columns weight rows by Rows input rows, one
// accumulator each, so that a step loads Columns + Rows vectors for Columns x Rows vdpbf16ps (one
// weight row at a time loads 1 + Rows for Rows, and is bound by its loads and reductions). The
// depth runs in segments whose input rows fit L1 (20 KiB: down_proj's 4,864 at 8 rows in four),
// partial sums added in the output. With this much arithmetic per byte the core keeps too few
// loads in flight for the hardware prefetcher alone: each step prefetches the same 64 bytes
// about kPrefetchBytes further on (whole weight rows ahead, within the segment). micro-matmul,
// 8 rows, 1 thread, against one weight row at a time: q_proj 98.6 -> 63.4 us, gate_proj
// 583 -> 366 us, down_proj 712 -> 395 us, about the time of one row.
constexpr int64_t kSegmentInputBytes = 20 << 10;
constexpr int64_t kPrefetchBytes = 16 << 10;
// Independent k steps of a panel for one input row.
constexpr int kPanelUnrollOneRow = 8;

template <int Rows>
constexpr int tile_columns() {
  // Columns x Rows accumulators, Columns weight vectors and one input vector in 32 registers.
  return Rows >= 7 ? 3 : Rows >= 5 ? 4 : Rows == 4 ? 5 : Rows == 3 ? 6 : 8;
}

template <int Rows, int Columns>
inline void dot_tile(const GemvArguments& arguments, int64_t column, int64_t k_begin,
                     int64_t k_end, int64_t prefetch_rows) {
  const uint16_t* input = static_cast<const uint16_t*>(arguments.input);
  const uint16_t* weight =
      static_cast<const uint16_t*>(arguments.weight) + column * arguments.weight_stride;
  const int64_t stride = arguments.weight_stride;
  __m512 acc[Columns][Rows];
#pragma GCC unroll 8
  for (int j = 0; j < Columns; ++j) {
#pragma GCC unroll 8
    for (int row = 0; row < Rows; ++row) acc[j][row] = _mm512_setzero_ps();
  }
  auto step = [&](int64_t k, __mmask32 mask) {
    __m512bh weights[Columns];
#pragma GCC unroll 8
    for (int j = 0; j < Columns; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(weight + (j + prefetch_rows) * stride + k),
                   _MM_HINT_T0);
      weights[j] = (__m512bh)_mm512_maskz_loadu_epi16(mask, weight + j * stride + k);
    }
#pragma GCC unroll 8
    for (int row = 0; row < Rows; ++row) {
      __m512bh value =
          (__m512bh)_mm512_maskz_loadu_epi16(mask, input + row * arguments.input_stride + k);
#pragma GCC unroll 8
      for (int j = 0; j < Columns; ++j) acc[j][row] = _mm512_dpbf16_ps(acc[j][row], value, weights[j]);
    }
  };
  int64_t k = k_begin;
  for (; k + 32 <= k_end; k += 32) step(k, ~__mmask32{0});
  if (k < k_end) step(k, static_cast<__mmask32>((uint64_t{1} << (k_end - k)) - 1u));
  const bool first_segment = k_begin == 0;
#pragma GCC unroll 8
  for (int j = 0; j < Columns; ++j) {
#pragma GCC unroll 8
    for (int row = 0; row < Rows; ++row) {
      float sum = _mm512_reduce_add_ps(acc[j][row]);
      float& out = arguments.output[row * arguments.output_stride + column + j];
      if (first_segment) {
        out = arguments.bias ? sum + arguments.bias[column + j] : sum;
      } else {
        out += sum;
      }
    }
  }
}

template <int Rows>
void dot_rows_tiled(const GemvArguments& arguments, int64_t begin, int64_t end) {
  constexpr int kColumns = tile_columns<Rows>();
  const int64_t depth = arguments.depth;
  const int64_t max_segment = std::max<int64_t>(32, kSegmentInputBytes / (2 * Rows) / 32 * 32);
  const int64_t segments = (depth + max_segment - 1) / max_segment;
  const int64_t segment = std::max<int64_t>(32, ((depth + segments - 1) / segments + 31) / 32 * 32);
  for (int64_t k_begin = 0; k_begin < depth || k_begin == 0; k_begin += segment) {
    const int64_t k_end = std::min(depth, k_begin + segment);
    const int64_t segment_bytes = std::max<int64_t>(64, (k_end - k_begin) * 2);
    const int64_t prefetch_rows = std::max<int64_t>(kColumns, kPrefetchBytes / segment_bytes);
    int64_t column = begin;
    for (; column + kColumns <= end; column += kColumns) {
      dot_tile<Rows, kColumns>(arguments, column, k_begin, k_end, prefetch_rows);
    }
    for (; column < end; ++column) dot_tile<Rows, 1>(arguments, column, k_begin, k_end, prefetch_rows);
    if (k_end >= depth) break;
  }
}

// bf16 input and weights packed in panels (pack_bf16_weight): each step of a panel is one k pair
// of 32 weight rows in two vectors, multiplied by each input row's pair broadcast, so the 32
// sums of a row come out as two vectors with no reduction across lanes. A panel is one
// sequential stream and the panels follow one another. Unroll independent k steps keep
// enough vdpbf16ps in flight for one or two input rows; with more rows, each step prefetches
// its lines kPrefetchBytes further on, as dot_tile does (on Intel into L2 3 KiB ahead, the
// StreamPrefetch plan: micro-matmul gate_proj and down_proj, 4 rows, 2 threads, 20.3-21.5 ->
// 25.2-26.7 GB/s).
template <int Rows, int Unroll>
void panel_rows(const GemvArguments& arguments, int64_t begin, int64_t end) {
  const int64_t steps = (arguments.depth + 1) / 2;
  const auto* input = static_cast<const uint32_t*>(arguments.input);
  const int64_t input_stride = arguments.input_stride / 2;  // In k pairs.
  const StreamPrefetch prefetch = stream_prefetch(Isa::avx512, kPrefetchBytes);
  for (int64_t column = begin; column < end; column += 32) {
    const uint32_t* panel = static_cast<const uint32_t*>(arguments.weight) + column * steps;
    __m512 acc[Rows][2][Unroll];
#pragma GCC unroll 8
    for (int row = 0; row < Rows; ++row) {
      for (int u = 0; u < Unroll; ++u) acc[row][0][u] = acc[row][1][u] = _mm512_setzero_ps();
    }
    auto step = [&](int64_t k_pair, int u) {
      const uint32_t* source = panel + k_pair * 32;
      if constexpr (Rows > 2) prefetch.lines<128>(source);
      __m512bh low = (__m512bh)_mm512_load_si512(source);
      __m512bh high = (__m512bh)_mm512_load_si512(source + 16);
#pragma GCC unroll 8
      for (int row = 0; row < Rows; ++row) {
        __m512bh pair = (__m512bh)_mm512_set1_epi32(
            static_cast<int>(input[row * input_stride + k_pair]));
        acc[row][0][u] = _mm512_dpbf16_ps(acc[row][0][u], pair, low);
        acc[row][1][u] = _mm512_dpbf16_ps(acc[row][1][u], pair, high);
      }
    };
    int64_t k_pair = 0;
    for (; k_pair + Unroll <= steps; k_pair += Unroll) {
#pragma GCC unroll 8
      for (int u = 0; u < Unroll; ++u) step(k_pair + u, u);
    }
    for (; k_pair < steps; ++k_pair) step(k_pair, 0);
    const int64_t valid = std::min<int64_t>(32, end - column);
    const __mmask16 low_mask = static_cast<__mmask16>(valid >= 16 ? 0xffff : (1u << valid) - 1u);
    const __mmask16 high_mask =
        static_cast<__mmask16>(valid >= 32 ? 0xffff : valid <= 16 ? 0 : (1u << (valid - 16)) - 1u);
#pragma GCC unroll 8
    for (int row = 0; row < Rows; ++row) {
      __m512 sums[2];
      for (int half = 0; half < 2; ++half) {
        sums[half] = acc[row][half][0];
        for (int u = 1; u < Unroll; ++u) sums[half] = _mm512_add_ps(sums[half], acc[row][half][u]);
      }
      float* output = arguments.output + row * arguments.output_stride + column;
      if (arguments.bias) {
        sums[0] = _mm512_add_ps(sums[0], _mm512_maskz_loadu_ps(low_mask, arguments.bias + column));
        sums[1] = _mm512_add_ps(sums[1],
                                _mm512_maskz_loadu_ps(high_mask, arguments.bias + column + 16));
      }
      _mm512_mask_storeu_ps(output, low_mask, sums[0]);
      _mm512_mask_storeu_ps(output + 16, high_mask, sums[1]);
    }
  }
}

// One input row over Panels whole panels side by side, two k steps each per pass: Panels
// sequential streams at once. A core that reads one stream is held to less than the memory's
// pace (Intel model 167, micro-matmul gate_proj, 1 thread: one panel 13.4 GB/s, four 16.3).
// Each stream is prefetched by the CPU's plan too (Intel: into L2 3 KiB ahead; none on Zen):
// 2 threads, 3 alternations, gate_proj 276-286 -> 239-242 us, down_proj 284-296 -> 269-290; BF16
// decode of the synthetic 0.5B (4 alternations) 27.3-27.9 -> 29.0-29.7 tok/s.
template <int Panels>
void one_row_panels(const GemvArguments& arguments, int64_t column) {
  const int64_t steps = (arguments.depth + 1) / 2;
  const auto* input = static_cast<const uint32_t*>(arguments.input);
  const uint32_t* first = static_cast<const uint32_t*>(arguments.weight) + column * steps;
  __m512 acc[Panels][2][2];
#pragma GCC unroll 8
  for (int panel = 0; panel < Panels; ++panel) {
    for (int half = 0; half < 2; ++half) {
      acc[panel][half][0] = acc[panel][half][1] = _mm512_setzero_ps();
    }
  }
  const StreamPrefetch prefetch = stream_prefetch(Isa::avx512, 0);
  auto step = [&](int64_t k_pair, int u) {
    const __m512bh pair = (__m512bh)_mm512_set1_epi32(static_cast<int>(input[k_pair]));
#pragma GCC unroll 8
    for (int panel = 0; panel < Panels; ++panel) {
      const uint32_t* source = first + (panel * steps + k_pair) * 32;
      prefetch.lines<128>(source);
      acc[panel][0][u] =
          _mm512_dpbf16_ps(acc[panel][0][u], pair, (__m512bh)_mm512_load_si512(source));
      acc[panel][1][u] =
          _mm512_dpbf16_ps(acc[panel][1][u], pair, (__m512bh)_mm512_load_si512(source + 16));
    }
  };
  int64_t k_pair = 0;
  for (; k_pair + 2 <= steps; k_pair += 2) {
    step(k_pair, 0);
    step(k_pair + 1, 1);
  }
  if (k_pair < steps) step(k_pair, 0);
#pragma GCC unroll 8
  for (int panel = 0; panel < Panels; ++panel) {
    const int64_t at = column + 32 * panel;
    for (int half = 0; half < 2; ++half) {
      __m512 sum = _mm512_add_ps(acc[panel][half][0], acc[panel][half][1]);
      if (arguments.bias) {
        sum = _mm512_add_ps(sum, _mm512_loadu_ps(arguments.bias + at + 16 * half));
      }
      _mm512_storeu_ps(arguments.output + at + 16 * half, sum);
    }
  }
}

// One input row: whole panels four at a time, the rest (and a last partial panel) one by one.
void one_row(const GemvArguments& arguments, int64_t begin, int64_t end) {
  constexpr int kPanels = 4;
  int64_t column = begin;
  for (; column + 32 * kPanels <= end; column += 32 * kPanels) {
    one_row_panels<kPanels>(arguments, column);
  }
  if (column < end) panel_rows<1, kPanelUnrollOneRow>(arguments, column, end);
}

template <template <int> class Rows>
void dispatch_rows(const GemvArguments& arguments, int64_t begin, int64_t end) {
  static_assert(kGemvMaxRows == 4);
  switch (arguments.rows) {
    case 1:
      return Rows<1>::run(arguments, begin, end);
    case 2:
      return Rows<2>::run(arguments, begin, end);
    case 3:
      return Rows<3>::run(arguments, begin, end);
    default:
      return Rows<4>::run(arguments, begin, end);
  }
}

template <typename Load>
struct FmaRowsOf {
  template <int Rows>
  struct Kernel {
    static void run(const GemvArguments& arguments, int64_t begin, int64_t end) {
      fma_rows<Rows, Load>(arguments, begin, end);
    }
  };
};

}  // namespace

void gemv_bf16_dot_avx512(const GemvArguments& arguments, int64_t begin, int64_t end) {
  static_assert(kGemvBf16DotMaxRows == 8);
  switch (arguments.rows) {
    case 1:
      return dot_rows<1>(arguments, begin, end);
    case 2:
      return dot_rows_tiled<2>(arguments, begin, end);
    case 3:
      return dot_rows_tiled<3>(arguments, begin, end);
    case 4:
      return dot_rows_tiled<4>(arguments, begin, end);
    case 5:
      return dot_rows_tiled<5>(arguments, begin, end);
    case 6:
      return dot_rows_tiled<6>(arguments, begin, end);
    case 7:
      return dot_rows_tiled<7>(arguments, begin, end);
    default:
      return dot_rows_tiled<8>(arguments, begin, end);
  }
}

void gemv_bf16_panels_avx512(const GemvArguments& arguments, int64_t begin, int64_t end) {
  static_assert(kGemvBf16DotMaxRows == 8);
  switch (arguments.rows) {
    case 1:
      return one_row(arguments, begin, end);
    case 2:
      return panel_rows<2, 2>(arguments, begin, end);
    case 3:
      return panel_rows<3, 1>(arguments, begin, end);
    case 4:
      return panel_rows<4, 1>(arguments, begin, end);
    case 5:
      return panel_rows<5, 1>(arguments, begin, end);
    case 6:
      return panel_rows<6, 1>(arguments, begin, end);
    case 7:
      return panel_rows<7, 1>(arguments, begin, end);
    default:
      return panel_rows<8, 1>(arguments, begin, end);
  }
}

void pack_bf16_weight_avx512(const uint16_t* weight, int64_t outputs, int64_t depth, void* packed,
                             int64_t panel_begin, int64_t panel_end) {
  const int64_t panel_bytes = (depth + 1) / 2 * 32 * 4;
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    const int64_t column = panel * 32;
    pack_bf16_pairs_avx512(weight + column * depth, depth, std::min<int64_t>(32, outputs - column),
                           depth, static_cast<char*>(packed) + panel * panel_bytes);
  }
}

std::string gemv_bf16_dot_avx512_tiles() {
  return "tiles of weight rows x input rows " + std::to_string(tile_columns<2>()) + "x2, " +
         std::to_string(tile_columns<3>()) + "x3, " + std::to_string(tile_columns<4>()) + "x4, " +
         std::to_string(tile_columns<5>()) + "x5-6, " + std::to_string(tile_columns<7>()) +
         "x7-8, input segments of " + std::to_string(kSegmentInputBytes >> 10) +
         " KiB, prefetch " + std::to_string(kPrefetchBytes >> 10) + " KiB ahead";
}

void gemv_f32_avx512(const GemvArguments& arguments, int64_t begin, int64_t end) {
  if (arguments.weight_dtype == DType::f16) {
    return dispatch_rows<FmaRowsOf<LoadF16>::Kernel>(arguments, begin, end);
  }
  return dispatch_rows<FmaRowsOf<LoadF32>::Kernel>(arguments, begin, end);
}

}  // namespace fornace::cpu::kernels
