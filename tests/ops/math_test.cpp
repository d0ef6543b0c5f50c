// Elementwise, row and reduction ops against plain double-precision loops, over contiguous,
// reversed-stride, padded (narrowed) and broadcast inputs in f32, bf16 and f16.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cpu/cpu_features.h"
#include "cpu/elementwise.h"
#include "ops/copy.h"
#include "ops/math.h"
#include "test_tensors.h"

namespace fornace {
namespace {

using test::expect_close;
using test::make_tensor;
using test::random_values;
using test::representable;
using test::Storage;

constexpr DType kFloatTypes[] = {DType::f32, DType::bf16, DType::f16};

// Flat index into an operand of `shape` broadcast (NumPy rules) to the output index.
int64_t broadcast_source(const std::vector<int64_t>& out_index, const Dims& shape) {
  int lead = static_cast<int>(out_index.size()) - shape.size();
  int64_t flat = 0;
  for (int dim = 0; dim < shape.size(); ++dim) {
    int64_t coordinate = shape[dim] == 1 ? 0 : out_index[lead + dim];
    flat = flat * shape[dim] + coordinate;
  }
  return flat;
}

std::vector<double> as_double(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

std::string describe_case(const char* op, const Tensor& left, const Tensor& right) {
  return concat(op, " of ", left.describe(), " and ", right.describe());
}

// Checks add or mul for every pair of layouts and every float dtype.
void check_binary(const char* op, Tensor (*function)(const Tensor&, const Tensor&),
                  double (*reference)(double, double), const Dims& left_shape,
                  const Dims& right_shape) {
  Dims out_shape = broadcast_shapes(left_shape, right_shape, "test");
  for (DType dtype : kFloatTypes) {
    std::vector<float> left_values =
        representable(random_values(left_shape.product(), 1), dtype);
    std::vector<float> right_values =
        representable(random_values(right_shape.product(), 2), dtype);
    std::vector<double> expected(out_shape.product());
    for (int64_t flat = 0; flat < out_shape.product(); ++flat) {
      std::vector<int64_t> index = test::unravel(flat, out_shape);
      expected[flat] = reference(left_values[broadcast_source(index, left_shape)],
                                 right_values[broadcast_source(index, right_shape)]);
    }
    for (Storage left_kind : test::kAllStorages) {
      for (Storage right_kind : test::kAllStorages) {
        Tensor left = make_tensor(left_values, left_shape, dtype, left_kind);
        Tensor right = make_tensor(right_values, right_shape, dtype, right_kind);
        Tensor result = function(left, right);
        std::string context = describe_case(op, left, right);
        EXPECT_EQ(result.shape(), out_shape) << context;
        EXPECT_EQ(result.dtype(), dtype) << context;
        EXPECT_TRUE(result.is_contiguous()) << context;
        expect_close(to_f64_vector(result), expected, 1e-6,
                     test::relative_tolerance(dtype), context);
      }
    }
  }
}

double add_reference(double left, double right) { return left + right; }
double mul_reference(double left, double right) { return left * right; }

TEST(Add, BroadcastsLikeNumPyOverEveryLayoutAndDtype) {
  check_binary("add", add, add_reference, {3, 17}, {17});
  check_binary("add", add, add_reference, {17, 1}, {1, 3});
  check_binary("add", add, add_reference, {2, 1, 4097}, {2, 3, 1});
  check_binary("add", add, add_reference, {1}, {3});
  check_binary("add", add, add_reference, {4097}, {4097});
}

TEST(Mul, BroadcastsLikeNumPyOverEveryLayoutAndDtype) {
  check_binary("mul", mul, mul_reference, {3, 17}, {3, 1});
  check_binary("mul", mul, mul_reference, {1, 3, 17}, {2, 1, 17});
  check_binary("mul", mul, mul_reference, {4097, 3}, {1});
}

TEST(Add, AcceptsExplicitBroadcastViews) {
  // A [17] bias viewed as [5, 17] with stride 0 on the first dim.
  std::vector<float> bias = random_values(17, 3);
  std::vector<float> rows = random_values(5 * 17, 4);
  Tensor bias_view = from_vector(bias, {17}).broadcast_as({5, 17});
  ASSERT_EQ(bias_view.strides()[0], 0);
  Tensor result = add(from_vector(rows, {5, 17}), bias_view);
  std::vector<double> expected(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) expected[i] = double(rows[i]) + bias[i % 17];
  expect_close(to_f64_vector(result), expected, 1e-6, 1e-6, "add with a broadcast view");
}

TEST(Add, LargeTensorsSplitAcrossThreadsGiveTheSameValues) {
  // 3 x 4097 x 17 elements: many pool parts, some starting inside a run.
  Dims shape{3, 4097, 17};
  std::vector<float> left = random_values(shape.product(), 5);
  std::vector<float> right = random_values(4097 * 17, 6);
  Tensor result = add(make_tensor(left, shape, DType::f32, Storage::reversed),
                      from_vector(right, {4097, 17}));
  std::vector<double> expected(left.size());
  for (size_t i = 0; i < left.size(); ++i) {
    expected[i] = double(left[i]) + right[i % (4097 * 17)];
  }
  expect_close(to_f64_vector(result), expected, 1e-6, 1e-6, "large add");
}

TEST(Elementwise, RejectsMismatchedDtypesAndShapesNamingTheOp) {
  Tensor left = zeros({2, 3});
  std::string message = test::error_message([&] { add(left, zeros({2, 3}, DType::bf16)); });
  EXPECT_NE(message.find("add: dtypes differ"), std::string::npos) << message;
  EXPECT_NE(message.find("f32[2, 3]"), std::string::npos) << message;
  EXPECT_NE(message.find("bf16[2, 3]"), std::string::npos) << message;
  message = test::error_message([&] { mul(left, zeros({4})); });
  EXPECT_NE(message.find("mul: shapes [2, 3] and [4] do not broadcast"), std::string::npos)
      << message;
  message = test::error_message([&] { silu(zeros({2}, DType::i32)); });
  EXPECT_NE(message.find("silu: input i32[2] must be f32, bf16 or f16"), std::string::npos)
      << message;
}

// Checks a unary elementwise op over layouts, dtypes and the sizes 1, 3, 17 and 4097.
void check_unary(const char* op, const std::function<Tensor(const Tensor&)>& function,
                 double (*reference)(double)) {
  for (Dims shape : {Dims{1}, Dims{3}, Dims{17, 3}, Dims{4097}, Dims{2, 3, 17}}) {
    for (DType dtype : kFloatTypes) {
      std::vector<float> values = representable(random_values(shape.product(), 7, -9, 9), dtype);
      std::vector<double> expected(values.size());
      for (size_t i = 0; i < values.size(); ++i) expected[i] = reference(values[i]);
      for (Storage kind : test::kAllStorages) {
        Tensor input = make_tensor(values, shape, dtype, kind);
        Tensor result = function(input);
        std::string context = concat(op, " of ", input.describe());
        EXPECT_EQ(result.shape(), shape) << context;
        EXPECT_TRUE(result.is_contiguous()) << context;
        expect_close(to_f64_vector(result), expected, 1e-6, test::relative_tolerance(dtype),
                     context);
      }
    }
  }
}

TEST(Silu, MatchesTheDoubleFormula) {
  check_unary("silu", silu, [](double x) { return x / (1.0 + std::exp(-x)); });
}

TEST(Silu, SaturatesAtLargeMagnitudes) {
  Tensor result = silu(from_vector({-200.0f, -90.0f, 90.0f, 200.0f}, {4}));
  std::vector<float> values = to_f32_vector(result);
  EXPECT_EQ(values[0], 0.0f);
  EXPECT_NEAR(values[1], 0.0f, 1e-30);
  EXPECT_FLOAT_EQ(values[2], 90.0f);
  EXPECT_FLOAT_EQ(values[3], 200.0f);
}

// The gated MLP activations and soft-capping on every ISA the CPU has, against double formulas.
TEST(GatedActivation, GeluTanhAndSiluTimesUpMatchTheDoubleFormulasOnEveryIsa) {
  const double root = std::sqrt(2.0 / std::acos(-1.0));
  auto gelu_tanh = [root](double x) {
    return 0.5 * x * (1.0 + std::tanh(root * (x + 0.044715 * x * x * x)));
  };
  auto silu_formula = [](double x) { return x / (1.0 + std::exp(-x)); };
  std::vector<float> gate = random_values(4097, 11, -9, 9);
  gate.insert(gate.end(), {-60.0f, -30.0f, 0.0f, 30.0f, 60.0f});
  std::vector<float> up = random_values(gate.size(), 12, -2, 2);
  int64_t count = static_cast<int64_t>(gate.size());
  for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(cpu::detected_isa())) continue;
    cpu::set_isa(isa);
    for (GateActivation activation : {GateActivation::silu, GateActivation::gelu_tanh}) {
      Tensor output = zeros({count});
      gated_activation_into(output, from_vector(gate, {count}), from_vector(up, {count}),
                            activation);
      std::vector<double> expected(gate.size());
      for (size_t i = 0; i < gate.size(); ++i) {
        double x = gate[i];
        expected[i] = (activation == GateActivation::silu ? silu_formula(x) : gelu_tanh(x)) * up[i];
      }
      expect_close(to_f64_vector(output), expected, 1e-6, 1e-5,
                   concat(cpu::isa_name(isa), " activation ", static_cast<int>(activation)));
    }
    std::vector<float> logits = random_values(4097, 13, -200, 200);
    Tensor capped = zeros({4097});
    soft_cap_into(capped, from_vector(logits, {4097}), 30.0);
    std::vector<double> expected(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) expected[i] = 30.0 * std::tanh(logits[i] / 30.0);
    expect_close(to_f64_vector(capped), expected, 1e-5, 1e-5,
                 concat(cpu::isa_name(isa), " soft cap"));
  }
  cpu::reset_isa();
}

TEST(Scale, MultipliesEveryElement) {
  check_unary(
      "scale", [](const Tensor& input) { return scale(input, -0.125); },
      [](double x) { return -0.125 * x; });
}

// Softmax rows of `length` with the double reference.
std::vector<double> softmax_reference(const std::vector<float>& values, int64_t length) {
  std::vector<double> result(values.size());
  for (size_t start = 0; start < values.size(); start += length) {
    double maximum = -INFINITY;
    for (int64_t i = 0; i < length; ++i) maximum = std::max<double>(maximum, values[start + i]);
    double total = 0;
    for (int64_t i = 0; i < length; ++i) total += std::exp(values[start + i] - maximum);
    for (int64_t i = 0; i < length; ++i) {
      result[start + i] = std::exp(values[start + i] - maximum) / total;
    }
  }
  return result;
}

TEST(Softmax, MatchesTheDoubleReferenceOverRowsOfEverySize) {
  for (int64_t length : {1, 3, 17, 4097}) {
    for (DType dtype : kFloatTypes) {
      Dims shape{3, length};
      std::vector<float> values = representable(random_values(shape.product(), 8, -20, 20), dtype);
      std::vector<double> expected = softmax_reference(values, length);
      for (Storage kind : test::kAllStorages) {
        Tensor input = make_tensor(values, shape, dtype, kind);
        std::string context = concat("softmax of ", input.describe());
        expect_close(to_f64_vector(softmax(input)), expected, 1e-7,
                     test::relative_tolerance(dtype) + 1e-5, context);
      }
    }
  }
}

TEST(Softmax, IsStableForHugeLogitsAndHandlesMinusInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor input = from_vector({1000.0f, 999.0f, -1000.0f, -inf}, {1, 4});
  std::vector<double> expected = softmax_reference({1000.0f, 999.0f, -1000.0f, -inf}, 4);
  std::vector<double> actual = to_f64_vector(softmax(input));
  expect_close(actual, expected, 1e-7, 1e-5, "softmax with huge logits");
  EXPECT_EQ(actual[3], 0.0);
}

TEST(Softmax, ReadsABroadcastRowOnceForEveryCopy) {
  std::vector<float> row = random_values(17, 9);
  Tensor input = from_vector(row, {1, 17}).broadcast_as({4, 17});
  std::vector<double> one_row = softmax_reference(row, 17);
  std::vector<double> expected;
  for (int copy = 0; copy < 4; ++copy) expected.insert(expected.end(), one_row.begin(), one_row.end());
  expect_close(to_f64_vector(softmax(input)), expected, 1e-7, 1e-5, "softmax of broadcast rows");
}

TEST(RmsNorm, MatchesTheDoubleReferenceWithWeightsOfAnotherDtype) {
  const double epsilon = 1e-6;
  for (int64_t hidden : {1, 3, 17, 4097}) {
    Dims shape{2, 3, hidden};
    for (DType input_dtype : kFloatTypes) {
      for (DType weight_dtype : kFloatTypes) {
        std::vector<float> values = representable(random_values(shape.product(), 10), input_dtype);
        std::vector<float> weights = representable(random_values(hidden, 11), weight_dtype);
        std::vector<double> expected(values.size());
        for (size_t start = 0; start < values.size(); start += hidden) {
          double squares = 0;
          for (int64_t i = 0; i < hidden; ++i) squares += double(values[start + i]) * values[start + i];
          double inverse = 1.0 / std::sqrt(squares / hidden + epsilon);
          for (int64_t i = 0; i < hidden; ++i) {
            expected[start + i] = values[start + i] * inverse * weights[i];
          }
        }
        for (Storage kind : test::kAllStorages) {
          Tensor input = make_tensor(values, shape, input_dtype, kind);
          Tensor weight = make_tensor(weights, {hidden}, weight_dtype, kind);
          Tensor result = rms_norm(input, weight, epsilon);
          std::string context = concat("rms_norm of ", input.describe(), " by ", weight.describe());
          EXPECT_EQ(result.dtype(), input_dtype) << context;
          expect_close(to_f64_vector(result), expected, 1e-5,
                       test::relative_tolerance(input_dtype) + 1e-5, context);
        }
      }
    }
  }
}

// The product kernel the GEMM's epilogue calls, into bf16 rows at a stride, on every ISA: each
// value is f32_to_bf16 of its f32 product (the same call into f32), also where the product is
// NaN, infinite or subnormal (where vcvtneps2bf16 differs), in whole vectors and in the tail.
TEST(GatedActivation, ProductRowsInBf16AreTheirF32ProductsRoundedEvenAtNanAndSubnormals) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  constexpr int64_t kRows = 3, kCount = 37, kStride = 40;
  std::vector<float> gate = random_values(kRows * kStride, 31, -4, 4);
  std::vector<float> up = random_values(kRows * kStride, 32, -2, 2);
  gate[1] = nan;                     // NaN in a whole vector
  gate[kStride + 3] = 1.0f;          // silu(1) * 1e-38: subnormal
  up[kStride + 3] = 1e-38f;
  gate[2 * kStride + 20] = 90.0f;    // silu(90) * 1e38 overflows to infinity
  up[2 * kStride + 20] = 1e38f;
  gate[2 * kStride + 35] = nan;      // NaN in the tail
  for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(cpu::detected_isa())) continue;
    cpu::set_isa(isa);
    for (GateActivation activation : {GateActivation::silu, GateActivation::gelu_tanh}) {
      std::vector<float> exact(kRows * kStride, 0.0f);
      std::vector<uint16_t> rounded(kRows * kStride, 0);
      cpu::gated_product_rows(activation, gate.data(), kStride, up.data(), kStride, kRows, kCount,
                              exact.data(), false, kStride);
      cpu::gated_product_rows(activation, gate.data(), kStride, up.data(), kStride, kRows, kCount,
                              rounded.data(), true, kStride);
      EXPECT_TRUE(std::isnan(exact[1]));
      EXPECT_EQ(std::fpclassify(exact[kStride + 3]), FP_SUBNORMAL);
      EXPECT_EQ(exact[2 * kStride + 20], inf);
      for (int64_t row = 0; row < kRows; ++row) {
        for (int64_t i = 0; i < kStride; ++i) {
          const int64_t at = row * kStride + i;
          ASSERT_EQ(rounded[at], i < kCount ? f32_to_bf16(exact[at]) : 0)
              << cpu::isa_name(isa) << " activation " << static_cast<int>(activation) << " row "
              << row << " value " << i;
        }
      }
    }
  }
  cpu::reset_isa();
}

