// quantized_linear() and quantized_linear_group() against a double-precision loop over the
// widened weights, for every block type with kernels, on every ISA, several thread counts,
// strides, biases and row counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/block_type.h"
#include "core/dtype.h"
#include "core/error.h"
#include "cpu/quant.h"
#include "cpu/quant_test_support.h"
#include "cpu/thread_pool.h"

namespace fornace {
namespace {

constexpr ActivationRounding kRoundings[] = {ActivationRounding::int8, ActivationRounding::int8x2,
                                             ActivationRounding::f32};

using quant_test::supported_isas;

// Every quantized type whose kernels exist and can write weights (the K-quant kernels may not
// have landed yet).
std::vector<BlockType> types_with_kernels() {
  std::vector<BlockType> types;
  for (BlockType type : {BlockType::q4_0, BlockType::q4_1, BlockType::q5_0, BlockType::q5_1,
                         BlockType::q8_0, BlockType::q4_k, BlockType::q5_k, BlockType::q6_k}) {
    try {
      if (cpu::block_kernels(type, cpu::Isa::portable).quantize_row) types.push_back(type);
    } catch (const Error&) {
    }
  }
  return types;
}

struct Layer {
  BlockType type;
  int64_t depth;
  int64_t outputs;
  size_t row_bytes;  // padded past the packed row, as a strided view would be
  std::vector<uint8_t> weight;
  std::vector<double> widened;  // [outputs, depth]
  std::vector<float> bias;
};

Layer make_layer(BlockType type, int64_t depth, int64_t outputs) {
  Layer layer{type, depth, outputs, block_row_bytes(type, depth) + 8, {}, {}, {}};
  const cpu::BlockKernels& kernels = cpu::block_kernels(type, cpu::Isa::portable);
  std::vector<float> values = quant_test::uniform(outputs * depth, -1.0f, 1.0f, depth + outputs);
  layer.weight.resize(outputs * layer.row_bytes);
  layer.widened.resize(outputs * depth);
  std::vector<float> row(depth);
  for (int64_t r = 0; r < outputs; ++r) {
    uint8_t* blocks = layer.weight.data() + r * layer.row_bytes;
    kernels.quantize_row(values.data() + r * depth, blocks, depth);
    kernels.dequantize_row(blocks, row.data(), depth);
    for (int64_t k = 0; k < depth; ++k) layer.widened[r * depth + k] = row[k];
  }
  layer.bias = quant_test::uniform(outputs, -0.5f, 0.5f, 3);
  return layer;
}

// The problem of `layer` over `rows` input rows `input_stride` apart, into rows of `output`
// `output_stride` apart.
cpu::QuantizedLinearProblem problem_of(const Layer& layer, const std::vector<float>& input,
                                       int64_t input_stride, int64_t rows,
                                       std::vector<float>& output, int64_t output_stride,
                                       ActivationRounding rounding, bool with_bias) {
  cpu::QuantizedLinearProblem problem;
  problem.input = input.data();
  problem.input_stride = input_stride;
  problem.rows = rows;
  problem.depth = layer.depth;
  problem.outputs = layer.outputs;
  problem.weight = layer.weight.data();
  problem.weight_type = layer.type;
  problem.weight_row_bytes = layer.row_bytes;
  problem.bias = with_bias ? layer.bias.data() : nullptr;
  problem.output = output.data();
  problem.output_stride = output_stride;
  problem.activation_rounding = rounding;
  return problem;
}

// What `problem` (of `layer`) wrote, against the double loop over the widened weights.
void expect_double_loop(const Layer& layer, const cpu::QuantizedLinearProblem& problem,
                        const std::string& where) {
  const bool widened = cpu::quantized_linear_widens(problem);
  const bool widened_to_bf16 =
      widened && cpu::quantized_linear_input_dtype(problem.rows, problem.activation_rounding) ==
                     DType::bf16;
  const int64_t block = block_format(layer.type).block_elements;
  for (int64_t m = 0; m < problem.rows; ++m) {
    const float* x = static_cast<const float*>(problem.input) + m * problem.input_stride;
    const float* out = problem.output + m * problem.output_stride;
    for (int64_t r = 0; r < layer.outputs; ++r) {
      const double* w = layer.widened.data() + r * layer.depth;
      double exact = problem.bias ? problem.bias[r] : 0.0;
      double magnitude = problem.bias ? std::fabs(problem.bias[r]) : 0.0;
      for (int64_t k = 0; k < layer.depth; ++k) {
        exact += w[k] * x[k];
        magnitude += std::fabs(w[k] * x[k]);
      }
      // f32 accumulation; with 8-bit activations, plus their rounding bound over the
      // activation blocks (taken as long as the weight's blocks), 254 times smaller with the
      // residual rounded again; where the weights and the input are rounded to bf16 for the
      // GEMM instead, 2^-8 relative each at most; where the f32 GEMM takes them, nothing more.
      double allowed = 2e-6 * magnitude;
      if (widened_to_bf16) {
        allowed += std::ldexp(1.0, -7) * magnitude;
      } else if (widened) {
      } else if (problem.activation_rounding == ActivationRounding::int8) {
        allowed += quant_test::activation_rounding_bound(w, x, layer.depth, block);
      } else if (problem.activation_rounding == ActivationRounding::int8x2) {
        allowed += quant_test::activation_rounding_bound(w, x, layer.depth, block) / 254.0;
      }
      ASSERT_NEAR(out[r], exact, allowed) << where << ", input row " << m << ", output " << r;
    }
    for (int64_t gap = layer.outputs; gap < problem.output_stride; ++gap) {
      ASSERT_TRUE(std::isnan(out[gap])) << where << ": wrote past a row";
    }
  }
}

void check_layer(const Layer& layer, int64_t rows, ActivationRounding rounding, bool with_bias,
                 const std::string& where) {
  const int64_t input_stride = layer.depth + 5;
  const int64_t output_stride = layer.outputs + 3;
  std::vector<float> input = quant_test::uniform(rows * input_stride, -2.0f, 2.0f, rows);
  std::vector<float> output(rows * output_stride, NAN);
  const cpu::QuantizedLinearProblem problem =
      problem_of(layer, input, input_stride, rows, output, output_stride, rounding, with_bias);
  cpu::quantized_linear(problem);
  expect_double_loop(layer, problem, where);
}

// The bf16 widening that prefill's GEMM reads: each value as dequantize_row gives it (the
// double loop's weights), rounded to bf16 (within half a bf16 step: 2^-8 relative at most).
TEST(QuantizedLinear, WidenedRowsAreTheValuesInBf16) {
  for (BlockType type : types_with_kernels()) {
    const Layer layer = make_layer(type, 3 * block_format(type).block_elements, 5);
    for (cpu::Isa isa : supported_isas()) {
      const cpu::BlockKernels& kernels = cpu::block_kernels(type, isa);
      if (kernels.widen_row_bf16 == nullptr) continue;
      std::vector<uint16_t> widened(layer.depth);
      for (int64_t r = 0; r < layer.outputs; ++r) {
        kernels.widen_row_bf16(layer.weight.data() + r * layer.row_bytes, widened.data(),
                               layer.depth);
        for (int64_t k = 0; k < layer.depth; ++k) {
          const double exact = layer.widened[r * layer.depth + k];
          ASSERT_NEAR(bf16_to_f32(widened[k]), exact, std::ldexp(std::fabs(exact), -8))
              << block_format(type).name << " on " << cpu::isa_name(isa) << ", row " << r
              << ", element " << k;
        }
      }
    }
  }
}

// The f32 widening that prefill's f32 GEMM reads: dequantize_row's values bit for bit, from
// stored rows and from interleaved rows.
TEST(QuantizedLinear, WidenedRowsAreTheValuesInF32) {
  int checked = 0;
  for (BlockType type : types_with_kernels()) {
    const int64_t depth = 8 * block_format(type).block_elements;
    const Layer layer = make_layer(type, depth, 5);
    const size_t row_bytes = block_row_bytes(type, depth);
    std::vector<uint8_t> stored(layer.outputs * row_bytes);
    for (int64_t r = 0; r < layer.outputs; ++r) {
      std::memcpy(stored.data() + r * row_bytes, layer.weight.data() + r * layer.row_bytes,
                  row_bytes);
    }
    for (cpu::Isa isa : supported_isas()) {
      std::vector<std::pair<const cpu::BlockKernels*, std::vector<uint8_t>>> layouts;
      layouts.emplace_back(&cpu::block_kernels(type, isa), stored);
      if (cpu::has_interleaved_kernels(type, depth, isa)) {
        cpu::set_isa(isa);
        std::vector<uint8_t> interleaved(stored.size());
        cpu::interleave_rows(type, stored.data(), interleaved.data(), layer.outputs, depth);
        layouts.emplace_back(&cpu::interleaved_block_kernels(type, isa), interleaved);
      }
      for (const auto& [kernels, rows] : layouts) {
        if (kernels->widen_row_f32 == nullptr) continue;
        ++checked;
        std::vector<float> widened(depth);
        for (int64_t r = 0; r < layer.outputs; ++r) {
          kernels->widen_row_f32(rows.data() + r * row_bytes, widened.data(), depth);
          for (int64_t k = 0; k < depth; ++k) {
            ASSERT_EQ(widened[k], static_cast<float>(layer.widened[r * depth + k]))
                << block_format(type).name << " on " << cpu::isa_name(isa)
                << (kernels == layouts.front().first ? "" : ", interleaved") << ", row " << r
                << ", element " << k;
          }
        }
      }
    }
  }
  cpu::reset_isa();
  // AVX2 and AVX-512 widen every type stored, and the 5 legacy types interleaved.
  int expected = 0;
  for (cpu::Isa isa : supported_isas()) {
    if (isa != cpu::Isa::portable) expected += static_cast<int>(types_with_kernels().size()) + 5;
  }
  EXPECT_EQ(checked, expected);
}

TEST(QuantizedLinear, MatchesADoubleLoop) {
  for (BlockType type : types_with_kernels()) {
    const int64_t block = block_format(type).block_elements;
    // An odd block count and odd output count; then enough rows for several cache blocks.
    std::vector<Layer> layers;
    layers.push_back(make_layer(type, 3 * block, 37));
    layers.push_back(make_layer(type, block == 32 ? 896 : 4 * block, 1027));
    for (cpu::Isa isa : supported_isas()) {
      cpu::set_isa(isa);
      for (const Layer& layer : layers) {
        for (int threads : {1, 2, 3}) {
          set_num_threads(threads);
          for (int64_t rows : {1, 3, 4, 5, 17, 64}) {
            if (layer.outputs > 100 && rows > 17) continue;  // the double loop's cost
            for (ActivationRounding rounding : kRoundings) {
              const bool with_bias = (rows + threads) % 2 == 1;
              check_layer(
                  layer, rows, rounding, with_bias,
                  std::string(block_format(type).name) + " on " + cpu::isa_name(isa) + ", " +
                      std::to_string(layer.depth) + " -> " + std::to_string(layer.outputs) + ", " +
                      std::to_string(threads) + " threads, " + std::to_string(rows) + " rows, " +
                      activation_rounding_name(rounding) + " input" + (with_bias ? ", bias" : ""));
            }
          }
        }
      }
    }
  }
  cpu::reset_isa();
  set_num_threads(0);
}

// Layers of different block types over one input in one pass (Q, K and V of a Q4_K_M file): the
// first and last share an activation format, the K-quant has its own; each layer's outputs
// against its double loop, on every ISA, for decode's rows and prefill's widened GEMM.
TEST(QuantizedLinear, GroupsOfLayersOverOneInputMatchTheirDoubleLoops) {
  const int64_t depth = 512;
  std::vector<Layer> layers;
  layers.push_back(make_layer(BlockType::q5_0, depth, 37));
  layers.push_back(make_layer(BlockType::q8_0, depth, 64));
  layers.push_back(make_layer(BlockType::q4_k, depth, 29));
  layers.push_back(make_layer(BlockType::q5_0, depth, 103));
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{6}, cpu::kWidenedGemmMinRows + 1}) {
        for (ActivationRounding rounding : kRoundings) {
          const int64_t input_stride = depth + 3;
          std::vector<float> input = quant_test::uniform(rows * input_stride, -2.0f, 2.0f, rows);
          std::vector<std::vector<float>> outputs;
          outputs.reserve(layers.size());  // The problems point into them.
          std::vector<cpu::QuantizedLinearProblem> problems;
          for (const Layer& layer : layers) {
            outputs.emplace_back(rows * (layer.outputs + 2), NAN);
            problems.push_back(problem_of(layer, input, input_stride, rows, outputs.back(),
                                          layer.outputs + 2, rounding, layer.outputs % 2 == 1));
          }
          cpu::quantized_linear_group(problems.data(), static_cast<int>(problems.size()));
          for (size_t index = 0; index < layers.size(); ++index) {
            expect_double_loop(layers[index], problems[index],
                               std::string("layer ") + std::to_string(index) + " (" +
                                   block_format(layers[index].type).name + ") on " +
                                   cpu::isa_name(isa) + ", " + std::to_string(threads) +
                                   " threads, " + std::to_string(rows) + " rows, " +
                                   activation_rounding_name(rounding) + " input");
          }
        }
      }
    }
  }
  cpu::reset_isa();
  set_num_threads(0);
}

