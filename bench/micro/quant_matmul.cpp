// quantized_linear() on the Qwen2.5-0.5B shapes beside the bf16 linear(): decode GEMV GB/s of
// weights read (1 input row, weights cycled past the last-level cache) and prefill GEMM GFLOP/s
// (512 input rows), per legacy block type; decode also with one copy of q_proj that stays in L2;
// and decode on two Qwen2.5-1.5B shapes, whose rows are whole K-quant blocks, for the K-quants too.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/block_type.h"
#include "core/dtype.h"
#include "core/storage.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "range_statistics.h"

namespace {

using fornace::BlockType;

struct Shape {
  const char* name;
  int64_t outputs;  // N
  int64_t depth;    // K
  bool decode_only = false;
};
// The tied lm_head, one 145 MB call at Q8_0, beside the layers' calls of 1-9 MB: decode only.
constexpr Shape kShapes[] = {{"q_proj", 896, 896},
                             {"gate_proj", 4864, 896},
                             {"down_proj", 896, 4864},
                             {"lm_head", 151936, 896, true},
                             {"gate_proj_1.5b", 8960, 1536, true},
                             {"down_proj_1.5b", 1536, 8960, true}};
constexpr int64_t kPrefillRows = 512;
// Decode weights cycle through copies that together exceed the last-level cache.
constexpr int64_t kDecodeFootprint = int64_t{256} << 20;

std::vector<float> random_values(int64_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(generator);
  return values;
}

// One copy of the weights in `type` (bf16 for the reference), `copies` times over.
std::vector<uint8_t> make_weights(BlockType type, const Shape& shape, int64_t copies,
                                  size_t* row_bytes) {
  const std::vector<float> values = random_values(shape.outputs * shape.depth, 1);
  *row_bytes = fornace::block_row_bytes(type, shape.depth);
  const size_t bytes = *row_bytes * shape.outputs;
  std::vector<uint8_t> weights(bytes * copies);
  if (type == BlockType::bf16) {
    for (int64_t index = 0; index < shape.outputs * shape.depth; ++index) {
      uint16_t bits = fornace::f32_to_bf16(values[index]);
      std::memcpy(weights.data() + 2 * index, &bits, 2);
    }
  } else {
    const fornace::cpu::BlockKernels& kernels = fornace::cpu::block_kernels(type);
    for (int64_t row = 0; row < shape.outputs; ++row) {
      kernels.quantize_row(values.data() + row * shape.depth, weights.data() + row * *row_bytes,
                           shape.depth);
    }
  }
  for (int64_t copy = 1; copy < copies; ++copy) {
    std::memcpy(weights.data() + copy * bytes, weights.data(), bytes);
  }
  return weights;
}

// The fields LinearProblem and QuantizedLinearProblem share, for packed rows.
template <typename Problem>
Problem shared_fields(const Shape& shape, int64_t rows, const std::vector<float>& input,
                      std::vector<float>& output, const void* weight) {
  Problem problem;
  problem.input = input.data();
  problem.input_stride = shape.depth;
  problem.rows = rows;
  problem.depth = shape.depth;
  problem.outputs = shape.outputs;
  problem.weight = weight;
  problem.output = output.data();
  problem.output_stride = shape.outputs;
  return problem;
}

void run(benchmark::State& state, const Shape& shape, int64_t rows, int threads, BlockType type,
         fornace::ActivationRounding rounding, bool cached, bool interleaved = false) {
  fornace::set_num_threads(threads);
  size_t row_bytes = 0;
  const int64_t one_copy = static_cast<int64_t>(fornace::block_row_bytes(type, shape.depth)) * shape.outputs;
  const int64_t copies =
      rows == 1 && !cached ? std::max<int64_t>(1, kDecodeFootprint / one_copy) : 1;
  std::vector<uint8_t> weights = make_weights(type, shape, copies, &row_bytes);
  if (interleaved) {
    std::vector<uint8_t> stored = weights;
    fornace::cpu::interleave_rows(type, stored.data(), weights.data(), shape.outputs * copies,
                                  shape.depth);
  }
  // In a buffer of 2 MiB pages (where the kernel offers them), as the model's packed weights.
  std::shared_ptr<fornace::Storage> placed = fornace::Storage::allocate(weights.size());
  std::memcpy(placed->data(), weights.data(), weights.size());
  const auto* weight_base = static_cast<const uint8_t*>(placed->data());
  std::vector<float> input = random_values(rows * shape.depth, 2);
  std::vector<float> output(rows * shape.outputs);
  int64_t copy = 0;
  for (auto _ : state) {
    const uint8_t* weight = weight_base + copy * one_copy;
    copy = (copy + 1) % copies;
    if (type == BlockType::bf16) {
      auto problem = shared_fields<fornace::cpu::LinearProblem>(shape, rows, input, output, weight);
      problem.weight_dtype = fornace::DType::bf16;
      problem.weight_stride = shape.depth;
      fornace::cpu::linear(problem);
    } else {
      auto problem =
          shared_fields<fornace::cpu::QuantizedLinearProblem>(shape, rows, input, output, weight);
      problem.weight_type = type;
      problem.weight_row_bytes = row_bytes;
      problem.activation_rounding = rounding;
      problem.interleaved = interleaved;
      fornace::cpu::quantized_linear(problem);
    }
    benchmark::DoNotOptimize(output.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(one_copy) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * rows * shape.outputs * shape.depth * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(fornace::cpu::isa_name(fornace::cpu::active_isa()));
  fornace::set_num_threads(0);
}

using fornace::micro::minimum;
using fornace::micro::maximum;

constexpr fornace::ActivationRounding kRoundings[] = {fornace::ActivationRounding::int8,
                                                      fornace::ActivationRounding::int8x2,
                                                      fornace::ActivationRounding::f32};

// The name suffix of a rounding other than the default int8.
std::string variant_suffix(fornace::ActivationRounding rounding) {
  switch (rounding) {
    case fornace::ActivationRounding::int8:
      return "";
    case fornace::ActivationRounding::f32:
      return "/f32-input";
    default:
      return "/int8x2";
  }
}

// Quant/<shape>/rows:<M>/threads:<T>/<type>[/f32-input|/int8x2] for M in {1, 512} (1 for the
// lm_head), T in {1, 2}, the legacy types and bf16; the f32-input and int8x2 (the rounding's
// residual rounded again) variants at decode only; Quant/q_proj/rows:1/threads:1/<type>[/int8x2]
// /cached, its weights in L2; and, where the CPU has the kernels, decode on rows interleaved as
// the model packs them: Quant/<shape>/rows:1/threads:<T>/<type>/interleaved and
// .../threads:1/<type>/interleaved/cached.
void register_run(const std::string& name, const Shape& shape, int64_t rows, int threads,
                  BlockType type, fornace::ActivationRounding rounding, bool cached,
                  bool interleaved = false) {
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    run(state, shape, rows, threads, type, rounding, cached, interleaved);
  })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond)
      ->ComputeStatistics("min", minimum)
      ->ComputeStatistics("max", maximum);
}