// A bf16 model's norms and SwiGLU hand bf16 to the linear layers: from f32 inputs, a bf16
// output holds the f32 result rounded to nearest even, element for element; an integer output
// is refused.
TEST(OutputDtype, NormAndGatedActivationWriteBf16AsTheirF32ResultsRounded) {
  const Dims shape{2, 3, 4097};
  Tensor input = from_vector(random_values(shape.product(), 21, -3, 3), shape);
  Tensor weight = to_dtype(from_vector(random_values(4097, 22), {4097}), DType::bf16);
  Tensor up = from_vector(random_values(shape.product(), 23, -2, 2), shape);
  auto expect_rounded = [](const Tensor& rounded, const Tensor& exact, const std::string& op) {
    ASSERT_EQ(rounded.dtype(), DType::bf16) << op;
    std::vector<float> values = to_f32_vector(exact);
    const auto* bits = rounded.data<uint16_t>();
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(bits[i], f32_to_bf16(values[i])) << op << " element " << i;
    }
  };
  Tensor normed = Tensor::empty(shape, DType::bf16);
  rms_norm_into(normed, input, weight, 1e-6);
  expect_rounded(normed, rms_norm(input, weight, 1e-6), "rms_norm");
  for (GateActivation activation : {GateActivation::silu, GateActivation::gelu_tanh}) {
    Tensor exact = Tensor::empty(shape, DType::f32);
    gated_activation_into(exact, input, up, activation);
    Tensor gated = Tensor::empty(shape, DType::bf16);
    gated_activation_into(gated, input, up, activation);
    expect_rounded(gated, exact, gated_op_name(activation));
  }
  EXPECT_NE(test::error_message([&] {
              rms_norm_into(Tensor::empty(shape, DType::i32), input, weight, 1e-6);
            }).find("rms_norm: output"),
            std::string::npos);
  EXPECT_NE(test::error_message([&] {
              gated_activation_into(Tensor::empty(shape, DType::u32), input, up,
                                    GateActivation::silu);
            }).find("silu_mul: output"),
            std::string::npos);
}