TEST(QuantizedLinear, GroupsRefuseLayersThatDoNotShareTheInput) {
  const Layer first = make_layer(BlockType::q8_0, 64, 4);
  const Layer second = make_layer(BlockType::q4_0, 64, 4);
  std::vector<float> input(2 * 64, 1.0f);
  std::vector<float> first_output(2 * 4);
  std::vector<float> second_output(2 * 4);
  cpu::QuantizedLinearProblem problems[2] = {
      problem_of(first, input, 64, 2, first_output, 4, ActivationRounding::int8, false),
      problem_of(second, input, 64, 2, second_output, 4, ActivationRounding::int8, false)};
  problems[1].rows = 1;
  EXPECT_THROW(cpu::quantized_linear_group(problems, 2), Error);
  problems[1].rows = 2;
  problems[1].activation_rounding = ActivationRounding::f32;
  EXPECT_THROW(cpu::quantized_linear_group(problems, 2), Error);
  problems[1].activation_rounding = ActivationRounding::int8x2;
  EXPECT_THROW(cpu::quantized_linear_group(problems, 2), Error);
  problems[1].activation_rounding = ActivationRounding::int8;
  cpu::quantized_linear_group(problems, 2);
  EXPECT_THROW(cpu::quantized_linear_group(problems, 0), Error);
  std::vector<cpu::QuantizedLinearProblem> too_many(cpu::kMaxQuantizedGroupLayers + 1, problems[0]);
  EXPECT_THROW(cpu::quantized_linear_group(too_many.data(), static_cast<int>(too_many.size())),
               Error);
}

