// Linear-layer kernels on the Qwen2.5-0.5B shapes: GEMV GB/s (weight bytes / time) at one row and
// at 4 and 8 (batched decode steps), GEMM GFLOP/s at 513 rows, on 1 and 2 threads, beside the
// machine's register-only BF16 peak and the GEMM's micro-kernel alone on cached panels.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "cpu/gemm_kernels.h"
#include "roofs/probes.h"
#include "cpu/thread_pool.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "range_statistics.h"


namespace {

using fornace::DType;

struct Shape {
  const char* name;
  int64_t outputs;  // N
  int64_t depth;    // K
};

constexpr Shape kShapes[] = {
    {"q_proj", 896, 896},     {"k_proj", 128, 896},     {"v_proj", 128, 896},
    {"o_proj", 896, 896},     {"gate_proj", 4864, 896}, {"up_proj", 4864, 896},
    {"down_proj", 896, 4864}, {"lm_head", 151936, 896},
    // Gemma 3 270M: narrower matrices, the same prompt length.
    {"gemma3_q_proj", 1024, 640},  {"gemma3_o_proj", 640, 1024},
    {"gemma3_gate_proj", 2048, 640}, {"gemma3_down_proj", 640, 2048},
    {"gemma3_lm_head", 262144, 640},
};

// GEMV weights cycle through copies whose total exceeds the last-level cache, so each call
// reads its weight from memory as in a decode step.
constexpr int64_t kMinWeightFootprint = int64_t{256} << 20;

using fornace::micro::minimum;
using fornace::micro::maximum;

// Deterministic values in [-1, 1).
std::vector<float> pseudo_random(int64_t count, uint64_t seed) {
  std::vector<float> values(count);
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& value : values) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    value = static_cast<float>(static_cast<double>(state >> 40) / (1ull << 24) * 2.0 - 1.0);
  }
  return values;
}

// The embedding rows of a 513-token prompt (pseudo-random ids) gathered from Qwen2.5-0.5B's
// tied 151,936 x 896 bf16 table as the model keeps it, packed for the GEMM: each row is one word
// in each of 448 lines, so the gather waits on memory. Rows/s counts the ids.
void BM_PackedEmbeddingRows(benchmark::State& state) {
  constexpr int64_t kVocabulary = 151936;
  constexpr int64_t kWidth = 896;
  const int64_t rows = state.range(0);
  fornace::set_num_threads(static_cast<int>(state.range(1)));
  if (!fornace::cpu::packs_bf16_weights()) {
    state.SkipWithError("this CPU's kernels take no packed weights");
    return;
  }
  // The table's own bytes are never read: only its shape and dtype are.
  const fornace::Tensor table = fornace::Tensor::empty({kVocabulary, kWidth}, DType::bf16);
  std::shared_ptr<fornace::Storage> packed = fornace::Storage::allocate(
      static_cast<size_t>(fornace::cpu::packed_bf16_bytes(kVocabulary, kWidth)));
  std::memset(packed->data(), 0x3f, packed->bytes());  // Touched: real pages, not the zero page.
  std::vector<int32_t> ids(rows);
  uint64_t state_word = 7;
  for (int32_t& id : ids) {
    state_word = state_word * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((state_word >> 33) % kVocabulary);
  }
  const fornace::Tensor id_tensor = fornace::from_ids(ids, {1, rows});
  const fornace::Tensor output = fornace::Tensor::empty({1, rows, kWidth}, DType::f32);
  for (auto _ : state) {
    fornace::index_select_packed_into(output, table, *packed, id_tensor);
    benchmark::DoNotOptimize(output.raw());
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(rows),
                                                benchmark::Counter::kIsIterationInvariantRate);
  fornace::set_num_threads(0);
}

