// The blocked, packed GEMM driver (blocking, packing, threading), its portable micro-kernel, and
// linear(), which picks the GEMV or the GEMM.
#include "cpu/gemm.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/storage.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm_kernels.h"
#include "cpu/scratch.h"
#include "cpu/thread_pool.h"

namespace fornace::cpu {
namespace {

using kernels::kInputRowStrideBf16;
using kernels::kInputRowStrideF32;
using kernels::kPanelDepthBf16;
using kernels::kPanelDepthF32;

constexpr int kMaxKernelRows = 32;
constexpr int kMaxKernelColumns = 32;
// Weight columns packed at a time per thread (the packed block stays in L2).
constexpr int64_t kColumnBlock = 256;
// Work items per thread that a GEMM is cut into (at least, where the rows allow).
constexpr int64_t kItemsPerThread = 16;
// The packed input of one row block stays under this many bytes.
constexpr int64_t kInputBlockBytes = int64_t{8} << 20;

int64_t divide_up(int64_t value, int64_t divisor) { return (value + divisor - 1) / divisor; }
int64_t round_up(int64_t value, int64_t multiple) { return divide_up(value, multiple) * multiple; }

// Portable micro-kernel: 4 rows x 16 columns over f32 panels; the compiler vectorizes the
// column loop.
void gemm_f32_4x16_portable(int64_t steps, const void* input_panel, int64_t input_row_stride,
                            const void* weight_panel, float* c, int64_t c_stride, bool accumulate,
                            const float* bias, const void* /*prefetch*/) {
  constexpr int kRows = 4;
  constexpr int kColumns = 16;
  const float* input = static_cast<const float*>(input_panel);
  const float* weight = static_cast<const float*>(weight_panel);
  float acc[kRows][kColumns];
  for (int row = 0; row < kRows; ++row) {
    for (int column = 0; column < kColumns; ++column) {
      acc[row][column] = accumulate ? c[row * c_stride + column] : (bias ? bias[column] : 0.0f);
    }
  }
  for (int64_t step = 0; step < steps; ++step) {
    const float* weight_row = weight + step * kColumns;
    for (int row = 0; row < kRows; ++row) {
      float value = input[row * input_row_stride + step];
      for (int column = 0; column < kColumns; ++column) {
        acc[row][column] += value * weight_row[column];
      }
    }
  }
  for (int row = 0; row < kRows; ++row) {
    for (int column = 0; column < kColumns; ++column) c[row * c_stride + column] = acc[row][column];
  }
}

struct GemmKernel {
  int rows;
  int columns;
  int64_t panel_depth;       // The most k values one packed panel holds.
  int64_t input_row_stride;  // Elements from one input panel row to the next.
  bool bf16_pairs;           // Panels hold bf16 k pairs (else f32).
  kernels::MicroKernel multiply;
  kernels::WeightPanelPacker pack_f32 = nullptr;  // Packs f32 panels (null: the scalar packer).
};

GemmKernel select_kernel(DType weight_dtype) {
  switch (active_isa()) {
    case Isa::avx512:
      if (weight_dtype == DType::bf16) {
        if (amx_selected()) {
          return {32, 32, kPanelDepthBf16, kInputRowStrideBf16, true,
                  kernels::gemm_bf16_32x32_amx};
        }
        return {12, 32, kPanelDepthBf16, kInputRowStrideBf16, true,
                kernels::gemm_bf16_12x32_avx512};
      }
      return {12, 32, kPanelDepthF32, kInputRowStrideF32, false, kernels::gemm_f32_12x32_avx512,
              kernels::pack_f32_columns_avx512};
    case Isa::avx2:
      return {6, 16, kPanelDepthF32, kInputRowStrideF32, false, kernels::gemm_f32_6x16_avx2,
              kernels::pack_f32_columns_avx2};
    default:
      return {4, 16, kPanelDepthF32, kInputRowStrideF32, false, gemm_f32_4x16_portable};
  }
}

// Packs kernel.rows input rows (rows_valid of them real, the rest zero) of f32 or bf16 `input`,
// k in [k_begin, k_begin + k_count), at a row stride of kernel.input_row_stride.
void pack_input_panel(const GemmKernel& kernel, const void* input, DType input_dtype,
                      int64_t input_stride, int64_t rows_valid, int64_t k_begin, int64_t k_count,
                      void* panel) {
  if (kernel.bf16_pairs) {
    int64_t padded = round_up(k_count, 2);
    for (int row = 0; row < kernel.rows; ++row) {
      uint16_t* destination = static_cast<uint16_t*>(panel) + row * kernel.input_row_stride;
      if (row >= rows_valid) {
        std::memset(destination, 0, padded * sizeof(uint16_t));
        continue;
      }
      const int64_t first = row * input_stride + k_begin;
      if (input_dtype == DType::bf16) {
        std::memcpy(destination, static_cast<const uint16_t*>(input) + first,
                    k_count * sizeof(uint16_t));
      } else {
        kernels::convert_f32_to_bf16_avx512(static_cast<const float*>(input) + first, destination,
                                            k_count);
      }
      if (padded > k_count) destination[k_count] = 0;
    }
    return;
  }
  for (int row = 0; row < kernel.rows; ++row) {
    float* destination = static_cast<float*>(panel) + row * kernel.input_row_stride;
    if (row < rows_valid) {
      std::memcpy(destination, static_cast<const float*>(input) + row * input_stride + k_begin,
                  k_count * sizeof(float));
    } else {
      std::memset(destination, 0, k_count * sizeof(float));
    }
  }
}

// Where the bytes of weight row `row` over k in [k_begin, k_begin + k_count) start, and how many.
struct RowBytes {
  const char* start;
  int64_t count;
};
RowBytes weight_row_bytes(const LinearProblem& problem, int64_t row, int64_t k_begin,
                          int64_t k_count) {
  const BlockWeight& blocks = problem.blocks;
  if (blocks.present()) {
    const auto step_bytes = static_cast<int64_t>(blocks.step_bytes);
    return {static_cast<const char*>(blocks.rows) + row * static_cast<int64_t>(blocks.row_bytes) +
                k_begin / blocks.k_step * step_bytes,
            k_count / blocks.k_step * step_bytes};
  }
  const auto element_bytes = static_cast<int64_t>(dtype_size(problem.weight_dtype));
  return {static_cast<const char*>(problem.weight) +
              (row * problem.weight_stride + k_begin) * element_bytes,
          k_count * element_bytes};
}

// Packs the weight rows [column_begin, column_begin + kernel.columns) (rows past the weight are
// zero), k in [k_begin, k_begin + k_count), transposed into the kernel's panel format. Rows in
// blocks are widened into the thread's scratch first, where the packing reads them from cache.
void pack_weight_panel(const GemmKernel& kernel, const LinearProblem& problem, int64_t column_begin,
                       int64_t k_begin, int64_t k_count, void* panel) {
  int64_t columns_valid = std::min<int64_t>(kernel.columns, problem.outputs - column_begin);
  const void* rows = nullptr;
  DType rows_dtype = problem.weight_dtype;
  int64_t rows_stride = problem.weight_stride;
  const BlockWeight& blocks = problem.blocks;
  if (blocks.present()) {
    rows_dtype = kernel.bf16_pairs ? DType::bf16 : DType::f32;
    rows_stride = k_count;
    void* widened = thread_scratch(ScratchSlot::widened_weight,
                                   kernel.columns * k_count * dtype_size(rows_dtype));
    for (int64_t column = 0; column < columns_valid; ++column) {
      const char* source = weight_row_bytes(problem, column_begin + column, k_begin, k_count).start;
      if (kernel.bf16_pairs) {
        blocks.widen_row_bf16(source, static_cast<uint16_t*>(widened) + column * k_count, k_count);
      } else {
        blocks.widen_row_f32(source, static_cast<float*>(widened) + column * k_count, k_count);
      }
    }
    rows = widened;
  } else {
    rows = static_cast<const char*>(problem.weight) +
           (column_begin * problem.weight_stride + k_begin) * dtype_size(problem.weight_dtype);
  }
  if (kernel.bf16_pairs) {
    kernels::pack_bf16_pairs_avx512(static_cast<const uint16_t*>(rows), rows_stride,
                                    columns_valid, k_count, panel);
  } else if (kernel.pack_f32) {
    kernel.pack_f32(rows, rows_dtype, rows_stride, columns_valid, k_count, panel);
  } else {
    kernels::pack_f32_columns_scalar(rows, rows_dtype, rows_stride, columns_valid, kernel.columns,
                                     0, k_count, static_cast<float*>(panel));
  }
}

// Runs the kernel on a tile that may be cut by the matrix edge, through a full-size buffer.
void multiply_edge_tile(const GemmKernel& kernel, int64_t steps, const void* input_panel,
                        int64_t input_row_stride, const void* weight_panel, float* c,
                        int64_t c_stride, int64_t rows_valid, int64_t columns_valid,
                        bool accumulate, const float* bias, const void* prefetch) {
  alignas(64) float tile[kMaxKernelRows * kMaxKernelColumns] = {};
  alignas(64) float bias_tile[kMaxKernelColumns] = {};
  if (accumulate) {
    for (int64_t row = 0; row < rows_valid; ++row) {
      std::memcpy(tile + row * kernel.columns, c + row * c_stride, columns_valid * sizeof(float));
    }
  }
  if (bias) std::memcpy(bias_tile, bias, columns_valid * sizeof(float));
  kernel.multiply(steps, input_panel, input_row_stride, weight_panel, tile, kernel.columns,
                  accumulate, bias ? bias_tile : nullptr, prefetch);
  for (int64_t row = 0; row < rows_valid; ++row) {
    std::memcpy(c + row * c_stride, tile + row * kernel.columns, columns_valid * sizeof(float));
  }
}

// Bytes of one k pair of a packed panel: 32 weight rows x 2 bf16.
constexpr int64_t kPackedPairBytes = 32 * 2 * 2;
// How far ahead of its reads the kernel prefetches a packed panel that comes from memory: 64 k
// pairs (in a prefill, 5.0 % of the GEMM time went to the first input panels instead of 6.2 %;
// 4 and 16 KiB did the same, 32 KiB less).
constexpr int64_t kFirstPanelPrefetchBytes = 8 << 10;

// The packed panel of `problem` that starts at weight row `column` (a multiple of 32).
const char* packed_panel(const LinearProblem& problem, int64_t column, int64_t panel_bytes) {
  return static_cast<const char*>(problem.packed_weight) + column / 32 * panel_bytes;
}

// One weight panel of a group: kernel-columns weight rows of one layer, from `column` on.
struct WeightPanel {
  const LinearProblem* problem;
  int64_t column;
};

// Prefetches into L2, a slice per input panel, the weight rows of `panels` over the depth block
// [k_begin, k_begin + depth) packed next, so that packing them does not wait on memory. Weights
// packed at load are not prefetched: a panel is one run of lines that the hardware streams, and
// the prefetches cost the thread that issued them more than they saved.
class WeightPrefetch {
 public:
  WeightPrefetch(const WeightPanel* panels, int64_t count, int columns, int64_t k_begin,
                 int64_t depth, int64_t slices)
      : panels_(panels), columns_(columns), k_begin_(k_begin) {
    if (count <= 0 || slices <= 0 || k_begin >= panels[0].problem->depth) return;
    k_count_ = std::min(depth, panels[0].problem->depth - k_begin);
    // The longest row of the panels' layers (rows in blocks of different types differ).
    int64_t row_bytes = 0;
    for (int64_t panel = 0; panel < count; ++panel) {
      row_bytes = std::max(row_bytes,
                           weight_row_bytes(*panels[panel].problem, 0, k_begin, k_count_).count);
    }
    row_lines_ = divide_up(row_bytes, 64);
    total_lines_ = count * columns_ * row_lines_;
    lines_per_slice_ = divide_up(total_lines_, slices);
  }

