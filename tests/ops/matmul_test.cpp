// matmul and linear on every kernel path (ISA x threads) against plain double-precision loops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "common/settings_support.h"
#include "core/memory.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "cpu/thread_pool.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "nn/packed_weights.h"
#include "ops/math.h"
#include "test_tensors.h"

namespace fornace {
namespace {

using test::error_message;

struct KernelPath {
  cpu::Isa isa;
  int threads;
  bool amx = false;  // The bf16 GEMM on AMX tiles (where the CPU has them).
};

std::vector<KernelPath> supported_paths() {
  std::vector<KernelPath> paths;
  for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(cpu::detected_isa())) continue;
    for (int threads : {1, 2}) {
      paths.push_back({isa, threads});
      if (isa == cpu::Isa::avx512 && cpu::cpu_features().amx_bf16) {
        paths.push_back({isa, threads, true});
      }
    }
  }
  return paths;
}

std::string path_name(const testing::TestParamInfo<KernelPath>& info) {
  return std::string(cpu::isa_name(info.param.isa)) + "_threads" +
         std::to_string(info.param.threads) + (info.param.amx ? "_amx" : "");
}

// Forces one ISA and thread count for the test, and restores the defaults after.
class KernelPathTest : public testing::TestWithParam<KernelPath> {
 protected:
  void SetUp() override {
    cpu::select_kernels(settings_with("FORNACE_AMX", GetParam().amx ? "1" : "0"));
    cpu::set_isa(GetParam().isa);
    set_num_threads(GetParam().threads);
    ASSERT_EQ(cpu::amx_selected(), GetParam().amx);
  }
  void TearDown() override {
    cpu::reset_isa();
    cpu::select_kernels(EngineSettings{});
    set_num_threads(0);
  }
};

double round_to_bf16(double value) { return bf16_to_f32(f32_to_bf16(static_cast<float>(value))); }

// Reference: out[m][n] = sum_k x[m][k] * w[n][k] + b[n] in double, and the scale
// sum_k |x[m][k] * w[n][k]| + |b[n]| that bounds the f32 rounding error.
struct Reference {
  std::vector<double> values;
  std::vector<double> scale;
};

Reference reference_linear(const std::vector<double>& x, int64_t rows, int64_t depth,
                           const std::vector<double>& w, int64_t outputs,
                           const std::vector<double>* bias, bool round_input) {
  Reference reference{std::vector<double>(rows * outputs), std::vector<double>(rows * outputs)};
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t n = 0; n < outputs; ++n) {
      double sum = bias ? (*bias)[n] : 0.0;
      double scale = bias ? std::abs((*bias)[n]) : 0.0;
      for (int64_t k = 0; k < depth; ++k) {
        double input = x[m * depth + k];
        if (round_input) input = round_to_bf16(input);
        sum += input * w[n * depth + k];
        scale += std::abs(input * w[n * depth + k]);
      }
      reference.values[m * outputs + n] = sum;
      reference.scale[m * outputs + n] = scale;
    }
  }
  return reference;
}

// Each element within relative_to_scale * scale + relative_to_value * |value|.
void expect_near_reference(const std::vector<double>& actual, const Reference& reference,
                           double relative_to_scale, double relative_to_value,
                           const std::string& context) {
  ASSERT_EQ(actual.size(), reference.values.size()) << context;
  int failures = 0;
  for (size_t i = 0; i < actual.size() && failures < 5; ++i) {
    double error = std::abs(actual[i] - reference.values[i]);
    double allowed = relative_to_scale * reference.scale[i] +
                     relative_to_value * std::abs(reference.values[i]) + 1e-30;
    if (!(error <= allowed)) {
      ++failures;
      ADD_FAILURE() << context << ": element " << i << " is " << actual[i] << ", expected "
                    << reference.values[i] << " (error " << error << ", allowed " << allowed << ")";
    }
  }
}

// f32 accumulation over exact (or bf16-rounded-input) products.
constexpr double kAccumulationTolerance = 2e-6;

struct LinearShape {
  int64_t rows;
  int64_t depth;
  int64_t outputs;
};

// Sizes 1, 3, 17 and 4097 in each of M, K and N, GEMV and GEMM edges (every GEMV row count to 8),
// odd depths, depths spanning several packed panels and several GEMV segments, output counts
// that leave partial GEMV tiles; one row over groups of four packed panels, then one panel and a
// partial one.
const LinearShape kLinearShapes[] = {
    {1, 896, 300}, {1, 33, 4097},
    {1, 17, 3},    {3, 4097, 17}, {17, 3, 4097},  {4097, 17, 3},  {1, 4097, 1},
    {4, 896, 128}, {2, 64, 300},  {5, 33, 65},    {13, 1025, 37}, {64, 600, 96},
    {1, 1, 1},     {29, 520, 33}, {16, 300, 700}, {12, 1100, 90}, {6, 129, 40},
    {7, 900, 31},  {8, 896, 64},  {9, 2100, 20}, {4, 100, 33},  {8, 4870, 11},
    {5, 3000, 13}, {2, 5000, 9},  {3, 6000, 7},   {10, 4400, 40},
};

