// The GEMV driver (ISA choice, bf16 input rounding, row split across threads) and its portable
// kernel.
#include <algorithm>

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

void gemv(const LinearProblem& problem) {
  if (problem.rows <= 0 || problem.outputs <= 0) return;
  kernels::GemvKernel kernel = gemv_portable;
  const void* input = problem.input;
  int64_t input_stride = problem.input_stride;
  switch (active_isa()) {
    case Isa::avx512:
      kernel = kernels::gemv_f32_avx512;
      if (problem.weight_dtype == DType::bf16) {
        kernel = kernels::gemv_bf16_dot_avx512;
        // Round the input to bf16 once per call.
        input_stride =
            std::max<int64_t>(kBf16RowAlignment, (problem.depth + kBf16RowAlignment - 1) /
                                                     kBf16RowAlignment * kBf16RowAlignment);
        auto* rounded =
            static_cast<uint16_t*>(thread_scratch(ScratchSlot::gemv_input, problem.rows * input_stride * sizeof(uint16_t)));
        for (int64_t row = 0; row < problem.rows; ++row) {
          kernels::convert_f32_to_bf16_avx512(problem.input + row * problem.input_stride,
                                              rounded + row * input_stride, problem.depth);
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
  const int64_t input_element_bytes = input == problem.input ? 4 : 2;
  const int64_t row_bytes = std::max<int64_t>(1, problem.depth * dtype_size(problem.weight_dtype));
  const int64_t grain = std::max<int64_t>(4, kMinBytesPerPart / row_bytes);
  // Weight rows per block: about 128 KiB, so a block read for the first group of input rows is
  // still in L2 for the next groups.
  const int64_t block = std::max<int64_t>(16, (int64_t{128} << 10) / row_bytes);
  // About eight parts per thread, claimed as threads finish, so that a thread slowed by the
  // other's memory traffic or by the OS takes fewer; each part at least `grain` rows.
  ThreadPool& pool = ThreadPool::global();
  const int64_t chunk = std::max(grain, problem.outputs / (8 * pool.threads()));
  pool.run_balanced(problem.outputs, chunk, [&](int64_t first, int64_t last) {
    for (int64_t begin = first; begin < last; begin += block) {
      int64_t end = std::min(last, begin + block);
      for (int64_t row = 0; row < problem.rows; row += kGemvMaxRows) {
        GemvArguments arguments{
            static_cast<const char*>(input) + row * input_stride * input_element_bytes,
            input_stride,
            static_cast<int>(std::min<int64_t>(kGemvMaxRows, problem.rows - row)),
            problem.depth,
            problem.weight,
            problem.weight_dtype,
            problem.weight_stride,
            problem.bias,
            problem.output + row * problem.output_stride,
            problem.output_stride};
        kernel(arguments, begin, end);
      }
    }
  });
}

}  // namespace fornace::cpu