// Rows interleaved for decode (cpu::interleave_rows) give exactly what the stored rows give:
// decode's integer dot products on the quads as they are, prefill's widening on quads put back;
// both roundings that take 8-bit activations, several thread counts; f32 input is refused.
TEST(QuantizedLinear, InterleavedRowsGiveExactlyWhatTheStoredRowsGive) {
  if (!cpu::has_interleaved_kernels(BlockType::q5_0, 896, cpu::detected_isa())) {
    GTEST_SKIP() << "no interleaved kernels on " << cpu::isa_name(cpu::detected_isa());
  }
  EXPECT_TRUE(cpu::has_interleaved_kernels(cpu::detected_isa()));
  EXPECT_TRUE(cpu::has_interleaved_kernels(cpu::Isa::avx2));
  EXPECT_FALSE(cpu::has_interleaved_kernels(cpu::Isa::portable));
  EXPECT_TRUE(cpu::has_interleaved_kernels(BlockType::q5_0, 896, cpu::Isa::avx2));
  EXPECT_FALSE(cpu::has_interleaved_kernels(BlockType::q5_0, 96, cpu::Isa::avx512));
  EXPECT_FALSE(cpu::has_interleaved_kernels(BlockType::q5_0, 96, cpu::Isa::avx2));
  EXPECT_FALSE(cpu::has_interleaved_kernels(BlockType::q6_k, 1024, cpu::Isa::avx512));
  for (cpu::Isa isa : quant_test::supported_isas()) {
    if (!cpu::has_interleaved_kernels(isa)) continue;
    cpu::set_isa(isa);
    for (auto [type, outputs] :
         {std::pair{BlockType::q5_0, 37}, std::pair{BlockType::q5_0, 1027},
          std::pair{BlockType::q4_0, 37}, std::pair{BlockType::q4_1, 1027},
          std::pair{BlockType::q5_1, 37}, std::pair{BlockType::q8_0, 1027}}) {
      Layer layer = make_layer(type, 896, outputs);
      // Packed rows: interleaved rows are whole quads back to back.
      const size_t row_bytes = block_row_bytes(layer.type, layer.depth);
      std::vector<uint8_t> stored(outputs * row_bytes);
      for (int64_t r = 0; r < outputs; ++r) {
        std::memcpy(stored.data() + r * row_bytes, layer.weight.data() + r * layer.row_bytes,
                    row_bytes);
      }
      layer.weight = stored;
      layer.row_bytes = row_bytes;
      Layer interleaved = layer;
      cpu::interleave_rows(layer.type, stored.data(), interleaved.weight.data(), outputs,
                           layer.depth);
      ASSERT_NE(interleaved.weight, stored);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        for (int64_t rows : {1, 3, 5, 40}) {
          for (ActivationRounding rounding :
               {ActivationRounding::int8, ActivationRounding::int8x2}) {
            std::vector<float> input = quant_test::uniform(rows * layer.depth, -2.0f, 2.0f, rows);
            std::vector<float> expected(rows * outputs, NAN);
            std::vector<float> got(rows * outputs, NAN);
            cpu::quantized_linear(
                problem_of(layer, input, layer.depth, rows, expected, outputs, rounding, true));
            cpu::QuantizedLinearProblem problem =
                problem_of(interleaved, input, layer.depth, rows, got, outputs, rounding, true);
            problem.interleaved = true;
            cpu::quantized_linear(problem);
            ASSERT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)))
                << block_format(type).name << " on " << cpu::isa_name(isa) << ", " << outputs
                << " outputs, " << rows << " rows, " << threads << " threads, "
                << activation_rounding_name(rounding);
          }
        }
      }
      std::vector<float> input(layer.depth, 1.0f);
      std::vector<float> output(outputs);
      cpu::QuantizedLinearProblem f32_input = problem_of(interleaved, input, layer.depth, 1, output,
                                                         outputs, ActivationRounding::f32, false);
      f32_input.interleaved = true;
      EXPECT_THROW(cpu::quantized_linear(f32_input), Error);
    }
  }
  cpu::reset_isa();
  set_num_threads(0);
  std::vector<uint8_t> odd(block_row_bytes(BlockType::q5_0, 96));
  EXPECT_THROW(cpu::interleave_rows(BlockType::q5_0, odd.data(), odd.data(), 1, 96), Error);
}