TEST_P(KernelPathTest, LinearMatchesDoubleLoopForEveryWeightDtypeWithAndWithoutBias) {
  uint64_t seed = 1;
  for (const LinearShape& shape : kLinearShapes) {
    for (DType weight_dtype : {DType::f32, DType::bf16, DType::f16}) {
      for (bool with_bias : {false, true}) {
        Tensor input = randn({shape.rows, shape.depth}, seed++);
        Tensor weight = randn({shape.outputs, shape.depth}, seed++, 1.0, weight_dtype);
        std::optional<Tensor> bias;
        if (with_bias) bias = randn({shape.outputs}, seed++, 1.0, weight_dtype);
        Tensor output = linear(input, weight, bias);
        ASSERT_EQ(output.dtype(), DType::f32);
        ASSERT_EQ(output.shape(), (Dims{shape.rows, shape.outputs}));
        std::vector<double> bias_values;
        if (bias) bias_values = to_f64_vector(*bias);
        Reference reference = reference_linear(
            to_f64_vector(input), shape.rows, shape.depth, to_f64_vector(weight), shape.outputs,
            bias ? &bias_values : nullptr, cpu::linear_rounds_input_to_bf16(weight_dtype));
        expect_near_reference(to_f64_vector(output), reference, kAccumulationTolerance, 0.0,
                              "linear " + weight.describe() + (with_bias ? " with bias" : "") +
                                  " rows " + std::to_string(shape.rows));
      }
    }
  }
}

// Q, K and V of a small model (24, 8 and 8 outputs, with biases), and gate and up (two wide
// layers without): at GEMV row counts and GEMM ones, each layer's output is bit for bit what
// linear gives for it alone, and near the double loop.
TEST_P(KernelPathTest, LinearGroupGivesEachLayerExactlyWhatLinearGives) {
  uint64_t seed = 300;
  for (int64_t rows : {1, 3, 16, 17, 40}) {
    for (DType weight_dtype : {DType::f32, DType::bf16}) {
      for (bool with_bias : {true, false}) {
        const int64_t depth = 37;
        const std::vector<int64_t> widths =
            with_bias ? std::vector<int64_t>{24, 8, 8} : std::vector<int64_t>{70, 70};
        Tensor input = randn({1, rows, depth}, seed++);
        std::vector<Tensor> weights, outputs;
        std::vector<std::optional<Tensor>> biases;
        for (int64_t width : widths) {
          weights.push_back(randn({width, depth}, seed++, 1.0, weight_dtype));
          biases.push_back(with_bias ? std::optional<Tensor>(randn({width}, seed++, 1.0,
                                                                   weight_dtype))
                                     : std::nullopt);
          outputs.push_back(full({1, rows, width}, std::nanf("")));
        }
        std::vector<LinearLayerInto> layers;
        for (size_t i = 0; i < widths.size(); ++i) {
          layers.push_back({&outputs[i], &weights[i], &biases[i]});
        }
        linear_group_into(input, layers);
        for (size_t i = 0; i < widths.size(); ++i) {
          std::string context = "layer " + std::to_string(i) + " of " + weights[i].describe() +
                                ", rows " + std::to_string(rows);
          EXPECT_EQ(to_f32_vector(outputs[i]), to_f32_vector(linear(input, weights[i], biases[i])))
              << context;
          std::vector<double> bias_values;
          if (biases[i]) bias_values = to_f64_vector(*biases[i]);
          Reference reference = reference_linear(
              to_f64_vector(input), rows, depth, to_f64_vector(weights[i]), widths[i],
              biases[i] ? &bias_values : nullptr, cpu::linear_rounds_input_to_bf16(weight_dtype));
          expect_near_reference(to_f64_vector(outputs[i]), reference, kAccumulationTolerance, 0.0,
                                context);
        }
      }
    }
  }
}

