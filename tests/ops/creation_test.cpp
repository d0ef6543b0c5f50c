// Creation ops: full/zeros/ones, from_vector/from_ids, seeded randn, and reading back.
#include "ops/creation.h"

#include <gtest/gtest.h>

#include <cmath>

#include "test_tensors.h"

namespace fornace {
namespace {

TEST(Creation, FullZerosAndOnesInEveryDtype) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::u32}) {
    Tensor filled = full({2, 3}, 7.0, dtype);
    EXPECT_EQ(filled.dtype(), dtype);
    EXPECT_EQ(filled.shape(), (Dims{2, 3}));
    EXPECT_TRUE(filled.is_contiguous());
    EXPECT_EQ(to_f64_vector(filled), std::vector<double>(6, 7.0)) << dtype_name(dtype);
    EXPECT_EQ(to_f64_vector(zeros({4}, dtype)), std::vector<double>(4, 0.0));
    EXPECT_EQ(to_f64_vector(ones({1}, dtype)), std::vector<double>(1, 1.0));
  }
  // bf16 rounds the fill value: 1 + 2^-8 is a tie that goes to 1.
  EXPECT_EQ(to_f64_vector(full({1}, 1.0 + std::ldexp(1.0, -8), DType::bf16))[0], 1.0);
}

TEST(Creation, FullKeepsLargeIntegersExact) {
  EXPECT_EQ(to_i64_vector(full({1}, 16777217.0, DType::i32))[0], 16777217);
  EXPECT_EQ(to_i64_vector(full({1}, 4000000000.0, DType::u32))[0], 4000000000LL);
  EXPECT_EQ(to_i64_vector(full({1}, -5.0, DType::i32))[0], -5);
}

TEST(Creation, FromVectorConvertsAndChecksTheCount) {
  Tensor values = from_vector({1.5f, -2.0f, 3.25f}, {3}, DType::f16);
  EXPECT_EQ(to_f32_vector(values), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  std::string message = test::error_message([] { from_vector({1, 2, 3}, {2, 2}); });
  EXPECT_NE(message.find("from_vector: 3 values for shape [2, 2]"), std::string::npos) << message;
  message = test::error_message([] { from_ids({1, 2, 3}, {4}); });
  EXPECT_NE(message.find("from_ids: 3 values for shape [4]"), std::string::npos) << message;
}

TEST(Creation, FromIdsKeepsU32AndI32Exact) {
  Tensor ids = from_ids({0, 151935, 2147483647}, {3}, DType::u32);
  EXPECT_EQ(ids.dtype(), DType::u32);
  EXPECT_EQ(to_i64_vector(ids), (std::vector<int64_t>{0, 151935, 2147483647}));
  EXPECT_EQ(to_i64_vector(from_ids({-7, 7}, {2}, DType::i32)), (std::vector<int64_t>{-7, 7}));
}

TEST(Creation, RandnIsSeededAndNormal) {
  Tensor first = randn({100001}, 42, 2.0);
  Tensor again = randn({100001}, 42, 2.0);
  Tensor other = randn({100001}, 43, 2.0);
  std::vector<float> values = to_f32_vector(first);
  EXPECT_EQ(values, to_f32_vector(again));
  EXPECT_NE(values, to_f32_vector(other));
  double mean = 0, square = 0;
  for (float value : values) {
    mean += value;
    square += double(value) * value;
  }
  mean /= values.size();
  double deviation = std::sqrt(square / values.size() - mean * mean);
  // Standard error of the mean is 2 / sqrt(1e5) ~ 0.006; of the deviation ~ 0.0045.
  EXPECT_NEAR(mean, 0.0, 0.03);
  EXPECT_NEAR(deviation, 2.0, 0.03);
  Tensor half = randn({3, 5}, 42, 1.0, DType::bf16);
  EXPECT_EQ(half.dtype(), DType::bf16);
  EXPECT_EQ(half.shape(), (Dims{3, 5}));
}

TEST(Creation, ReadingBackFollowsTheLogicalOrderOfViews) {
  Tensor base = from_vector({0, 1, 2, 3, 4, 5}, {2, 3});
  EXPECT_EQ(to_f32_vector(base.transpose(0, 1)), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(to_i64_vector(base.narrow(1, 1, 2)), (std::vector<int64_t>{1, 2, 4, 5}));
  EXPECT_EQ(to_f64_vector(base.broadcast_as({2, 2, 3}))[7], 1.0);
}

}  // namespace
}  // namespace fornace
