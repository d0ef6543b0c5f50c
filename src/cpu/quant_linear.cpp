// quantized_linear() and its group form: the input rounded to activation blocks once, weight rows
// split across the thread pool, each cache-sized block of rows reused for every group of input rows.
#include <algorithm>
#include <array>
#include <limits>
#include <string>

#include "core/error.h"
#include "cpu/gemm.h"
#include "cpu/prefetch.h"
#include "cpu/quant.h"
#include "cpu/scratch.h"
#include "cpu/thread_pool.h"

namespace fornace::cpu {
namespace {

// Threads take weight rows in units of this many (the kernels' rows per pass).
constexpr int64_t kRowUnit = 4;
// Each part handed to a thread carries at least about this much work, in weight bytes times
// groups of input rows, so that small layers do not pay for a dispatch per few rows.
constexpr int64_t kMinWorkPerPart = 64 << 10;
// Weight rows per cache block: about this many bytes, which stay in L2 while every group of
// kQuantMaxColumns input rows passes over them.
constexpr int64_t kCacheBlockBytes = 192 << 10;
// Inputs of at least this many elements are quantized by all threads.
constexpr int64_t kParallelQuantizeElements = 1 << 16;

// The kernels of the problem's weight rows, as stored or interleaved.
const BlockKernels& weight_kernels(const QuantizedLinearProblem& problem) {
  return problem.interleaved ? interleaved_block_kernels(problem.weight_type, active_isa())
                             : block_kernels(problem.weight_type);
}

void check(const QuantizedLinearProblem& problem) {
  if (problem.interleaved && problem.activation_rounding == ActivationRounding::f32) {
    fail("quantized_linear: interleaved ", block_format(problem.weight_type).name,
         " rows take 8-bit activations only");
  }
  const size_t packed_row_bytes = block_row_bytes(problem.weight_type, problem.depth);
  if (problem.weight_row_bytes < packed_row_bytes) {
    fail("quantized_linear: weight rows of ", problem.weight_row_bytes, " bytes are shorter than ",
         packed_row_bytes, " bytes of ", block_format(problem.weight_type).name);
  }
  if (problem.rows > 1 && (problem.input_stride < problem.depth ||
                           problem.output_stride < problem.outputs)) {
    fail("quantized_linear: input stride ", problem.input_stride, " or output stride ",
         problem.output_stride, " shorter than a row");
  }
}

// Activation rows per input row: the rounding's, and with int8x2 its residual's.
int64_t activation_rows_per_input(ActivationRounding rounding) {
  return rounding == ActivationRounding::int8x2 ? 2 : 1;
}

// Rounds every input row to the kernels' activation blocks, into `activations`: row m to
// activation row m, or with int8x2 to rows 2m (the rounding) and 2m + 1 (what it left).
void quantize_input(const QuantizedLinearProblem& problem, const BlockKernels& kernels,
                    size_t activation_row_bytes, uint8_t* activations) {
  const bool residual = problem.activation_rounding == ActivationRounding::int8x2;
  const int64_t per_input = activation_rows_per_input(problem.activation_rounding);
  auto quantize_rows = [&](int64_t begin, int64_t end) {
    float* left = residual ? static_cast<float*>(thread_scratch(
                                 ScratchSlot::rounding_residual, problem.depth * sizeof(float)))
                           : nullptr;
    for (int64_t row = begin; row < end; ++row) {
      const float* input = static_cast<const float*>(problem.input) + row * problem.input_stride;
      uint8_t* rounded = activations + row * per_input * activation_row_bytes;
      kernels.quantize_activations(input, rounded, problem.depth);
      if (!residual) continue;
      kernels.dequantize_activations(rounded, left, problem.depth);
      for (int64_t k = 0; k < problem.depth; ++k) left[k] = input[k] - left[k];
      kernels.quantize_activations(left, rounded + activation_row_bytes, problem.depth);
    }
  };
  if (problem.rows * problem.depth >= kParallelQuantizeElements) {
    ThreadPool::global().run(problem.rows, 1, quantize_rows);
  } else {
    quantize_rows(0, problem.rows);
  }
}

// One layer of a group, ready to run: its kernels and its input (rounded, or f32).
struct PreparedLayer {
  const QuantizedLinearProblem* problem = nullptr;
  const BlockKernels* kernels = nullptr;
  const uint8_t* activations = nullptr;  // null with f32 input
  size_t activation_row_bytes = 0;
  int64_t first_unit = 0;  // The layer's row units in the group's: [first_unit, end_unit).
  int64_t end_unit = 0;
};

// Adds the bias to `rows` output rows of the weight rows [first, first + count).
void add_bias(const float* bias, int64_t first, int64_t count, float* out, int64_t out_stride,
              int64_t rows) {
  for (int64_t row = 0; row < rows; ++row) {
    float* out_row = out + row * out_stride;
    for (int64_t r = 0; r < count; ++r) out_row[r] += bias[first + r];
  }
}

// Weight rows [begin, end) of one layer: block by block, every group of input rows over each
// block, so that a cache-sized block of rows is read from memory once. With int8x2 a
// group's activation rows are its inputs' roundings and residuals in turn, whose dot products
// are summed per input.
void run_weight_rows(const PreparedLayer& layer, int64_t begin, int64_t end) {
  const QuantizedLinearProblem& problem = *layer.problem;
  const BlockKernels& kernels = *layer.kernels;
  const auto* weight = static_cast<const uint8_t*>(problem.weight);
  const int64_t weight_row_bytes = std::max<int64_t>(1, problem.weight_row_bytes);
  const int64_t block_rows = std::max<int64_t>(
      kRowUnit, kCacheBlockBytes / weight_row_bytes / kRowUnit * kRowUnit);
  const int64_t per_input =
      layer.activations ? activation_rows_per_input(problem.activation_rounding) : 1;
  const int64_t inputs_per_pass = kQuantMaxColumns / per_input;
  float* partial = per_input > 1 ? static_cast<float*>(thread_scratch(
                                       ScratchSlot::quantized_partial_sums,
                                       kQuantMaxColumns * block_rows * sizeof(float)))
                                 : nullptr;
  for (int64_t block_begin = begin; block_begin < end; block_begin += block_rows) {
    const int64_t block_end = std::min(end, block_begin + block_rows);
    const int64_t count = block_end - block_begin;
    const uint8_t* block_weight = weight + block_begin * problem.weight_row_bytes;
    for (int64_t row = 0; row < problem.rows; row += inputs_per_pass) {
      const int64_t inputs = std::min(inputs_per_pass, problem.rows - row);
      float* out = problem.output + row * problem.output_stride + block_begin;
      if (!layer.activations) {
        kernels.dot_rows_f32(block_weight, problem.weight_row_bytes, count,
                             static_cast<const float*>(problem.input) + row * problem.input_stride,
                             problem.input_stride,
                             inputs, problem.depth, out, problem.output_stride);
      } else if (per_input == 1) {
        kernels.dot_rows(block_weight, problem.weight_row_bytes, count,
                         layer.activations + row * layer.activation_row_bytes,
                         layer.activation_row_bytes, inputs, problem.depth, out,
                         problem.output_stride);
      } else {
        kernels.dot_rows(block_weight, problem.weight_row_bytes, count,
                         layer.activations + row * per_input * layer.activation_row_bytes,
                         layer.activation_row_bytes, inputs * per_input, problem.depth, partial,
                         count);
        for (int64_t input = 0; input < inputs; ++input) {
          const float* rounded = partial + per_input * input * count;
          float* out_row = out + input * problem.output_stride;
          for (int64_t r = 0; r < count; ++r) out_row[r] = rounded[r] + rounded[count + r];
        }
      }
      if (problem.bias) {
        add_bias(problem.bias, block_begin, count, out, problem.output_stride, inputs);
      }
    }
  }
}

// The weight dtype whose GEMM runs a widened prefill: f32 where the input stays f32, else bf16
// (the BF16 GEMM at AVX-512; at AVX2, BF16 weights take the f32 GEMM too).
DType widened_weight_dtype(ActivationRounding rounding) {
  return rounding == ActivationRounding::f32 ? DType::f32 : DType::bf16;
}

// Where the 8-bit kernels run a prefill faster than the widened GEMM: AVX2's Q4_0 (on the 0.5B,
// 513 tokens, 2 threads: 280 against 258 tok/s; finding 0010).
bool integer_kernels_outrun_the_gemm(const QuantizedLinearProblem& problem) {
  return problem.activation_rounding != ActivationRounding::f32 &&
         active_isa() == Isa::avx2 && problem.weight_type == BlockType::q4_0;
}

// The problem as a layer of the GEMM of widened_weight_dtype, whose weight rows it widens
// (exactly as the format defines the values; for the BF16 GEMM, then rounded to bf16, nearest
// even) as it packs each panel: a prefill of many rows repays the widening, and the GEMM's
// micro-kernel runs at the float weights' rate.
LinearProblem widened_problem(const QuantizedLinearProblem& problem) {
  const BlockFormat& format = block_format(problem.weight_type);
  // Interleaved rows widen whole quads of blocks.
  const int64_t step_blocks = problem.interleaved ? kInterleavedQuadBlocks : 1;
  LinearProblem widened;
  widened.input = problem.input;
  widened.input_dtype = problem.input_dtype;
  widened.input_stride = problem.input_stride;
  widened.rows = problem.rows;
  widened.depth = problem.depth;
  widened.outputs = problem.outputs;
  widened.weight_dtype = widened_weight_dtype(problem.activation_rounding);
  const BlockKernels& kernels = weight_kernels(problem);
  widened.blocks = {problem.weight,
                    problem.weight_row_bytes,
                    format.block_elements * step_blocks,
                    format.block_bytes * step_blocks,
                    kernels.widen_row_bf16,
                    kernels.widen_row_f32};
  widened.bias = problem.bias;
  widened.output = problem.output;
  widened.output_stride = problem.output_stride;
  return widened;
}

}  // namespace

bool quantized_linear_widens(int64_t rows) {
  return rows >= kWidenedGemmMinRows && active_isa() != Isa::portable;
}

bool quantized_linear_widens(const QuantizedLinearProblem& problem) {
  if (!quantized_linear_widens(problem.rows) || integer_kernels_outrun_the_gemm(problem)) {
    return false;
  }
  const BlockKernels& kernels = weight_kernels(problem);
  return gemm_widens_blocks_to_bf16(widened_weight_dtype(problem.activation_rounding))
             ? kernels.widen_row_bf16 != nullptr
             : kernels.widen_row_f32 != nullptr;
}

DType quantized_linear_input_dtype(int64_t rows, ActivationRounding rounding) {
  return quantized_linear_widens(rows) &&
                 linear_rounds_input_to_bf16(widened_weight_dtype(rounding))
             ? DType::bf16
             : DType::f32;
}

std::string quantized_kernel_name() {
  const StreamPrefetch prefetch = stream_prefetch(active_isa(), 0);
  std::string rows = ", " + std::to_string(kQuantMaxColumns) + " input rows a pass" +
                     (prefetch.into_l2 ? ", each row prefetched into L2 " +
                                             std::to_string(prefetch.bytes_ahead >> 10) +
                                             " KiB ahead"
                                       : "");
  const std::string interleaved =
      interleaves_quantized_rows() ? ", Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 quads interleaved at load" : "";
  switch (active_isa()) {
    case Isa::avx512:
      return "8-bit activation blocks, int8 dot (AVX-512 VNNI)" + rows + interleaved + "; from " +
             std::to_string(kWidenedGemmMinRows) +
             " rows, weights widened to bf16 panel by panel inside the bf16 GEMM (f32 activations:"
             " to f32 inside the f32 GEMM)";
    case Isa::avx2:
      return "8-bit activation blocks, int8 dot (AVX2)" + rows + interleaved + "; from " +
             std::to_string(kWidenedGemmMinRows) +
             " rows, weights widened to f32 panel by panel inside the f32 GEMM (Q4_0 with 8-bit"
             " activations keeps its int8 dot)";
    default:
      return "8-bit activation blocks, portable" + rows;
  }
}

void quantized_linear(const QuantizedLinearProblem& problem) {
  quantized_linear_group(&problem, 1);
}

void quantized_linear_gated(const QuantizedLinearProblem& gate, const QuantizedLinearProblem& up,
                            const GatedProduct& product) {
  if (gate.outputs != up.outputs) {
    fail("quantized_linear_gated: gate has ", gate.outputs, " outputs and up ", up.outputs);
  }
  if (quantized_linear_widens(gate) && quantized_linear_widens(up)) {
    linear_gated(widened_problem(gate), widened_problem(up), product);
    return;
  }
  const QuantizedLinearProblem layers[2] = {gate, up};
  quantized_linear_group(layers, 2);
  write_gated_products(gate.output, gate.output_stride, up.output, up.output_stride, gate.rows,
                       gate.outputs, product);
}

void quantized_linear_group(const QuantizedLinearProblem* problems, int count) {
  if (count <= 0 || count > kMaxQuantizedGroupLayers) {
    fail("quantized_linear_group: ", count, " layers, not 1 to ", kMaxQuantizedGroupLayers);
  }
  const QuantizedLinearProblem& first = problems[0];
  for (int index = 0; index < count; ++index) {
    const QuantizedLinearProblem& problem = problems[index];
    if (problem.input != first.input || problem.input_dtype != first.input_dtype ||
        problem.input_stride != first.input_stride ||
        problem.rows != first.rows || problem.depth != first.depth ||
        problem.activation_rounding != first.activation_rounding) {
      fail("quantized_linear_group: layer ", index,
           " does not share the input, its dtype, rows, depth and rounding of layer 0");
    }
    if (problem.rows > 0 && problem.outputs > 0) check(problem);
  }
  if (first.rows <= 0) return;
  // Prefill: one GEMM over every layer, widening their weights as it packs them.
  if (std::all_of(problems, problems + count, [](const QuantizedLinearProblem& problem) {
        return quantized_linear_widens(problem);
      })) {
    std::array<LinearProblem, kMaxQuantizedGroupLayers> widened;
    for (int index = 0; index < count; ++index) widened[index] = widened_problem(problems[index]);
    gemm_group(widened.data(), count);
    return;
  }
  if (first.input_dtype != DType::f32) {
    fail("quantized_linear_group: ", dtype_name(first.input_dtype), " input needs ",
         kWidenedGemmMinRows, " rows or more and AVX512_BF16 (the widened bf16 GEMM)");
  }

  // The input is rounded once per activation format (layers of one block type share it).
  const bool rounds_input = first.activation_rounding != ActivationRounding::f32;
  const int64_t activation_rows = first.rows * activation_rows_per_input(first.activation_rounding);
  std::array<PreparedLayer, kMaxQuantizedGroupLayers> layers;
  size_t activation_bytes = 0;
  for (int index = 0; index < count; ++index) {
    layers[index].problem = &problems[index];
    layers[index].kernels = &weight_kernels(problems[index]);
    if (rounds_input) {
      layers[index].activation_row_bytes =
          layers[index].kernels->activation_row_bytes(first.depth);
      activation_bytes += activation_rows * layers[index].activation_row_bytes;
    }
  }
  auto* activations = static_cast<uint8_t*>(
      thread_scratch(ScratchSlot::quantized_input, std::max<size_t>(1, activation_bytes)));
  int64_t units = 0;
  int64_t min_units = std::numeric_limits<int64_t>::max();
  const int64_t input_groups = (activation_rows + kQuantMaxColumns - 1) / kQuantMaxColumns;
  for (int index = 0; index < count; ++index) {
    PreparedLayer& layer = layers[index];
    if (rounds_input) {
      const auto same_format = [&](const PreparedLayer& earlier) {
        return earlier.kernels->quantize_activations == layer.kernels->quantize_activations;
      };
      const auto shared = std::find_if(layers.begin(), layers.begin() + index, same_format);
      if (shared != layers.begin() + index) {
        layer.activations = shared->activations;
      } else {
        quantize_input(first, *layer.kernels, layer.activation_row_bytes, activations);
        layer.activations = activations;
        activations += activation_rows * layer.activation_row_bytes;
      }
    }
    layer.first_unit = units;
    units += (layer.problem->outputs + kRowUnit - 1) / kRowUnit;
    layer.end_unit = units;
    const int64_t weight_row_bytes = std::max<int64_t>(1, layer.problem->weight_row_bytes);
    min_units = std::min(min_units, std::max<int64_t>(1, kMinWorkPerPart / (weight_row_bytes *
                                                                            kRowUnit * input_groups)));
  }

  // One pass of the threads over the row units of every layer, in order.
  ThreadPool::global().run_balanced(units, min_units, [&](int64_t first_unit, int64_t last_unit) {
    for (int index = 0; index < count; ++index) {
      const PreparedLayer& layer = layers[index];
      const int64_t begin = std::max(first_unit, layer.first_unit) - layer.first_unit;
      const int64_t end = std::min(last_unit, layer.end_unit) - layer.first_unit;
      if (begin >= end) continue;
      run_weight_rows(layer, begin * kRowUnit,
                      std::min(layer.problem->outputs, end * kRowUnit));
    }
  });
}

}  // namespace fornace::cpu