// bf16 weights packed at load: the layout as gemm.h defines it, element by element; then every
// shape of the double-loop test through the packed copy (GEMV rows 1 to 16, GEMM edges, odd
// depths, partial panels), and a group of packed layers bit for bit as each alone.
TEST_P(KernelPathTest, PackedBf16WeightsHoldThePanelLayoutAndMatchTheDoubleLoop) {
  PackedWeights packer;
  Tensor layout_weight = randn({37, 7}, 40, 1.0, DType::bf16);
  std::shared_ptr<const Storage> layout = packer.pack(layout_weight);
  if (GetParam().isa != cpu::Isa::avx512) {
    EXPECT_EQ(layout, nullptr) << "only the AVX-512 BF16 kernels read packed weights";
    return;
  }
  ASSERT_NE(layout, nullptr);
  ASSERT_EQ(static_cast<int64_t>(layout->bytes()), 2 * 4 * 32 * 2 * 2);  // 2 panels, 4 k pairs
  cpu::select_kernels(settings_with("FORNACE_PACKED_WEIGHTS", "0"));
  EXPECT_EQ(packer.pack(layout_weight), nullptr) << "FORNACE_PACKED_WEIGHTS=0 keeps the weights";
  cpu::select_kernels(settings_with("FORNACE_AMX", GetParam().amx ? "1" : "0"));
  const auto* packed = static_cast<const uint16_t*>(layout->data());
  const auto* source = layout_weight.data<uint16_t>();
  for (int64_t panel = 0; panel < 2; ++panel) {
    for (int64_t pair = 0; pair < 4; ++pair) {
      for (int64_t column = 0; column < 32; ++column) {
        for (int64_t half = 0; half < 2; ++half) {
          const int64_t row = panel * 32 + column;
          const int64_t k = pair * 2 + half;
          uint16_t expected = row < 37 && k < 7 ? source[row * 7 + k] : 0;
          ASSERT_EQ(packed[((panel * 4 + pair) * 32 + column) * 2 + half], expected)
              << "panel " << panel << ", k " << k << ", weight row " << row;
        }
      }
    }
  }
  uint64_t seed = 500;
  for (const LinearShape& shape : kLinearShapes) {
    for (bool with_bias : {false, true}) {
      Tensor input = randn({shape.rows, shape.depth}, seed++);
      Tensor weight = randn({shape.outputs, shape.depth}, seed++, 1.0, DType::bf16);
      std::optional<Tensor> bias;
      if (with_bias) bias = randn({shape.outputs}, seed++);
      std::shared_ptr<const Storage> weight_packed = packer.pack(weight);
      ASSERT_NE(weight_packed, nullptr);
      Tensor output = linear(input, weight, bias, weight_packed.get());
      std::vector<double> bias_values;
      if (bias) bias_values = to_f64_vector(*bias);
      Reference reference =
          reference_linear(to_f64_vector(input), shape.rows, shape.depth, to_f64_vector(weight),
                           shape.outputs, bias ? &bias_values : nullptr, true);
      expect_near_reference(to_f64_vector(output), reference, kAccumulationTolerance, 0.0,
                            "packed linear " + weight.describe() +
                                (with_bias ? " with bias" : "") + " rows " +
                                std::to_string(shape.rows));
    }
  }
  for (int64_t rows : {1, 5, 16, 40}) {
    const int64_t depth = 99;
    const std::vector<int64_t> widths{40, 8, 70};
    Tensor input = randn({1, rows, depth}, seed++);
    std::vector<Tensor> weights, outputs;
    std::vector<std::shared_ptr<const Storage>> packs;
    std::vector<std::optional<Tensor>> biases;
    std::vector<LinearLayerInto> layers;
    for (int64_t width : widths) {
      weights.push_back(randn({width, depth}, seed++, 1.0, DType::bf16));
      packs.push_back(packer.pack(weights.back()));
      biases.push_back(randn({width}, seed++));
      outputs.push_back(full({1, rows, width}, std::nanf("")));
    }
    for (size_t i = 0; i < widths.size(); ++i) {
      layers.push_back({&outputs[i], &weights[i], &biases[i], packs[i].get()});
    }
    linear_group_into(input, layers);
    for (size_t i = 0; i < widths.size(); ++i) {
      EXPECT_EQ(to_f32_vector(outputs[i]),
                to_f32_vector(linear(input, weights[i], biases[i], packs[i].get())))
          << "packed layer " << i << ", rows " << rows;
    }
  }
}