// The residual step before a norm in one pass: the sum left in `hidden` and the norm of it are
// bit for bit add_into, then rms_norm_into, into f32 and bf16 outputs; operands that are not
// contiguous f32 (a transposed update, a bf16 residual) take the two ops themselves.
TEST(RmsNorm, AddedInOnePassGivesExactlyTheAddThenTheNorm) {
  const Dims shape{1, 37, 96};
  Tensor weight = to_dtype(from_vector(random_values(96, 41), {96}), DType::bf16);
  const std::vector<float> start = random_values(shape.product(), 42, -3, 3);
  const std::vector<float> step = random_values(shape.product(), 43, -3, 3);
  struct Case {
    DType hidden_dtype;
    Tensor update;
  };
  const std::vector<Case> cases = {
      {DType::f32, from_vector(step, shape)},
      {DType::f32, from_vector(step, {1, 96, 37}).transpose(1, 2)},
      {DType::bf16, to_dtype(from_vector(step, shape), DType::bf16)}};
  for (const Case& each : cases) {
    for (DType output_dtype : {DType::f32, DType::bf16}) {
      Tensor expected_hidden = to_dtype(from_vector(start, shape), each.hidden_dtype);
      Tensor expected = Tensor::empty(shape, output_dtype);
      add_into(expected_hidden, expected_hidden, each.update);
      rms_norm_into(expected, expected_hidden, weight, 1e-6);
      Tensor hidden = to_dtype(from_vector(start, shape), each.hidden_dtype);
      Tensor output = Tensor::empty(shape, output_dtype);
      add_rms_norm_into(output, hidden, each.update, weight, 1e-6);
      const std::string context =
          hidden.describe() + " + " + each.update.describe() + " into " + output.describe();
      EXPECT_EQ(to_f32_vector(hidden), to_f32_vector(expected_hidden)) << context;
      EXPECT_EQ(to_f32_vector(output), to_f32_vector(expected)) << context;
    }
  }
}