// PrefillWidensDeepRowsBlockByBlock at the active ISA and `rounding`.
void check_deep_rows_widened(const std::string& isa, ActivationRounding rounding) {
  const int64_t depth = 4864;
  const int64_t outputs = 37;
  const int64_t rows = cpu::kWidenedGemmMinRows + 1;
  // Input values that bf16 holds exactly, in f32 and in bf16.
  std::vector<float> input = quant_test::uniform(rows * depth, -2.0f, 2.0f, 7);
  std::vector<uint16_t> input_bf16(input.size());
  for (size_t index = 0; index < input.size(); ++index) {
    input_bf16[index] = f32_to_bf16(input[index]);
    input[index] = bf16_to_f32(input_bf16[index]);
  }
  for (BlockType type : types_with_kernels()) {
    Layer layer = make_layer(type, depth, outputs);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const std::string where = std::string(block_format(type).name) + " on " + isa + ", " +
                                activation_rounding_name(rounding) + " input, " +
                                std::to_string(threads) + " threads";
      std::vector<float> expected(rows * outputs, NAN);
      const cpu::QuantizedLinearProblem problem =
          problem_of(layer, input, depth, rows, expected, outputs, rounding, threads == 2);
      // AVX2's Q4_0 keeps its faster 8-bit kernels.
      const bool integer_kernels = cpu::active_isa() == cpu::Isa::avx2 &&
                                   type == BlockType::q4_0 &&
                                   rounding != ActivationRounding::f32;
      ASSERT_EQ(cpu::quantized_linear_widens(problem), !integer_kernels) << where;
      if (integer_kernels) continue;
      cpu::quantized_linear(problem);
      expect_double_loop(layer, problem, where);

      std::vector<float> got(rows * outputs, NAN);
      cpu::QuantizedLinearProblem bf16_rows = problem;
      bf16_rows.input = input_bf16.data();
      bf16_rows.input_dtype = DType::bf16;
      bf16_rows.output = got.data();
      if (cpu::quantized_linear_input_dtype(rows, rounding) == DType::bf16) {
        cpu::quantized_linear(bf16_rows);
        ASSERT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)))
            << where << ", bf16 input";
      } else {
        EXPECT_THROW(cpu::quantized_linear(bf16_rows), Error) << where << ": the f32 GEMM";
      }
      bf16_rows.rows = cpu::kWidenedGemmMinRows - 1;
      EXPECT_THROW(cpu::quantized_linear(bf16_rows), Error) << where;

      // Interleaved rows take 8-bit roundings only.
      if (rounding == ActivationRounding::f32 ||
          !cpu::has_interleaved_kernels(type, depth, cpu::active_isa())) {
        continue;
      }
      const size_t row_bytes = block_row_bytes(type, depth);
      std::vector<uint8_t> stored(outputs * row_bytes);
      for (int64_t r = 0; r < outputs; ++r) {
        std::memcpy(stored.data() + r * row_bytes, layer.weight.data() + r * layer.row_bytes,
                    row_bytes);
      }
      std::vector<uint8_t> interleaved(stored.size());
      cpu::interleave_rows(type, stored.data(), interleaved.data(), outputs, depth);
      cpu::QuantizedLinearProblem quads = problem;
      quads.weight = interleaved.data();
      quads.weight_row_bytes = row_bytes;
      quads.interleaved = true;
      quads.output = got.data();
      std::fill(got.begin(), got.end(), NAN);
      cpu::quantized_linear(quads);
      ASSERT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)))
          << where << ", interleaved rows";
    }
  }
  set_num_threads(0);
}