// Gate, up and activation(gate) * up in one pass give bit for bit what linear_group_into, then
// gated_activation_into give: at GEMV and GEMM row counts (a partial last row panel), one depth
// block and several (2,100 k), widths that leave a partial column panel, f32 and bf16 products
// (the f32 one also in place over gate's output), f32 and bf16 weights, stored and packed.
TEST_P(KernelPathTest, LinearGatedGivesExactlyTheGroupThenTheActivation) {
  PackedWeights packer;
  uint64_t seed = 900;
  for (int64_t rows : {1, 5, 16, 17, 40}) {
    for (int64_t depth : {37, 2100}) {
      for (DType weight_dtype : {DType::f32, DType::bf16}) {
        for (GateActivation activation : {GateActivation::silu, GateActivation::gelu_tanh}) {
          const int64_t width = rows == 40 ? 90 : 70;
          Tensor input = randn({1, rows, depth}, seed++);
          Tensor gate_weight = randn({width, depth}, seed++, 0.2, weight_dtype);
          Tensor up_weight = randn({width, depth}, seed++, 0.2, weight_dtype);
          std::shared_ptr<const Storage> gate_packed = packer.pack(gate_weight);
          std::shared_ptr<const Storage> up_packed = packer.pack(up_weight);
          const std::optional<Tensor> no_bias;
          Tensor gate = full({1, rows, width}, std::nanf(""));
          Tensor up = full({1, rows, width}, std::nanf(""));
          LinearLayerInto gate_layer{&gate, &gate_weight, &no_bias, gate_packed.get()};
          LinearLayerInto up_layer{&up, &up_weight, &no_bias, up_packed.get()};
          const LinearLayerInto group[2] = {gate_layer, up_layer};
          linear_group_into(input, group);
          for (DType product_dtype : {DType::f32, DType::bf16}) {
            Tensor expected = Tensor::empty({1, rows, width}, product_dtype);
            gated_activation_into(expected, gate, up, activation);
            const std::string context = std::string(gated_op_name(activation)) + " of " +
                                        gate_weight.describe() + (gate_packed ? " packed" : "") +
                                        " into " + dtype_name(product_dtype) + ", rows " +
                                        std::to_string(rows);
            Tensor gate_scratch = full({1, rows, width}, std::nanf(""));
            Tensor up_scratch = full({1, rows, width}, std::nanf(""));
            Tensor product = full({1, rows, width}, std::nanf(""), product_dtype);
            linear_gated_into(product, input,
                              {&gate_scratch, &gate_weight, &no_bias, gate_packed.get()},
                              {&up_scratch, &up_weight, &no_bias, up_packed.get()}, activation);
            EXPECT_EQ(to_f32_vector(product), to_f32_vector(expected)) << context;
            if (product_dtype != DType::f32) continue;
            // In place over gate's output, as an f32 model's MLP runs it.
            linear_gated_into(gate_scratch, input,
                              {&gate_scratch, &gate_weight, &no_bias, gate_packed.get()},
                              {&up_scratch, &up_weight, &no_bias, up_packed.get()}, activation);
            EXPECT_EQ(to_f32_vector(gate_scratch), to_f32_vector(expected))
                << context << ", in place";
          }
        }
      }
    }
  }
}

// A bf16 input (as a bf16 model's norms and SwiGLU hand it on) gives bit for bit what its f32
// widening gives, through the weights as stored and packed, alone and in a group: where the
// kernels round to bf16 they read such rows in place (even depths; a last partial panel of rows
// and odd depths packed), elsewhere the input is widened. The shapes add row blocks (2,053 rows)
// and depth blocks (4,100 k) with a partial last panel to the double-loop test's.
TEST_P(KernelPathTest, Bf16InputGivesExactlyWhatItsF32WideningGives) {
  std::vector<LinearShape> shapes(std::begin(kLinearShapes), std::end(kLinearShapes));
  shapes.push_back({2053, 64, 40});
  shapes.push_back({25, 4100, 70});
  PackedWeights packer;
  uint64_t seed = 900;
  for (const LinearShape& shape : shapes) {
    for (DType weight_dtype : {DType::bf16, DType::f32}) {
      Tensor input = randn({1, shape.rows, shape.depth}, seed++, 1.0, DType::bf16);
      Tensor widened = to_dtype(input, DType::f32);
      Tensor weight = randn({shape.outputs, shape.depth}, seed++, 1.0, weight_dtype);
      std::optional<Tensor> bias = randn({shape.outputs}, seed++);
      std::shared_ptr<const Storage> packed = packer.pack(weight);
      std::string context = weight.describe() + (packed ? " packed" : "") + ", input " +
                            input.describe();
      for (const Storage* weights : {static_cast<const Storage*>(nullptr), packed.get()}) {
        Tensor from_bf16 = full({1, shape.rows, shape.outputs}, std::nanf(""));
        Tensor from_f32 = full({1, shape.rows, shape.outputs}, std::nanf(""));
        linear_into(from_bf16, input, weight, bias, weights);
        linear_into(from_f32, widened, weight, bias, weights);
        ASSERT_EQ(to_f32_vector(from_bf16), to_f32_vector(from_f32)) << context;
      }
      Tensor second_weight = randn({9, shape.depth}, seed++, 1.0, weight_dtype);
      std::optional<Tensor> no_bias;
      Tensor first_output = full({1, shape.rows, shape.outputs}, std::nanf(""));
      Tensor second_output = full({1, shape.rows, 9}, std::nanf(""));
      linear_group_into(input, std::vector<LinearLayerInto>{{&first_output, &weight, &bias},
                                                           {&second_output, &second_weight,
                                                            &no_bias}});
      EXPECT_EQ(to_f32_vector(first_output), to_f32_vector(linear(widened, weight, bias)))
          << "group, " << context;
      EXPECT_EQ(to_f32_vector(second_output), to_f32_vector(linear(widened, second_weight)))
          << "group, " << context;
      if (shape.rows > 600) break;  // One weight dtype is enough for the long shapes.
    }
  }
  EXPECT_EQ(linear_input_dtype(DType::bf16), cpu::linear_rounds_input_to_bf16(DType::bf16)
                                                 ? DType::bf16
                                                 : DType::f32);
  EXPECT_EQ(linear_input_dtype(DType::f32), DType::f32);
}