TEST(RmsNorm, RejectsAWeightOfTheWrongLength) {
  std::string message =
      test::error_message([] { rms_norm(zeros({2, 8}), zeros({7}, DType::bf16), 1e-6); });
  EXPECT_NE(message.find("rms_norm: weight bf16[7] does not match the last dim of input f32[2, 8]"),
            std::string::npos)
      << message;
}

TEST(Rope, RotatesHalvesOfTransposedQueriesWithANarrowedTable) {
  // Queries as the model makes them: [B, S, H, D] viewed as [B, H, S, D]; cos and sin rows for
  // positions 5.. of a longer table. Every ISA; halves of 1, 4, 20 (vectors and a partial one)
  // and 32 values.
  for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(cpu::detected_isa())) continue;
    cpu::set_isa(isa);
    for (int64_t head_dim : {2, 8, 40, 64}) {
      const int64_t batch = 2, heads = 3, length = 17, table_length = 30, first = 5;
      int64_t half = head_dim / 2;
      std::vector<float> physical = random_values(batch * length * heads * head_dim, 12);
      Tensor input = from_vector(physical, {batch, length, heads, head_dim}).transpose(1, 2);
      std::vector<float> angles(table_length * half);
      std::vector<float> cos_table(angles.size()), sin_table(angles.size());
      for (int64_t p = 0; p < table_length; ++p) {
        for (int64_t i = 0; i < half; ++i) {
          double angle = p * std::pow(10000.0, -2.0 * i / head_dim);
          cos_table[p * half + i] = static_cast<float>(std::cos(angle));
          sin_table[p * half + i] = static_cast<float>(std::sin(angle));
        }
      }
      Tensor cos = from_vector(cos_table, {table_length, half}).narrow(0, first, length);
      Tensor sin = from_vector(sin_table, {table_length, half}).narrow(0, first, length);
      Tensor result = rope(input, cos, sin);
      ASSERT_EQ(result.shape(), (Dims{batch, heads, length, head_dim}));
      EXPECT_TRUE(result.is_contiguous());
      std::vector<double> expected(result.numel());
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t h = 0; h < heads; ++h) {
          for (int64_t s = 0; s < length; ++s) {
            const float* x = &physical[((b * length + s) * heads + h) * head_dim];
            double* out = &expected[((b * heads + h) * length + s) * head_dim];
            for (int64_t i = 0; i < half; ++i) {
              double c = cos_table[(first + s) * half + i];
              double n = sin_table[(first + s) * half + i];
              out[i] = double(x[i]) * c - double(x[i + half]) * n;
              out[i + half] = double(x[i + half]) * c + double(x[i]) * n;
            }
          }
        }
      }
      expect_close(to_f64_vector(result), expected, 1e-6, 1e-5,
                   concat(cpu::isa_name(isa), " rope of ", input.describe()));
      // Into a bf16 output (a bf16 KV cache's keys): the f32 result, rounded.
      Tensor rounded = zeros(result.shape(), DType::bf16);
      rope_into(rounded, input, cos, sin);
      EXPECT_EQ(to_f32_vector(rounded), to_f32_vector(to_dtype(result, DType::bf16)))
          << cpu::isa_name(isa) << " rope into bf16, head_dim " << head_dim;
      // The same tables as strided views (read through a copy, not in place): the same result.
      auto strided = [&](const std::vector<float>& table) {
        std::vector<float> by_column(table.size());
        for (int64_t p = 0; p < table_length; ++p) {
          for (int64_t i = 0; i < half; ++i) by_column[i * table_length + p] = table[p * half + i];
        }
        return from_vector(by_column, {half, table_length})
            .transpose(0, 1)
            .narrow(0, first, length);
      };
      EXPECT_EQ(to_f32_vector(rope(input, strided(cos_table), strided(sin_table))),
                to_f32_vector(result))
          << cpu::isa_name(isa) << " rope with strided tables, head_dim " << head_dim;
    }
  }
  cpu::reset_isa();
}