const bool kRegistered = [] {
  const BlockType types[] = {BlockType::bf16, BlockType::q8_0, BlockType::q4_0, BlockType::q4_1,
                             BlockType::q5_0, BlockType::q5_1, BlockType::q4_k, BlockType::q5_k,
                             BlockType::q6_k};
  for (const Shape& shape : kShapes) {
    for (int64_t rows : {int64_t{1}, kPrefillRows}) {
      if (rows > 1 && shape.decode_only) continue;
      for (int threads : {1, 2}) {
        for (BlockType type : types) {
          if (shape.depth % fornace::block_format(type).block_elements != 0) continue;
          for (fornace::ActivationRounding rounding : kRoundings) {
            if (rounding != fornace::ActivationRounding::int8 &&
                (rows > 1 || type == BlockType::bf16)) {
              continue;
            }
            std::string name = std::string("Quant/") + shape.name + "/rows:" +
                               std::to_string(rows) + "/threads:" + std::to_string(threads) + "/" +
                               fornace::block_format(type).name + variant_suffix(rounding);
            register_run(name, shape, rows, threads, type, rounding, false);
          }
        }
      }
    }
  }
  for (BlockType type : types) {
    if (kShapes[0].depth % fornace::block_format(type).block_elements != 0) continue;
    for (fornace::ActivationRounding rounding :
         {fornace::ActivationRounding::int8, fornace::ActivationRounding::int8x2}) {
      if (type == BlockType::bf16 && rounding != fornace::ActivationRounding::int8) continue;
      register_run(std::string("Quant/q_proj/rows:1/threads:1/") +
                       fornace::block_format(type).name + variant_suffix(rounding) + "/cached",
                   kShapes[0], 1, 1, type, rounding, true);
    }
  }
  for (BlockType type : types) {
    if (!fornace::cpu::has_interleaved_kernels(type, 896, fornace::cpu::active_isa())) continue;
    const std::string name = std::string("/") + fornace::block_format(type).name + "/interleaved";
    for (const Shape& shape : kShapes) {
      for (int threads : {1, 2}) {
        register_run(std::string("Quant/") + shape.name +
                         "/rows:1/threads:" + std::to_string(threads) + name,
                     shape, 1, threads, type, fornace::ActivationRounding::int8, false, true);
      }
    }
    register_run("Quant/q_proj/rows:1/threads:1" + name + "/cached", kShapes[0], 1, 1, type,
                 fornace::ActivationRounding::int8, true, true);
  }
  return true;
}();

}  // namespace