// A tied embedding reads its rows back from the lm_head's packed copy: every row of tables with
// partial panels and odd depths comes back as stored, in bf16 and widened to f32, and a bad id
// is refused as index_select refuses it.
TEST_P(KernelPathTest, RowsReadFromAPackedTableAreTheStoredRows) {
  PackedWeights packer;
  for (const Dims& shape : {Dims{37, 7}, Dims{64, 896}, Dims{70, 33}}) {
    Tensor table = randn(shape, shape[0] + shape[1], 1.0, DType::bf16);
    std::shared_ptr<const Storage> packed = packer.pack(table);
    if (GetParam().isa != cpu::Isa::avx512) {
      EXPECT_EQ(packed, nullptr);
      return;
    }
    ASSERT_NE(packed, nullptr);
    std::vector<int32_t> every_row;
    for (int32_t row = static_cast<int32_t>(shape[0]) - 1; row >= 0; --row) every_row.push_back(row);
    Tensor ids = from_ids(every_row, {1, shape[0]});
    for (DType dtype : {DType::bf16, DType::f32}) {
      Tensor rows = full({1, shape[0], shape[1]}, std::nanf(""), dtype);
      index_select_packed_into(rows, table, *packed, ids);
      EXPECT_EQ(to_f32_vector(rows), to_f32_vector(index_select(table, ids)))
          << table.describe() << " into " << rows.describe();
    }
  }
  Tensor table = randn({37, 7}, 1, 1.0, DType::bf16);
  std::shared_ptr<const Storage> packed = packer.pack(table);
  Tensor rows = zeros({1, 2, 7});
  std::string message = error_message(
      [&] { index_select_packed_into(rows, table, *packed, from_ids({3, 37}, {1, 2})); });
  EXPECT_NE(message.find("index_select: id 37 out of range for 37 rows of bf16[37, 7]"),
            std::string::npos)
      << message;
  message = error_message([&] {
    index_select_packed_into(rows, randn({70, 7}, 2, 1.0, DType::bf16), *packed,
                             from_ids({3, 4}, {1, 2}));
  });
  EXPECT_NE(message.find("is not a bf16 matrix packed in"), std::string::npos) << message;
}

TEST_P(KernelPathTest, LinearReadsStridedAndBroadcastInputsAndBatchDims) {
  const int64_t depth = 37;
  const int64_t outputs = 19;
  Tensor weight = randn({outputs, depth}, 7, 1.0, DType::bf16);
  std::vector<double> weight_values = to_f64_vector(weight);
  bool round_input = cpu::linear_rounds_input_to_bf16(DType::bf16);
  std::vector<Tensor> inputs = {
      randn({depth, 6}, 8).transpose(0, 1),             // transposed view
      randn({3, 9, depth + 4}, 9).narrow(2, 2, depth),  // narrowed last dim, batch dims
      randn({1, depth}, 10).broadcast_as({5, depth}),   // broadcast rows
      randn({2, depth}, 11).unsqueeze(0).broadcast_as({4, 2, depth}),
      test::make_tensor(test::random_values(3 * depth, 12), {3, depth}, DType::f32,
                        test::Storage::padded),
  };
  for (const Tensor& input : inputs) {
    Tensor output = linear(input, weight);
    Dims expected_shape = input.shape();
    expected_shape[expected_shape.size() - 1] = outputs;
    ASSERT_EQ(output.shape(), expected_shape) << input.describe();
    EXPECT_TRUE(output.is_contiguous());
    int64_t rows = input.numel() / depth;
    Reference reference = reference_linear(to_f64_vector(input), rows, depth, weight_values,
                                           outputs, nullptr, round_input);
    expect_near_reference(to_f64_vector(output), reference, kAccumulationTolerance, 0.0,
                          "linear of " + input.describe());
  }
}