TEST(Rope, KeepsBf16InputsInBf16) {
  std::vector<float> values = representable(random_values(2 * 4, 13), DType::bf16);
  Tensor result = rope(from_vector(values, {1, 1, 2, 4}, DType::bf16), ones({2, 2}), zeros({2, 2}));
  EXPECT_EQ(result.dtype(), DType::bf16);
  expect_close(to_f64_vector(result), as_double(values), 0, 0, "rope by angle zero");
}

TEST(Rope, RejectsATableOfTheWrongShape) {
  std::string message = test::error_message(
      [] { rope(zeros({1, 2, 3, 8}), zeros({3, 4}), zeros({4, 4})); });
  EXPECT_NE(message.find("rope: cos f32[3, 4] and sin f32[4, 4] must both be [3, 4] for input "
                         "f32[1, 2, 3, 8]"),
            std::string::npos)
      << message;
  message = test::error_message([] { rope(zeros({1, 2, 3, 7}), zeros({3, 3}), zeros({3, 3})); });
  EXPECT_NE(message.find("rope: input f32[1, 2, 3, 7] must be [..., S, D] with an even D"),
            std::string::npos)
      << message;
}

TEST(Argmax, PicksTheFirstLargestPerRowAsU32OnEveryIsa) {
  for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(cpu::detected_isa())) continue;
    cpu::set_isa(isa);
    for (int64_t length : {1, 3, 17, 4097}) {
      for (Storage kind : test::kAllStorages) {
        Dims shape{3, 2, length};
        std::vector<float> values = random_values(shape.product(), 14);
        // Row 0 ties its last and first elements, row 1 elements 5 and 9 (one vector on every
        // ISA), row 2 two neighbours 15 and 14 from its end; the first must win.
        values[length - 1] = 5.0f;
        values[0] = 5.0f;
        if (length > 9) {
          values[length + 5] = 6.0f;
          values[length + 9] = 6.0f;
          values[3 * length - 15] = 7.0f;
          values[3 * length - 14] = 7.0f;
        }
        Tensor input = make_tensor(values, shape, DType::f32, kind);
        Tensor result = argmax(input);
        ASSERT_EQ(result.dtype(), DType::u32);
        ASSERT_EQ(result.shape(), (Dims{3, 2}));
        std::vector<int64_t> actual = to_i64_vector(result);
        for (int64_t row = 0; row < 6; ++row) {
          int64_t best = 0;
          for (int64_t i = 1; i < length; ++i) {
            if (values[row * length + i] > values[row * length + best]) best = i;
          }
          EXPECT_EQ(actual[row], best)
              << cpu::isa_name(isa) << " row " << row << " of " << input.describe();
        }
      }
    }
  }
  cpu::reset_isa();
}

TEST(Argmax, SkipsNaNAndRejectsAnEmptyLastDim) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(to_i64_vector(argmax(from_vector({nan, 1.0f, 3.0f, nan}, {4})))[0], 2);
  std::vector<float> long_row(37, nan);
  long_row[33] = -1.0f;
  long_row[20] = -2.0f;
  EXPECT_EQ(to_i64_vector(argmax(from_vector(long_row, {37})))[0], 33);
  std::string message = test::error_message([] { argmax(zeros({2, 0})); });
  EXPECT_NE(message.find("argmax: input f32[2, 0] has no last dim to reduce"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace fornace
