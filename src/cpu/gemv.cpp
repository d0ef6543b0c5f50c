// The GEMV driver (ISA choice, bf16 input rounding, row split across threads) and its portable
// kernel.
#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "cpu/gemm_kernels.h"
#include "cpu/scratch.h"
#include "cpu/thread_pool.h"

namespace fornace::cpu {
namespace {

using kernels::GemvArguments;

// Each thread gets at least this many weight bytes, so small GEMVs do not pay for a dispatch.
constexpr int64_t kMinBytesPerPart = 64 << 10;
// bf16 input rows are padded to this many elements (one zmm of bf16).
constexpr int64_t kBf16RowAlignment = 32;

template <typename Element, typename Convert>
void gemv_portable_typed(const GemvArguments& arguments, int64_t begin, int64_t end,
                         Convert convert) {
  constexpr int kLanes = 8;
  const float* input = static_cast<const float*>(arguments.input);
  const Element* weight = static_cast<const Element*>(arguments.weight);
  for (int64_t column = begin; column < end; ++column) {
    const Element* weight_row = weight + column * arguments.weight_stride;
    for (int row = 0; row < arguments.rows; ++row) {
      const float* input_row = input + row * arguments.input_stride;
      float partial[kLanes] = {};
      int64_t k = 0;
      for (; k + kLanes <= arguments.depth; k += kLanes) {
        for (int lane = 0; lane < kLanes; ++lane) {
          partial[lane] += input_row[k + lane] * convert(weight_row[k + lane]);
        }
      }
      for (; k < arguments.depth; ++k) partial[k % kLanes] += input_row[k] * convert(weight_row[k]);
      float sum = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
                  ((partial[4] + partial[5]) + (partial[6] + partial[7]));
      if (arguments.bias) sum += arguments.bias[column];
      arguments.output[row * arguments.output_stride + column] = sum;
    }
  }
}

void gemv_portable(const GemvArguments& arguments, int64_t begin, int64_t end) {
  switch (arguments.weight_dtype) {
    case DType::bf16:
      return gemv_portable_typed<uint16_t>(arguments, begin, end, bf16_to_f32);
    case DType::f16:
      return gemv_portable_typed<uint16_t>(arguments, begin, end, f16_to_f32);
    default:
      return gemv_portable_typed<float>(arguments, begin, end, [](float value) { return value; });
  }
}

}  // namespace

void gemv(const LinearProblem& problem) { gemv_group(&problem, 1); }

void gemv_group(const LinearProblem* problems, int count) {
  const LinearProblem& first_problem = problems[0];
  int64_t total_outputs = 0;
  for (int index = 0; index < count; ++index) {
    if (problems[index].blocks.present()) fail("gemv: weights in blocks run on the GEMM only");
    total_outputs += problems[index].outputs;
  }
  if (first_problem.rows <= 0 || total_outputs <= 0) return;
  const bool packed =
      std::all_of(problems, problems + count,
                  [](const LinearProblem& each) { return each.packed_weight != nullptr; });
  kernels::GemvKernel kernel = gemv_portable;
  const void* input = first_problem.input;
  int64_t input_stride = first_problem.input_stride;
  switch (active_isa()) {
    case Isa::avx512:
      kernel = kernels::gemv_f32_avx512;
      if (first_problem.weight_dtype == DType::bf16) {
        kernel = packed ? kernels::gemv_bf16_panels_avx512 : kernels::gemv_bf16_dot_avx512;
        // Round the input to bf16 once per call, for every layer of the group.
        input_stride =
            std::max<int64_t>(kBf16RowAlignment, (first_problem.depth + kBf16RowAlignment - 1) /
                                                     kBf16RowAlignment * kBf16RowAlignment);
        auto* rounded = static_cast<uint16_t*>(thread_scratch(
            ScratchSlot::gemv_input, first_problem.rows * input_stride * sizeof(uint16_t)));
        for (int64_t row = 0; row < first_problem.rows; ++row) {
          const int64_t first = row * first_problem.input_stride;
          if (first_problem.input_dtype == DType::bf16) {
            std::memcpy(rounded + row * input_stride,
                        static_cast<const uint16_t*>(first_problem.input) + first,
                        first_problem.depth * sizeof(uint16_t));
          } else {
            kernels::convert_f32_to_bf16_avx512(static_cast<const float*>(first_problem.input) +
                                                    first,
                                                rounded + row * input_stride, first_problem.depth);
          }
          // An odd depth's last k pairs with zero (the packed weight's is zero too).
          if (first_problem.depth % 2) rounded[row * input_stride + first_problem.depth] = 0;
        }
        input = rounded;
      }
      break;
    case Isa::avx2:
      kernel = kernels::gemv_f32_avx2;
      break;
    default:
      break;
  }
  if (input == first_problem.input && first_problem.input_dtype != DType::f32) {
    fail("gemv: ", dtype_name(first_problem.input_dtype), " input needs bf16 weights and ",
         "AVX512_BF16");
  }
  const int64_t input_element_bytes = input == first_problem.input ? 4 : 2;
  const int64_t row_bytes =
      std::max<int64_t>(1, first_problem.depth * dtype_size(first_problem.weight_dtype));
  // Packed weights split between threads on panels of 32 rows.
  const bool by_panels = kernel == kernels::gemv_bf16_panels_avx512;
  const int64_t unit = by_panels ? 32 : 1;
  const int64_t grain = std::max<int64_t>(4, kMinBytesPerPart / row_bytes);
  // The AVX-512 BF16 kernels take up to eight rows per pass (the one over stored rows splits
  // deep rows into segments whose input fits L1); the others four.
  const int64_t rows_per_pass =
      kernel == kernels::gemv_bf16_dot_avx512 || by_panels ? kGemvBf16DotMaxRows : kGemvMaxRows;
  // With more rows than one pass takes, weight rows go in blocks of about 128 KiB, so that a
  // block read for the first group of input rows is still in L2 for the next groups.
  const int64_t block = first_problem.rows <= rows_per_pass
                            ? total_outputs
                            : std::max<int64_t>(std::max<int64_t>(16, unit),
                                                (int64_t{128} << 10) / row_bytes / unit * unit);
  // Runs weight rows [begin, end) of one layer.
  auto run_rows = [&](const LinearProblem& problem, int64_t begin, int64_t end) {
    for (int64_t block_begin = begin; block_begin < end; block_begin += block) {
      int64_t block_end = std::min(end, block_begin + block);
      for (int64_t row = 0; row < problem.rows; row += rows_per_pass) {
        GemvArguments arguments{
            static_cast<const char*>(input) + row * input_stride * input_element_bytes,
            input_stride,
            static_cast<int>(std::min<int64_t>(rows_per_pass, problem.rows - row)),
            problem.depth,
            by_panels ? problem.packed_weight : problem.weight,
            problem.weight_dtype,
            problem.weight_stride,
            problem.bias,
            problem.output + row * problem.output_stride,
            problem.output_stride};
        kernel(arguments, block_begin, block_end);
      }
    }
  };
  // The layers' weight rows numbered one after another, in guided parts down to `grain` rows,
  // claimed as threads finish: a thread slowed by the other's memory traffic or by the OS takes
  // fewer, and the last parts are small.
  // Packed weights are numbered in panels the same way.
  int64_t total_units = 0;
  for (int index = 0; index < count; ++index) {
    total_units += (problems[index].outputs + unit - 1) / unit;
  }
  ThreadPool::global().run_balanced(
      total_units, std::max<int64_t>(1, grain / unit), [&](int64_t first, int64_t last) {
        int64_t offset = 0;
        for (int index = 0; index < count && offset < last; ++index) {
          const LinearProblem& problem = problems[index];
          const int64_t units = (problem.outputs + unit - 1) / unit;
          int64_t begin = std::max(first, offset);
          int64_t end = std::min(last, offset + units);
          if (begin < end) {
            run_rows(problem, (begin - offset) * unit,
                     std::min(problem.outputs, (end - offset) * unit));
          }
          offset += units;
        }
      });
}

std::string gemv_kernel_name(DType weight_dtype) {
  switch (active_isa()) {
    case Isa::avx512:
      if (weight_dtype == DType::bf16 && packs_bf16_weights()) {
        return "bf16 dot over the packed weights, 1-" + std::to_string(kGemvBf16DotMaxRows) +
               " rows a pass";
      }
      if (weight_dtype == DType::bf16) {
        return "bf16 dot, 1 row a weight row at a time, 2-" + std::to_string(kGemvBf16DotMaxRows) +
               " rows in " + kernels::gemv_bf16_dot_avx512_tiles();
      }
      return "f32 FMA (AVX-512), " + std::to_string(kGemvMaxRows) + " rows a pass";
    case Isa::avx2:
      return "f32 FMA (AVX2), " + std::to_string(kGemvMaxRows) + " rows a pass";
    default:
      return "portable f32, " + std::to_string(kGemvMaxRows) + " rows a pass";
  }
}

}  // namespace fornace::cpu