TEST_P(KernelPathTest, LinearAcceptsStridedWeightsAndBiasAndReturnsTheInputDtype) {
  const int64_t depth = 40;
  const int64_t outputs = 33;
  // A weight stored [K, N] and viewed as [N, K].
  Tensor weight = randn({depth, outputs}, 21).transpose(0, 1);
  // A bf16 bias read through a stride-2 view.
  Tensor bias = test::make_tensor(test::random_values(outputs, 22), {outputs}, DType::bf16,
                                  test::Storage::reversed);
  ASSERT_FALSE(bias.is_contiguous());
  for (DType input_dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (int64_t rows : {int64_t{2}, int64_t{9}}) {
      Tensor input = randn({rows, depth}, 23, 1.0, input_dtype);
      Tensor output = linear(input, weight, bias);
      EXPECT_EQ(output.dtype(), input_dtype);
      std::vector<double> bias_values = to_f64_vector(bias);
      Reference reference = reference_linear(to_f64_vector(input), rows, depth,
                                             to_f64_vector(weight), outputs, &bias_values, false);
      // The result is rounded once to the input's dtype.
      expect_near_reference(to_f64_vector(output), reference, kAccumulationTolerance,
                            input_dtype == DType::f32 ? 0.0 : test::relative_tolerance(input_dtype),
                            "linear " + input.describe());
    }
  }
}

TEST_P(KernelPathTest, LinearWithEmptyDepthGivesTheBias) {
  Tensor input = zeros({3, 0});
  Tensor weight = zeros({4, 0});
  Tensor bias = from_vector({1, 2, 3, 4}, {4});
  std::vector<float> values = to_f32_vector(linear(input, weight, bias));
  EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}));
}

// Reference for matmul over the broadcast batch: left [..., M, K], right [..., K, N], both
// already broadcast to the full batch and read in row-major order.
std::vector<double> reference_matmul(const std::vector<double>& left,
                                     const std::vector<double>& right, int64_t batches,
                                     int64_t rows, int64_t depth, int64_t outputs,
                                     std::vector<double>& scale) {
  std::vector<double> values(batches * rows * outputs);
  scale.assign(values.size(), 0.0);
  for (int64_t batch = 0; batch < batches; ++batch) {
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t n = 0; n < outputs; ++n) {
        double sum = 0.0;
        double magnitude = 0.0;
        for (int64_t k = 0; k < depth; ++k) {
          double product =
              left[(batch * rows + m) * depth + k] * right[(batch * depth + k) * outputs + n];
          sum += product;
          magnitude += std::abs(product);
        }
        values[(batch * rows + m) * outputs + n] = sum;
        scale[(batch * rows + m) * outputs + n] = magnitude;
      }
    }
  }
  return values;
}

void check_matmul(const Tensor& left, const Tensor& right, const Dims& expected_shape) {
  Tensor output = matmul(left, right);
  ASSERT_EQ(output.shape(), expected_shape) << left.describe() << " x " << right.describe();
  ASSERT_EQ(output.dtype(), left.dtype());
  EXPECT_TRUE(output.is_contiguous());
  const int rank = expected_shape.size();
  const int64_t rows = expected_shape[rank - 2];
  const int64_t outputs = expected_shape[rank - 1];
  const int64_t depth = left.dim(-1);
  Dims batch_shape;
  for (int dim = 0; dim < rank - 2; ++dim) batch_shape.push_back(expected_shape[dim]);
  Dims left_shape = batch_shape;
  left_shape.push_back(rows);
  left_shape.push_back(depth);
  Dims right_shape = batch_shape;
  right_shape.push_back(depth);
  right_shape.push_back(outputs);
  Reference reference;
  reference.values = reference_matmul(to_f64_vector(left.broadcast_as(left_shape)),
                                      to_f64_vector(right.broadcast_as(right_shape)),
                                      batch_shape.product(), rows, depth, outputs, reference.scale);
  expect_near_reference(to_f64_vector(output), reference, kAccumulationTolerance,
                        left.dtype() == DType::f32 ? 0.0 : test::relative_tolerance(left.dtype()),
                        "matmul " + left.describe() + " x " + right.describe());
}

TEST_P(KernelPathTest, MatmulMatchesDoubleLoopForEachDtypeAndSize) {
  struct Case {
    int64_t rows, depth, outputs;
  };
  const Case cases[] = {{1, 17, 4097}, {17, 4097, 3}, {4097, 3, 17}, {3, 1, 1}, {6, 70, 35}};
  uint64_t seed = 100;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const Case& shape : cases) {
      Tensor left = randn({shape.rows, shape.depth}, seed++, 1.0, dtype);
      Tensor right = randn({shape.depth, shape.outputs}, seed++, 1.0, dtype);
      check_matmul(left, right, {shape.rows, shape.outputs});
    }
  }
}