// Prefill's widened GEMM over rows deeper than one of its depth blocks (4,864: Qwen2.5-0.5B's
// down_proj, 19 K-quant super-blocks, cut into blocks of whole super-blocks), for every block
// type, on each ISA with the widened GEMM, 8-bit and f32 roundings: against the double loop;
// interleaved rows exactly as the stored rows; bf16 input rows exactly as the same values in f32
// where the GEMM rounds to bf16, refused by the f32 GEMM. Decode's kernels refuse bf16 rows.
TEST(QuantizedLinear, PrefillWidensDeepRowsBlockByBlock) {
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    if (!cpu::quantized_linear_widens(cpu::kWidenedGemmMinRows)) continue;
    for (ActivationRounding rounding : {ActivationRounding::int8, ActivationRounding::f32}) {
      check_deep_rows_widened(cpu::isa_name(isa), rounding);
    }
  }
  cpu::reset_isa();
}

// quantized_linear_gated: activation(gate) * up, in f32 and in bf16, for decode's rows (after the
// group) and a prefill's (in the widened GEMM's tiles), on every ISA, against gate and up from
// quantized_linear_group (the tests above check those against their double loops).
TEST(QuantizedLinear, GatedProductsMatchTheirLayersOutputs) {
  const int64_t depth = 512;
  const Layer gate = make_layer(BlockType::q8_0, depth, 67);
  const Layer up = make_layer(BlockType::q4_k, depth, 67);
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (int64_t rows : {int64_t{1}, int64_t{3}, cpu::kWidenedGemmMinRows + 7}) {
      for (cpu::GateActivation activation : {cpu::GateActivation::silu, cpu::GateActivation::gelu_tanh}) {
        for (DType dtype : {DType::f32, DType::bf16}) {
          const std::string where = std::string(cpu::isa_name(isa)) + ", " +
                                    std::to_string(rows) + " rows, " + dtype_name(dtype);
          std::vector<float> input = quant_test::uniform(rows * depth, -2.0f, 2.0f, rows);
          std::vector<float> gate_out(rows * gate.outputs, NAN);
          std::vector<float> up_out(rows * up.outputs, NAN);
          const cpu::QuantizedLinearProblem layers[2] = {
              problem_of(gate, input, depth, rows, gate_out, gate.outputs,
                         ActivationRounding::int8, true),
              problem_of(up, input, depth, rows, up_out, up.outputs, ActivationRounding::int8,
                         false)};
          cpu::quantized_linear_group(layers, 2);
          const std::vector<float> gate_expected = gate_out;
          const std::vector<float> up_expected = up_out;
          std::vector<float> product(rows * gate.outputs * 2, NAN);
          cpu::GatedProduct gated;
          gated.activation = activation;
          gated.output = product.data();
          gated.dtype = dtype;
          gated.stride = gate.outputs;
          cpu::quantized_linear_gated(layers[0], layers[1], gated);
          for (int64_t index = 0; index < rows * gate.outputs; ++index) {
            const double g = gate_expected[index];
            const double u = up_expected[index];
            const double activated =
                activation == cpu::GateActivation::silu
                    ? g / (1 + std::exp(-g))
                    : 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
            const double exact = activated * u;
            const double got =
                dtype == DType::f32
                    ? product[index]
                    : bf16_to_f32(reinterpret_cast<const uint16_t*>(product.data())[index]);
            const double allowed = (dtype == DType::bf16 ? std::ldexp(1.0, -8) : 1e-5) *
                                       std::fabs(exact) + 1e-6;
            ASSERT_NEAR(got, exact, allowed) << where << ", element " << index;
          }
        }
      }
    }
  }
  cpu::reset_isa();
  const Layer narrower = make_layer(BlockType::q8_0, depth, 66);
  std::vector<float> input(depth, 1.0f);
  std::vector<float> first(67);
  std::vector<float> second(66);
  std::vector<float> product(67);
  cpu::GatedProduct gated;
  gated.output = product.data();
  gated.stride = 67;
  EXPECT_THROW(cpu::quantized_linear_gated(
                   problem_of(gate, input, depth, 1, first, 67, ActivationRounding::int8, false),
                   problem_of(narrower, input, depth, 1, second, 66, ActivationRounding::int8,
                              false),
                   gated),
               Error);
}

TEST(QuantizedLinear, RejectsRowsShorterThanTheirBlocks) {
  std::vector<float> input(64, 1.0f);
  std::vector<float> output(2);
  std::vector<uint8_t> weight(2 * 68);
  cpu::QuantizedLinearProblem problem;
  problem.input = input.data();
  problem.input_stride = 64;
  problem.rows = 1;
  problem.depth = 64;
  problem.outputs = 2;
  problem.weight = weight.data();
  problem.weight_type = BlockType::q8_0;
  problem.weight_row_bytes = 67;  // two Q8_0 blocks take 68
  problem.output = output.data();
  problem.output_stride = 2;
  EXPECT_THROW(cpu::quantized_linear(problem), Error);
  problem.weight_row_bytes = 68;
  problem.depth = 48;  // not a whole number of blocks
  EXPECT_THROW(cpu::quantized_linear(problem), Error);
}

}  // namespace
}  // namespace fornace