  // Walks the lines row by row (a row's lines, then the next row, then the next panel).
  void next_slice() {
    for (int64_t count = 0; count < lines_per_slice_ && line_ < total_lines_; ++count, ++line_) {
      if (line_in_row_ == 0) row_start_ = row_start(line_ / row_lines_);
      if (row_start_ != nullptr) __builtin_prefetch(row_start_ + line_in_row_ * 64, 0, 2);
      if (++line_in_row_ == row_lines_) line_in_row_ = 0;
    }
  }

 private:
  // The first byte to fetch of the row_in_group-th weight row; null past a layer's last row.
  const char* row_start(int64_t row_in_group) const {
    const WeightPanel& panel = panels_[row_in_group / columns_];
    const LinearProblem& problem = *panel.problem;
    const int64_t row = panel.column + row_in_group % columns_;
    if (row >= problem.outputs) return nullptr;
    return weight_row_bytes(problem, row, k_begin_, k_count_).start;
  }

  const WeightPanel* panels_;
  int columns_;
  int64_t k_begin_ = 0;
  int64_t k_count_ = 0;
  int64_t row_lines_ = 1;
  int64_t total_lines_ = 0;
  int64_t lines_per_slice_ = 0;
  int64_t line_ = 0;
  int64_t line_in_row_ = 0;
  const char* row_start_ = nullptr;
};

void fill_with_bias(const LinearProblem& problem) {
  for (int64_t row = 0; row < problem.rows; ++row) {
    float* output = problem.output + row * problem.output_stride;
    for (int64_t column = 0; column < problem.outputs; ++column) {
      output[column] = problem.bias ? problem.bias[column] : 0.0f;
    }
  }
}

}  // namespace

bool packs_bf16_weights() {
  return active_isa() == Isa::avx512 && packed_weights_selected();
}

int64_t packed_bf16_panel_bytes(int64_t depth) { return divide_up(depth, 2) * kPackedPairBytes; }

int64_t packed_bf16_bytes(int64_t outputs, int64_t depth) {
  return divide_up(outputs, 32) * packed_bf16_panel_bytes(depth);
}

void pack_bf16_weight(const uint16_t* weight, int64_t outputs, int64_t depth, void* packed,
                      int64_t panel_begin, int64_t panel_end) {
  if (!packs_bf16_weights()) fail("pack_bf16_weight: the active ISA does not take packed weights");
  ThreadPool::global().run(panel_end - panel_begin, 1, [&](int64_t begin, int64_t end) {
    kernels::pack_bf16_weight_avx512(weight, outputs, depth, packed, panel_begin + begin,
                                     panel_begin + end);
  });
}

void unpack_bf16_row(const void* packed, int64_t depth, int64_t row, uint16_t* out) {
  const char* lane = static_cast<const char*>(packed) + row / 32 * packed_bf16_panel_bytes(depth) +
                     row % 32 * 4;
  for (int64_t pair = 0; pair < depth / 2; ++pair) {
    std::memcpy(out + 2 * pair, lane + pair * kPackedPairBytes, 4);
  }
  if (depth % 2 != 0) std::memcpy(out + depth - 1, lane + depth / 2 * kPackedPairBytes, 2);
}

namespace {

// gated_product_rows over `rows` rows of gate and up (from their first value on) into the
// product's rows from (row, column) on.
void write_gated_product(const GatedProduct& gated, const float* gate, int64_t gate_stride,
                         const float* up, int64_t up_stride, int64_t row, int64_t column,
                         int64_t rows, int64_t columns) {
  const int64_t offset = (row * gated.stride + column) * dtype_size(gated.dtype);
  gated_product_rows(gated.activation, gate, gate_stride, up, up_stride, rows, columns,
                     static_cast<char*>(gated.output) + offset, gated.dtype == DType::bf16,
                     gated.stride);
}

// gemm_group's work, and with `gated` (over gate and up) linear_gated's.
void gemm_layers(const LinearProblem* problems, int count, const GatedProduct* gated) {
  const LinearProblem& problem = problems[0];  // Input, rows, depth and dtype of every layer.
  if (problem.rows <= 0) return;
  if (problem.depth <= 0) {
    for (int index = 0; index < count; ++index) fill_with_bias(problems[index]);
    if (gated) {
      write_gated_product(*gated, problems[0].output, problems[0].output_stride, problems[1].output,
                          problems[1].output_stride, 0, 0, problem.rows, problem.outputs);
    }
    return;
  }
  const GemmKernel kernel = select_kernel(problem.weight_dtype);
  if (problem.input_dtype != DType::f32 && !kernel.bf16_pairs) {
    fail("gemm: ", dtype_name(problem.input_dtype), " input needs the bf16 kernel");
  }
  const int64_t element_bytes = kernel.bf16_pairs ? 2 : 4;
  // Weights packed at load are the kernel's panels already (a depth block of a panel is a run of
  // its k pairs).
  const bool packed =
      kernel.bf16_pairs && std::all_of(problems, problems + count, [](const LinearProblem& each) {
        return each.packed_weight != nullptr;
      });
  const int64_t packed_panel_bytes = packed ? packed_bf16_panel_bytes(problem.depth) : 0;
  // Weights in blocks are widened a whole number of steps at a time.
  int64_t k_align = 2;
  for (int index = 0; index < count; ++index) {
    const BlockWeight& blocks = problems[index].blocks;
    if (!blocks.present()) continue;
    if (kernel.bf16_pairs ? !blocks.widen_row_bf16 : !blocks.widen_row_f32) {
      fail("gemm: weights in blocks need a widening to ", kernel.bf16_pairs ? "bf16" : "f32");
    }
    k_align = std::max(k_align, blocks.k_step);
  }

  // Depth blocks of equal length (but the last), a multiple of k_align.
  int64_t depth_blocks = divide_up(problem.depth, kernel.panel_depth);
  int64_t block_depth = round_up(divide_up(problem.depth, depth_blocks), k_align);
  while (block_depth > kernel.panel_depth) {
    block_depth = round_up(divide_up(problem.depth, ++depth_blocks), k_align);
  }
  depth_blocks = divide_up(problem.depth, block_depth);
  const int64_t input_panel_bytes = kernel.rows * kernel.input_row_stride * element_bytes;
  const int64_t weight_panel_bytes = kernel.columns * block_depth * element_bytes;

  // Row blocks of equal length whose packed input fits kInputBlockBytes.
  const int64_t panel_rows_limit =
      std::max<int64_t>(1, kInputBlockBytes / (depth_blocks * input_panel_bytes));
  const int64_t row_blocks = divide_up(divide_up(problem.rows, kernel.rows), panel_rows_limit);
  const int64_t block_rows = round_up(divide_up(problem.rows, row_blocks), kernel.rows);
  const int64_t block_panels = block_rows / kernel.rows;

  // The layers' weight panels, one after another; for a gated product, gate's and up's panels
  // in turns, so that each up panel follows the gate panel of its columns in a chunk.
  std::vector<WeightPanel> panels;
  if (gated) {
    for (int64_t column = 0; column < problem.outputs; column += kernel.columns) {
      panels.push_back({&problems[0], column});
      panels.push_back({&problems[1], column});
    }
  } else {
    for (int index = 0; index < count; ++index) {
      for (int64_t column = 0; column < problems[index].outputs; column += kernel.columns) {
        panels.push_back({&problems[index], column});
      }
    }
  }
  const int64_t column_panels = static_cast<int64_t>(panels.size());
  if (column_panels == 0) return;
  const int64_t block_column_panels = std::max<int64_t>(1, kColumnBlock / kernel.columns);
  ThreadPool& pool = ThreadPool::global();
  // Column chunks of whole panels, claimed by threads as they finish: at least four per thread
  // where the width allows, at most one packed block each; whole (gate, up) pairs when gated.
  int64_t chunk_panels =
      std::clamp<int64_t>(column_panels / (4 * pool.threads()), 1, block_column_panels);
  if (gated) chunk_panels = round_up(chunk_panels, 2);
  // With one depth block, a gated product's gate and up tiles go to a tile of the thread's and
  // never to memory.
  const bool tiles_in_scratch = gated != nullptr && depth_blocks == 1;
  const int64_t column_chunks = divide_up(column_panels, chunk_panels);
  // bf16 input rows of an even depth are read in place, all but a last, partial panel: they are
  // the panels' rows already, at the input's stride.
  const bool in_place = problem.input_dtype == DType::bf16 && problem.depth % 2 == 0 &&
                        problem.input_stride % 2 == 0 &&
                        reinterpret_cast<uintptr_t>(problem.input) % 4 == 0;
  const int64_t input_bytes = depth_blocks * (in_place ? 1 : block_panels) * input_panel_bytes;
  std::shared_ptr<Storage> scratch = Storage::allocate(input_bytes);
  char* input_pack = static_cast<char*>(scratch->data());
  const int64_t input_element_bytes = dtype_size(problem.input_dtype);
  for (int64_t row_begin = 0; row_begin < problem.rows; row_begin += block_rows) {
    const int64_t rows_here = std::min(block_rows, problem.rows - row_begin);
    const int64_t panels_here = divide_up(rows_here, kernel.rows);
    // Input panels [first_packed, panels_here) of each depth block are packed.
    const int64_t first_packed = in_place ? rows_here / kernel.rows : 0;
    const int64_t packed_here = panels_here - first_packed;
    const auto* input_rows = static_cast<const char*>(problem.input) +
                             row_begin * problem.input_stride * input_element_bytes;
    auto packed_input = [&](int64_t depth_block, int64_t panel) {
      return input_pack + (depth_block * packed_here + panel - first_packed) * input_panel_bytes;
    };
    pool.run(depth_blocks * packed_here, 1, [&](int64_t begin, int64_t end) {
      for (int64_t index = begin; index < end; ++index) {
        int64_t depth_block = index / packed_here;
        int64_t panel = first_packed + index % packed_here;
        int64_t k_begin = depth_block * block_depth;
        pack_input_panel(
            kernel, input_rows + panel * kernel.rows * problem.input_stride * input_element_bytes,
            problem.input_dtype, problem.input_stride,
            std::min<int64_t>(kernel.rows, rows_here - panel * kernel.rows), k_begin,
            std::min(block_depth, problem.depth - k_begin), packed_input(depth_block, panel));
      }
    });
    // Work items are (column chunk, row group): a part that threads claim late in the job can be
    // a few input panels of one chunk, so the thread that finishes first waits on little. Weights
    // packed here are packed once an item, so there an item is a whole chunk.
    const int64_t row_groups =
        packed ? std::clamp<int64_t>(divide_up(kItemsPerThread * pool.threads(), column_chunks),
                                     1, panels_here)
               : 1;
    pool.run_balanced(column_chunks * row_groups, 1, [&](int64_t item_begin, int64_t item_end) {
      char* weight_pack = packed ? nullptr
                                 : static_cast<char*>(thread_scratch(
                                       ScratchSlot::gemm_weight_panels,
                                       chunk_panels * weight_panel_bytes));
      float* tile_pair =
          tiles_in_scratch
              ? static_cast<float*>(thread_scratch(ScratchSlot::gemm_gated_tiles,
                                                   2 * kMaxKernelRows * kMaxKernelColumns * 4))
              : nullptr;
      const int64_t chunk_end = divide_up(item_end, row_groups);
      for (int64_t chunk = item_begin / row_groups; chunk < chunk_end; ++chunk) {
        // The input panels of this chunk that the part covers.
        const int64_t first_item = chunk * row_groups;
        const int64_t first_group = std::max(item_begin, first_item) - first_item;
        const int64_t last_group = std::min(item_end, first_item + row_groups) - first_item;
        const int64_t input_begin = panels_here * first_group / row_groups;
        const int64_t input_end = panels_here * last_group / row_groups;
        const int64_t block = chunk * chunk_panels;
        const int64_t block_end = std::min(column_panels, block + chunk_panels);
        for (int64_t depth_block = 0; depth_block < depth_blocks; ++depth_block) {
          const int64_t k_begin = depth_block * block_depth;
          const int64_t k_count = std::min(block_depth, problem.depth - k_begin);
          const int64_t steps = kernel.bf16_pairs ? divide_up(k_count, 2) : k_count;
          const bool accumulate = depth_block > 0;
          for (int64_t panel = block; panel < block_end && !packed; ++panel) {
            pack_weight_panel(kernel, *panels[panel].problem, panels[panel].column, k_begin,
                              k_count, weight_pack + (panel - block) * weight_panel_bytes);
          }
          // While this depth block runs: the next one's weights, or after the last, the first
          // depth block of the chunk this thread takes next.
          const bool last_depth = depth_block + 1 == depth_blocks;
          const int64_t next_block = last_depth ? block_end : block;
          const int64_t next_block_end =
              !last_depth ? block_end
              : chunk + 1 < chunk_end ? std::min(column_panels, block_end + chunk_panels)
                                      : next_block;
          WeightPrefetch prefetch(panels.data() + next_block, next_block_end - next_block,
                                  kernel.columns, last_depth ? 0 : k_begin + k_count, block_depth,
                                  packed ? 0 : input_end - input_begin);
          for (int64_t input_panel = input_begin; input_panel < input_end; ++input_panel) {
            prefetch.next_slice();
            const bool packed_panel_input = input_panel >= first_packed;
            const char* input_panel_data =
                packed_panel_input
                    ? packed_input(depth_block, input_panel)
                    : input_rows + (input_panel * kernel.rows * problem.input_stride + k_begin) *
                                       input_element_bytes;
            const int64_t input_row_stride =
                packed_panel_input ? kernel.input_row_stride : problem.input_stride;
            const int64_t row = row_begin + input_panel * kernel.rows;
            const int64_t rows_valid = std::min<int64_t>(kernel.rows, problem.rows - row);
            for (int64_t panel = block; panel < block_end; ++panel) {
              const LinearProblem& layer = *panels[panel].problem;
              const int64_t column = panels[panel].column;
              const int64_t columns_valid =
                  std::min<int64_t>(kernel.columns, layer.outputs - column);
              const char* packed_weight =
                  packed ? packed_panel(layer, column, packed_panel_bytes) +
                               k_begin / 2 * kPackedPairBytes
                         : weight_pack + (panel - block) * weight_panel_bytes;
              // Up's tile is the second of the pair (gate's is the first).
              const bool up_tile = gated != nullptr && (panel - block) % 2 == 1;
              float* c = tile_pair ? tile_pair + (up_tile ? kMaxKernelRows * kernel.columns : 0)
                                   : layer.output + row * layer.output_stride + column;
              const int64_t c_stride = tile_pair ? kernel.columns : layer.output_stride;
              const float* bias = !accumulate && layer.bias ? layer.bias + column : nullptr;
              // The item's first input panel reads each weight panel of the chunk from memory:
              // the kernel fetches its own panel ahead of its reads (and, near its end, the
              // start of the next, which follows it in memory).
              const char* weight_ahead = packed && input_panel == input_begin
                                             ? packed_weight + kFirstPanelPrefetchBytes
                                             : nullptr;
              if (rows_valid == kernel.rows && columns_valid == kernel.columns) {
                kernel.multiply(steps, input_panel_data, input_row_stride, packed_weight, c,
                                c_stride, accumulate, bias, weight_ahead);
              } else {
                multiply_edge_tile(kernel, steps, input_panel_data, input_row_stride,
                                   packed_weight, c, c_stride, rows_valid, columns_valid,
                                   accumulate, bias, weight_ahead);
              }
              if (up_tile && last_depth) {
                const LinearProblem& gate = problems[0];
                const float* gate_tile =
                    tile_pair ? tile_pair : gate.output + row * gate.output_stride + column;
                write_gated_product(*gated, gate_tile, tile_pair ? c_stride : gate.output_stride,
                                    c, c_stride, row, column, rows_valid, columns_valid);
              }
            }
          }
        }
      }
    });
  }
}

// Throws Error unless the layers share input, input stride, rows, depth and dtypes.
void require_shared_input(const LinearProblem* problems, int count) {
  const LinearProblem& first = problems[0];
  for (int index = 1; index < count; ++index) {
    const LinearProblem& other = problems[index];
    if (other.input != first.input || other.input_stride != first.input_stride ||
        other.rows != first.rows || other.depth != first.depth ||
        other.weight_dtype != first.weight_dtype || other.input_dtype != first.input_dtype) {
      fail("linear_group: layer ", index, " does not share the input, rows, depth and weight ",
           "dtype of layer 0");
    }
  }
}

}  // namespace

void gemm(const LinearProblem& problem) { gemm_group(&problem, 1); }

void gemm_group(const LinearProblem* problems, int count) { gemm_layers(problems, count, nullptr); }

void linear(const LinearProblem& problem) { linear_group(&problem, 1); }

void linear_group(const LinearProblem* problems, int count) {
  if (count <= 0) return;
  require_shared_input(problems, count);
  const LinearProblem& first = problems[0];
  if (first.rows <= kGemvPreferredMaxRows) {
    gemv_group(problems, count);
  } else {
    gemm_group(problems, count);
  }
}

void linear_gated(const LinearProblem& gate, const LinearProblem& up, const GatedProduct& product) {
  const LinearProblem layers[2] = {gate, up};
  require_shared_input(layers, 2);
  if (gate.outputs != up.outputs) {
    fail("linear_gated: gate has ", gate.outputs, " outputs and up ", up.outputs);
  }
  if (product.dtype != DType::f32 && product.dtype != DType::bf16) {
    fail("linear_gated: the product must be f32 or bf16, not ", dtype_name(product.dtype));
  }
  if (gate.rows > kGemvPreferredMaxRows) {
    gemm_layers(layers, 2, &product);
    return;
  }
  gemv_group(layers, 2);
  write_gated_products(gate.output, gate.output_stride, up.output, up.output_stride, gate.rows,
                       gate.outputs, product);
}

void write_gated_products(const float* gate, int64_t gate_stride, const float* up,
                          int64_t up_stride, int64_t rows, int64_t columns,
                          const GatedProduct& product) {
  ThreadPool::global().run(rows, 1, [&](int64_t begin, int64_t end) {
    write_gated_product(product, gate + begin * gate_stride, gate_stride, up + begin * up_stride,
                        up_stride, begin, 0, end - begin, columns);
  });
}

std::string gemm_kernel_name(DType weight_dtype) {
  const GemmKernel kernel = select_kernel(weight_dtype);
  return std::to_string(kernel.rows) + "x" + std::to_string(kernel.columns) +
         (kernel.bf16_pairs ? " bf16 pairs" : " f32") +
         (kernel.multiply == kernels::gemm_bf16_32x32_amx ? " on AMX tiles" : "") +
         ", panels of " +
         std::to_string(kernel.panel_depth) + " k" +
         (kernel.bf16_pairs && packs_bf16_weights() ? ", weights packed at load" : "");
}

bool linear_rounds_input_to_bf16(DType weight_dtype) {
  return weight_dtype == DType::bf16 && active_isa() == Isa::avx512;
}

bool gemm_widens_blocks_to_bf16(DType weight_dtype) {
  return select_kernel(weight_dtype).bf16_pairs;
}

}  // namespace fornace::cpu