TEST_P(KernelPathTest, MatmulBroadcastsBatchDimsOverAnyLayout) {
  // Batch broadcast both ways.
  check_matmul(randn({2, 1, 5, 7}, 1), randn({3, 7, 4}, 2), {2, 3, 5, 4});
  check_matmul(randn({5, 7}, 3), randn({2, 7, 6}, 4), {2, 5, 6});
  check_matmul(randn({3, 9, 8}, 5), randn({8, 11}, 6), {3, 9, 11});
  // Transposed, narrowed and broadcast operands.
  check_matmul(randn({2, 7, 5}, 7).transpose(1, 2), randn({2, 6, 7}, 8).transpose(1, 2), {2, 5, 6});
  check_matmul(randn({4, 12}, 9).narrow(1, 3, 6),
               randn({10, 20}, 10).narrow(0, 2, 6).narrow(1, 1, 17), {4, 17});
  check_matmul(randn({1, 3, 5}, 11).broadcast_as({4, 3, 5}), randn({5, 1}, 12).broadcast_as({5, 9}),
               {4, 3, 9});
  // Attention-shaped: [B, H, S, D] x [B, H, D, S] with a transposed key view, in bf16.
  Tensor query = randn({1, 2, 6, 8}, 13, 1.0, DType::bf16);
  Tensor key = randn({1, 6, 2, 8}, 14, 1.0, DType::bf16).transpose(1, 2).transpose(2, 3);
  check_matmul(query, key, {1, 2, 6, 6});
}