BENCHMARK(BM_PackedEmbeddingRows)
    ->ArgNames({"rows", "threads"})
    ->Args({513, 1})
    ->Args({513, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->ComputeStatistics("min", minimum)
    ->ComputeStatistics("max", maximum);

// How a Linear benchmark runs: see kRegistered.
struct LinearVariant {
  bool cached = false;
  bool streamed = false;
  bool packed = false;
  bool bf16_input = false;
};

void run_linear(benchmark::State& state, const Shape& shape, int64_t rows, int threads,
                DType weight_dtype, const LinearVariant& variant) {
  const auto [cached, streamed, packed, bf16_input] = variant;
  fornace::set_num_threads(threads);
  const int64_t weight_elements = shape.outputs * shape.depth;
  const int64_t weight_bytes = weight_elements * fornace::dtype_size(weight_dtype);
  const int64_t copies = (rows <= fornace::cpu::kGemvPreferredMaxRows && !cached) || streamed
                             ? std::max<int64_t>(1, kMinWeightFootprint / weight_bytes)
                             : 1;

  std::vector<float> values = pseudo_random(weight_elements, 1);
  std::vector<char> weights(copies * weight_bytes);
  if (weight_dtype == DType::bf16) {
    auto* target = reinterpret_cast<uint16_t*>(weights.data());
    for (int64_t index = 0; index < weight_elements; ++index) {
      target[index] = fornace::f32_to_bf16(values[index]);
    }
  } else {
    std::memcpy(weights.data(), values.data(), weight_bytes);
  }
  for (int64_t copy = 1; copy < copies; ++copy) {
    std::memcpy(weights.data() + copy * weight_bytes, weights.data(), weight_bytes);
  }
  // Each copy packed as a model's weights are at load (cpu/gemm.h).
  const int64_t packed_bytes =
      packed ? fornace::cpu::packed_bf16_bytes(shape.outputs, shape.depth) : 0;
  std::shared_ptr<fornace::Storage> packed_weights;
  if (packed) {
    if (!fornace::cpu::packs_bf16_weights()) {
      state.SkipWithError("this CPU's kernels take no packed weights");
      return;
    }
    packed_weights = fornace::Storage::allocate(static_cast<size_t>(copies * packed_bytes));
    for (int64_t copy = 0; copy < copies; ++copy) {
      fornace::cpu::pack_bf16_weight(
          reinterpret_cast<const uint16_t*>(weights.data() + copy * weight_bytes), shape.outputs,
          shape.depth, static_cast<char*>(packed_weights->data()) + copy * packed_bytes, 0,
          (shape.outputs + 31) / 32);
    }
  }
  std::vector<float> input = pseudo_random(rows * shape.depth, 2);
  std::vector<uint16_t> input_bf16(bf16_input ? input.size() : 0);
  for (size_t index = 0; index < input_bf16.size(); ++index) {
    input_bf16[index] = fornace::f32_to_bf16(input[index]);
  }
  std::vector<float> output(rows * shape.outputs);

  fornace::cpu::LinearProblem problem;
  problem.input = bf16_input ? static_cast<const void*>(input_bf16.data()) : input.data();
  problem.input_dtype = bf16_input ? DType::bf16 : DType::f32;
  problem.input_stride = shape.depth;
  problem.rows = rows;
  problem.depth = shape.depth;
  problem.outputs = shape.outputs;
  problem.weight_dtype = weight_dtype;
  problem.weight_stride = shape.depth;
  problem.output = output.data();
  problem.output_stride = shape.outputs;
  int64_t copy = 0;
  for (auto _ : state) {
    problem.weight = weights.data() + copy * weight_bytes;
    if (packed) {
      problem.packed_weight = static_cast<char*>(packed_weights->data()) + copy * packed_bytes;
    }
    copy = (copy + 1) % copies;
    fornace::cpu::linear(problem);
    benchmark::DoNotOptimize(output.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(weight_bytes) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * rows * weight_elements * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(fornace::cpu::isa_name(fornace::cpu::active_isa()));
  fornace::set_num_threads(0);
}

// The register-only vdpbf16ps loop of roofs/probes.h on each thread: the compute roof.
void BM_Bf16DotPeak(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  if (!fornace::roofs::has_bf16_dot()) {
    state.SkipWithError("no AVX512_BF16");
    return;
  }
  fornace::set_num_threads(threads);
  constexpr int64_t kIterations = 1 << 20;
  for (auto _ : state) {
    std::vector<float> sums(threads);
    fornace::ThreadPool::global().run(threads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t part = begin; part < end; ++part) {
        sums[part] = fornace::roofs::bf16_dot_loop(kIterations);
      }
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(threads * fornace::roofs::bf16_dot_loop_flops(kIterations) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
  fornace::set_num_threads(0);
}

BENCHMARK(BM_Bf16DotPeak)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->ComputeStatistics("min", minimum)
    ->ComputeStatistics("max", maximum);

// The bf16 GEMM micro-kernel alone, one thread, on one input panel and `panels` weight panels of
// `depth` k that stay in L1 and L2 (8 of 896 k: 458 KB, as a column chunk of a 896-deep
// projection; 8 of 1,622 k, as one of down_proj's depth blocks): its rate with no packing, no
// memory and no other thread, against BM_Bf16DotPeak/threads:1.
void BM_GemmMicroKernel(benchmark::State& state) {
  namespace kernels = fornace::cpu::kernels;
  if (!fornace::roofs::has_bf16_dot()) {
    state.SkipWithError("no AVX512_BF16");
    return;
  }
  const int64_t depth = state.range(0);
  const int64_t panels = state.range(1);
  const int64_t steps = depth / 2;
  constexpr int64_t kRows = 12, kColumns = 32;
  constexpr uint16_t kOne = 0x3f80;  // bf16 1.0
  // Storage: the kernel's aligned loads need 64-byte alignment.
  auto bf16_ones = [kOne](int64_t count) {
    std::shared_ptr<fornace::Storage> storage = fornace::Storage::allocate(count * 2);
    std::fill_n(static_cast<uint16_t*>(storage->data()), count, kOne);
    return storage;
  };
  const std::shared_ptr<fornace::Storage> input = bf16_ones(kRows * kernels::kInputRowStrideBf16);
  const std::shared_ptr<fornace::Storage> weights = bf16_ones(panels * steps * kColumns * 2);
  const auto* weight = static_cast<const uint16_t*>(weights->data());
  std::vector<float> output(kRows * kColumns * panels);
  for (auto _ : state) {
    for (int64_t panel = 0; panel < panels; ++panel) {
      kernels::gemm_bf16_12x32_avx512(steps, input->data(), kernels::kInputRowStrideBf16,
                                      weight + panel * steps * kColumns * 2,
                                      output.data() + panel * kColumns, kColumns * panels, false,
                                      nullptr, nullptr);
    }
    benchmark::DoNotOptimize(output.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kRows * kColumns * static_cast<double>(depth * panels) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_GemmMicroKernel)
    ->ArgNames({"depth", "panels"})
    ->Args({896, 1})
    ->Args({896, 8})
    ->Args({1622, 8})
    ->Unit(benchmark::kMicrosecond)
    ->ComputeStatistics("min", minimum)
    ->ComputeStatistics("max", maximum);

// Gate and up of Qwen2.5-0.5B (4,864 x 896, bf16, packed, bf16 input rows) and SiLU(gate) * up in
// bf16, as a prefill's MLP runs them: /separate is linear_group, then the product in a pass of
// its own over both outputs on the pool (what the op did before linear_gated); /fused is
// linear_gated. GFLOP/s counts the two GEMMs.
void BM_GateUpProduct(benchmark::State& state, bool fused) {
  namespace cpu = fornace::cpu;
  constexpr int64_t kOutputs = 4864;
  constexpr int64_t kDepth = 896;
  const int64_t rows = state.range(0);
  if (!cpu::packs_bf16_weights()) {
    state.SkipWithError("this CPU's kernels take no packed weights");
    return;
  }
  std::vector<uint16_t> weights[2];
  std::shared_ptr<fornace::Storage> packed[2];
  std::vector<float> outputs[2];
  cpu::LinearProblem problems[2];
  std::vector<uint16_t> input(rows * kDepth);
  std::vector<float> input_values = pseudo_random(rows * kDepth, 3);
  for (size_t index = 0; index < input.size(); ++index) {
    input[index] = fornace::f32_to_bf16(input_values[index]);
  }
  for (int layer = 0; layer < 2; ++layer) {
    std::vector<float> values = pseudo_random(kOutputs * kDepth, 4 + layer);
    weights[layer].resize(values.size());
    for (size_t index = 0; index < values.size(); ++index) {
      weights[layer][index] = fornace::f32_to_bf16(values[index] * 0.05f);
    }
    packed[layer] =
        fornace::Storage::allocate(static_cast<size_t>(cpu::packed_bf16_bytes(kOutputs, kDepth)));
    cpu::pack_bf16_weight(weights[layer].data(), kOutputs, kDepth, packed[layer]->data(), 0,
                          kOutputs / 32);
    outputs[layer].resize(rows * kOutputs);
    cpu::LinearProblem& problem = problems[layer];
    problem.input = input.data();
    problem.input_dtype = DType::bf16;
    problem.input_stride = kDepth;
    problem.rows = rows;
    problem.depth = kDepth;
    problem.outputs = kOutputs;
    problem.weight = weights[layer].data();
    problem.weight_dtype = DType::bf16;
    problem.weight_stride = kDepth;
    problem.output = outputs[layer].data();
    problem.output_stride = kOutputs;
    problem.packed_weight = packed[layer]->data();
  }
  std::vector<uint16_t> product(rows * kOutputs);
  const cpu::GatedProduct gated{cpu::GateActivation::silu, product.data(), DType::bf16, kOutputs};
  for (auto _ : state) {
    if (fused) {
      cpu::linear_gated(problems[0], problems[1], gated);
    } else {
      cpu::linear_group(problems, 2);
      fornace::ThreadPool::global().run(rows, 1, [&](int64_t begin, int64_t end) {
        cpu::gated_product_rows(cpu::GateActivation::silu, outputs[0].data() + begin * kOutputs,
                                kOutputs, outputs[1].data() + begin * kOutputs, kOutputs,
                                end - begin, kOutputs, product.data() + begin * kOutputs, true,
                                kOutputs);
      });
    }
    benchmark::DoNotOptimize(product.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * rows * kOutputs * kDepth * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_GateUpProduct, separate, false)
    ->Arg(513)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->ComputeStatistics("min", minimum)
    ->ComputeStatistics("max", maximum);
BENCHMARK_CAPTURE(BM_GateUpProduct, fused, true)
    ->Arg(513)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond)
    ->ComputeStatistics("min", minimum)
    ->ComputeStatistics("max", maximum);

// Registers one Linear benchmark.
void register_linear(const Shape& shape, int64_t rows, int threads, DType dtype,
                     const std::string& variant, bool packed, bool bf16_input = false) {
  const LinearVariant how{variant == "/cached", variant == "/streamed", packed, bf16_input};
  std::string name = std::string("Linear/") + shape.name + "/rows:" + std::to_string(rows) +
                     "/threads:" + std::to_string(threads) + "/" + fornace::dtype_name(dtype) +
                     variant + (packed ? "/packed" : "") + (bf16_input ? "/bf16-input" : "");
  benchmark::RegisterBenchmark(name.c_str(),
                               [=](benchmark::State& state) {
                                 run_linear(state, shape, rows, threads, dtype, how);
                               })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond)
      ->ComputeStatistics("min", minimum)
      ->ComputeStatistics("max", maximum);
}

// Registers Linear/<shape>/rows:<M>/threads:<T>/<dtype> for every shape, M in {1, 4, 8, 513}
// (lm_head not at 513: prefill needs it at the last position only), T in {1, 2}; bf16 weights,
// plus f32 weights for gate_proj; q_proj's GEMVs on one copy of the weights, which stays in the
// caches (/cached: the kernels' arithmetic rate, memory aside); and the GEMMs on weights cycled
// past the last-level cache (/streamed: as a prefill reads them, once, from memory). Each bf16
// one also as /packed: the weights packed as a model's are at load (cpu/gemm.h); and the packed
// ones also as /bf16-input: the input rows in bf16, as a bf16 model's layers hand them on.
const bool kRegistered = [] {
  for (const Shape& shape : kShapes) {
    for (int64_t rows : {int64_t{1}, int64_t{4}, int64_t{8}, int64_t{513}}) {
      if (rows > fornace::cpu::kGemvPreferredMaxRows && shape.outputs > 100000) continue;
      const bool gemv = rows <= fornace::cpu::kGemvPreferredMaxRows;
      const bool gemma = std::string(shape.name).rfind("gemma3_", 0) == 0;
      if (gemma && gemv && rows > 1) continue;
      for (int threads : {1, 2}) {
        std::vector<DType> dtypes = {DType::bf16};
        if (std::string(shape.name) == "gate_proj") dtypes.push_back(DType::f32);
        for (DType dtype : dtypes) {
          for (std::string variant : {"", "/cached", "/streamed"}) {
            if (variant == "/cached" && !(gemv && std::string(shape.name) == "q_proj")) continue;
            if (variant == "/streamed" && (gemv || dtype != DType::bf16)) continue;
            register_linear(shape, rows, threads, dtype, variant, false);
            if (dtype != DType::bf16) continue;
            register_linear(shape, rows, threads, dtype, variant, true);
            register_linear(shape, rows, threads, dtype, variant, true, true);
          }
        }
      }
    }
  }
  return true;
}();

}  // namespace
