// The *_into forms: the same values as the allocating ops, in place where allowed, and a clear
// error for an output of the wrong shape, dtype or layout.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/math.h"

namespace fornace {
namespace {

std::vector<float> values(const Tensor& tensor) { return to_f32_vector(tensor); }

TEST(Into, LinearNormRopeAndAttentionMatchTheAllocatingOps) {
  Tensor input = randn({1, 3, 16}, 1);
  Tensor weight = randn({8, 16}, 2, 0.25, DType::bf16);
  Tensor bias = randn({8}, 3, 0.1);
  Tensor out = Tensor::empty({1, 3, 8}, DType::f32);
  linear_into(out, input, weight, bias);
  EXPECT_EQ(values(out), values(linear(input, weight, bias)));

  Tensor norm_weight = randn({16}, 4, 0.1, DType::bf16);
  Tensor normed = Tensor::empty({1, 3, 16}, DType::f32);
  rms_norm_into(normed, input, norm_weight, 1e-6);
  EXPECT_EQ(values(normed), values(rms_norm(input, norm_weight, 1e-6)));

  Tensor heads = input.view({1, 3, 4, 4}).transpose(1, 2);  // [1, 4, 3, 4] view
  Tensor cos = randn({3, 2}, 5);
  Tensor sin = randn({3, 2}, 6);
  Tensor rotated = Tensor::empty({1, 4, 3, 4}, DType::f32);
  rope_into(rotated, heads, cos, sin);
  EXPECT_EQ(values(rotated), values(rope(heads, cos, sin)));

  Tensor key = randn({1, 2, 5, 4}, 7);
  Tensor value = randn({1, 5, 2, 4}, 8).transpose(1, 2);
  Tensor attended = Tensor::empty({1, 4, 3, 4}, DType::f32);
  attention_into(attended, rotated, key, value, 0.5, true);
  EXPECT_EQ(values(attended), values(attention(rotated, key, value, 0.5, true)));
}

TEST(Into, AddAndSiluMulMayWriteOverTheirFirstInput) {
  Tensor left = randn({2, 33}, 9);
  Tensor right = randn({2, 33}, 10);
  std::vector<float> expected_sum = values(add(left, right));
  std::vector<double> gate = to_f64_vector(left);
  std::vector<double> up = to_f64_vector(right);
  add_into(left, left, right);
  EXPECT_EQ(values(left), expected_sum);

  Tensor fresh_gate = from_vector(std::vector<float>(gate.begin(), gate.end()), {2, 33});
  gated_activation_into(fresh_gate, fresh_gate, right, GateActivation::silu);
  std::vector<float> result = values(fresh_gate);
  for (size_t i = 0; i < gate.size(); ++i) {
    double silu = gate[i] / (1.0 + std::exp(-gate[i]));
    EXPECT_NEAR(result[i], silu * up[i], 1e-5 * (1 + std::abs(silu * up[i]))) << i;
  }
}

TEST(Into, IndexSelectConvertsRowsToTheOutputDtype) {
  Tensor table = randn({5, 4}, 11, 1.0, DType::bf16);
  Tensor ids = from_ids({3, 0, 3}, {1, 3});
  Tensor rows = Tensor::empty({1, 3, 4}, DType::f32);
  index_select_into(rows, table, ids);
  EXPECT_EQ(values(rows), values(index_select(table, ids)));
}

TEST(Into, RejectsAnOutputOfTheWrongShapeDtypeOrLayout) {
  Tensor input = randn({2, 8}, 12);
  Tensor weight = randn({8}, 13);
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  std::string wrong_shape =
      message([&] { rms_norm_into(Tensor::empty({2, 7}, DType::f32), input, weight, 1e-6); });
  EXPECT_NE(wrong_shape.find("rms_norm: output f32[2, 7] must be a writable contiguous f32[2, 8]"),
            std::string::npos)
      << wrong_shape;
  std::string wrong_dtype =
      message([&] { add_into(Tensor::empty({2, 8}, DType::bf16), input, input); });
  EXPECT_NE(wrong_dtype.find("add_into: output bf16[2, 8]"), std::string::npos) << wrong_dtype;
  std::string strided = message(
      [&] { add_into(Tensor::empty({8, 2}, DType::f32).transpose(0, 1), input, input); });
  EXPECT_NE(strided.find("(strided) must be a writable contiguous"), std::string::npos) << strided;
}

}  // namespace
}  // namespace fornace