// An f32 left against a right operand of any float dtype, contiguous ([..., K, N]: read row by
// row for up to kGemvMaxRows left rows) or transposed from contiguous ([..., N, K]: read as the
// weight rows, where the kernel may round the left to bf16): no copy either way.
TEST_P(KernelPathTest, MatmulReadsAContiguousOrTransposedRightOperandInPlace) {
  uint64_t seed = 300;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (int64_t rows : {1, 3, 4, 5}) {
      for (bool transposed : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " rows " + std::to_string(rows) +
                     (transposed ? " transposed" : " contiguous"));
        Tensor left = randn({2, 3, rows, 37}, seed++);
        Tensor right = transposed ? randn({2, 3, 70, 37}, seed++, 1.0, dtype).transpose(-1, -2)
                                  : randn({2, 3, 37, 70}, seed++, 1.0, dtype);
        CopyBytes before = memory::copy_bytes();
        Tensor output = matmul(left, right);
        CopyBytes after = memory::copy_bytes();
        ASSERT_EQ(output.dtype(), DType::f32);
        ASSERT_EQ(output.shape(), (Dims{2, 3, rows, 70}));
        bool in_place = transposed || (rows <= cpu::kGemvMaxRows && dtype != DType::f16);
        if (in_place) {
          EXPECT_EQ(after.contiguous, before.contiguous);
          EXPECT_EQ(after.strided, before.strided);
        }
        std::vector<double> left_values = to_f64_vector(left);
        if (transposed && cpu::linear_rounds_input_to_bf16(dtype)) {
          for (double& value : left_values) value = round_to_bf16(value);
        }
        Reference reference;
        reference.values = reference_matmul(left_values, to_f64_vector(right), 6, rows, 37, 70,
                                            reference.scale);
        expect_near_reference(to_f64_vector(output), reference, kAccumulationTolerance, 0.0,
                              "matmul");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, KernelPathTest, testing::ValuesIn(supported_paths()), path_name);

TEST(LinearErrors, ShapeMismatchNamesTheOpAndBothShapes) {
  Tensor input = zeros({2, 5});
  Tensor weight = zeros({3, 4});
  std::string message = error_message([&] { linear(input, weight); });
  EXPECT_NE(message.find("linear"), std::string::npos) << message;
  EXPECT_NE(message.find("[2, 5]"), std::string::npos) << message;
  EXPECT_NE(message.find("[3, 4]"), std::string::npos) << message;

  message = error_message([&] { linear(zeros({2, 4}), weight, zeros({4})); });
  EXPECT_NE(message.find("linear"), std::string::npos) << message;
  EXPECT_NE(message.find("bias"), std::string::npos) << message;
  EXPECT_NE(message.find("[4]"), std::string::npos) << message;
  EXPECT_NE(message.find("[3, 4]"), std::string::npos) << message;

  message = error_message([&] { linear(zeros({2, 4}), zeros({4})); });
  EXPECT_NE(message.find("linear"), std::string::npos) << message;

  message = error_message([&] { linear(zeros({2, 4}, DType::i32), weight); });
  EXPECT_NE(message.find("linear"), std::string::npos) << message;
  EXPECT_NE(message.find("i32[2, 4]"), std::string::npos) << message;
}

TEST(LinearErrors, GatedLayersMustMatchInWidthAndTakeAFloatProduct) {
  Tensor input = randn({2, 8}, 1);
  Tensor gate_weight = randn({6, 8}, 2);
  Tensor up_weight = randn({5, 8}, 3);
  const std::optional<Tensor> no_bias;
  Tensor gate = Tensor::empty({2, 6}, DType::f32);
  Tensor up = Tensor::empty({2, 5}, DType::f32);
  EXPECT_NE(error_message([&] {
              linear_gated_into(Tensor::empty({2, 6}, DType::f32), input,
                                {&gate, &gate_weight, &no_bias}, {&up, &up_weight, &no_bias},
                                GateActivation::silu);
            }).find("linear_gated_into: gate"),
            std::string::npos);
  Tensor same_width_up = randn({6, 8}, 4);
  Tensor up6 = Tensor::empty({2, 6}, DType::f32);
  EXPECT_NE(error_message([&] {
              linear_gated_into(Tensor::empty({2, 6}, DType::u32), input,
                                {&gate, &gate_weight, &no_bias}, {&up6, &same_width_up, &no_bias},
                                GateActivation::silu);
            }).find("must be f32 or bf16"),
            std::string::npos);
}

TEST(LinearErrors, GroupLayersMustShareTheInputAndTheWeightDtype) {
  Tensor input = zeros({2, 5});
  Tensor weight = zeros({3, 5});
  Tensor other_depth = zeros({3, 4});
  Tensor other_dtype = zeros({3, 5}, DType::bf16);
  Tensor output = zeros({2, 3});
  Tensor second_output = zeros({2, 3});
  std::optional<Tensor> none;
  std::vector<LinearLayerInto> depth_mismatch = {{&output, &weight, &none},
                                                 {&second_output, &other_depth, &none}};
  std::string message = error_message([&] { linear_group_into(input, depth_mismatch); });
  EXPECT_NE(message.find("[2, 5]"), std::string::npos) << message;
  EXPECT_NE(message.find("[3, 4]"), std::string::npos) << message;
  std::vector<LinearLayerInto> dtype_mismatch = {{&output, &weight, &none},
                                                 {&second_output, &other_dtype, &none}};
  message = error_message([&] { linear_group_into(input, dtype_mismatch); });
  EXPECT_NE(message.find("differ in dtype"), std::string::npos) << message;
  std::vector<LinearLayerInto> too_many(9, LinearLayerInto{&output, &weight, &none});
  message = error_message([&] { linear_group_into(input, too_many); });
  EXPECT_NE(message.find("9 layers, at most 8"), std::string::npos) << message;
}

TEST(MatmulErrors, MismatchesNameTheOpAndBothShapes) {
  std::string message = error_message([] { matmul(zeros({2, 3}), zeros({4, 5})); });
  EXPECT_NE(message.find("matmul"), std::string::npos) << message;
  EXPECT_NE(message.find("[2, 3]"), std::string::npos) << message;
  EXPECT_NE(message.find("[4, 5]"), std::string::npos) << message;

  message = error_message([] { matmul(zeros({2, 2, 3}), zeros({3, 3, 5})); });
  EXPECT_NE(message.find("matmul"), std::string::npos) << message;
  EXPECT_NE(message.find("[2, 2, 3]"), std::string::npos) << message;
  EXPECT_NE(message.find("[3, 3, 5]"), std::string::npos) << message;

  message = error_message([] { matmul(zeros({2, 3}, DType::bf16), zeros({3, 5})); });
  EXPECT_NE(message.find("matmul"), std::string::npos) << message;
  EXPECT_NE(message.find("bf16[2, 3]"), std::string::npos) << message;
  EXPECT_NE(message.find("f32[3, 5]"), std::string::npos) << message;

  message = error_message([] { matmul(zeros({3}), zeros({3, 5})); });
  EXPECT_NE(message.find("matmul"), std::string::npos) << message;
  EXPECT_NE(message.find("[3]"), std::string::npos) << message;
}

TEST(IsaDispatch, ForcingAnUnsupportedLevelThrowsAndEveryLowerLevelIsAccepted) {
  for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (static_cast<int>(isa) <= static_cast<int>(cpu::detected_isa())) {
      cpu::set_isa(isa);
      EXPECT_EQ(cpu::active_isa(), isa);
    } else {
      EXPECT_THROW(cpu::set_isa(isa), Error);
    }
  }
  cpu::reset_isa();
  EXPECT_THROW(cpu::parse_isa("sse9"), Error);
  EXPECT_EQ(cpu::parse_isa("avx2"), cpu::Isa::avx2);
}

}  // namespace
}  // namespace fornace
