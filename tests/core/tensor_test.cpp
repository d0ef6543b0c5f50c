// Tensor views: reshape as a view or a copy, permute, narrow, squeeze/unsqueeze, broadcast_as,
// contiguity, and the messages of bad view arguments.
#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "core/error.h"
#include "core/memory.h"
#include "core/tensor.h"
#include "ops/copy.h"
#include "ops/creation.h"

namespace fornace {
namespace {

// 0, 1, 2, ... as f32 in `shape`.
Tensor iota(const Dims& shape) {
  std::vector<float> values(shape.product());
  std::iota(values.begin(), values.end(), 0.0f);
  return from_vector(values, shape);
}

std::vector<float> values_of(const Tensor& tensor) { return to_f32_vector(tensor); }

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a fornace::Error";
  return "";
}

TEST(Views, TransposeAndPermuteShareStorageAndReorderValues) {
  Tensor base = iota({2, 3, 4});
  Tensor permuted = base.permute({2, 0, 1});
  EXPECT_TRUE(permuted.shares_storage(base));
  EXPECT_EQ(permuted.shape(), (Dims{4, 2, 3}));
  EXPECT_EQ(permuted.strides(), (Dims{1, 12, 4}));
  EXPECT_FALSE(permuted.is_contiguous());
  std::vector<float> values = values_of(permuted);
  // permuted[k][i][j] == base[i][j][k] == 12 i + 4 j + k.
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_EQ(values[(k * 2 + i) * 3 + j], 12 * i + 4 * j + k);
  Tensor transposed = base.transpose(0, -1);
  EXPECT_EQ(transposed.shape(), (Dims{4, 3, 2}));
  EXPECT_EQ(values_of(transposed)[1], 12.0f);  // [0][0][1] is base[1][0][0]
}

TEST(Views, NarrowMovesTheOffsetWithoutCopying) {
  Tensor base = iota({4, 6});
  int64_t live = memory::device_memory().live_bytes;
  Tensor narrowed = base.narrow(1, 2, 3).narrow(0, 1, 2);
  EXPECT_EQ(memory::device_memory().live_bytes, live);
  EXPECT_TRUE(narrowed.shares_storage(base));
  EXPECT_EQ(narrowed.layout().offset, 1 * 6 + 2);
  EXPECT_EQ(values_of(narrowed), (std::vector<float>{8, 9, 10, 14, 15, 16}));
  // Narrowing only the outer dim keeps a contiguous block.
  EXPECT_TRUE(base.narrow(0, 1, 2).is_contiguous());
  EXPECT_FALSE(narrowed.is_contiguous());
}

TEST(Views, SqueezeAndUnsqueezeAddAndDropUnitDims) {
  Tensor base = iota({3, 1, 4});
  Tensor squeezed = base.squeeze(1);
  EXPECT_EQ(squeezed.shape(), (Dims{3, 4}));
  EXPECT_TRUE(squeezed.is_contiguous());
  Tensor unsqueezed = squeezed.unsqueeze(0).unsqueeze(-1);
  EXPECT_EQ(unsqueezed.shape(), (Dims{1, 3, 4, 1}));
  EXPECT_TRUE(unsqueezed.is_contiguous());
  EXPECT_EQ(values_of(unsqueezed), values_of(base));
  EXPECT_TRUE(unsqueezed.shares_storage(base));
}

TEST(Views, BroadcastAsUsesZeroStrides) {
  Tensor row = iota({1, 3});
  Tensor broadcast = row.broadcast_as({2, 4, 3});
  EXPECT_EQ(broadcast.strides(), (Dims{0, 0, 1}));
  EXPECT_TRUE(broadcast.shares_storage(row));
  EXPECT_FALSE(broadcast.is_contiguous());
  std::vector<float> values = values_of(broadcast);
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(values[i], float(i % 3));
  // Materialising it copies 24 elements.
  Tensor copy = contiguous(broadcast);
  EXPECT_FALSE(copy.shares_storage(row));
  EXPECT_TRUE(copy.is_contiguous());
  EXPECT_EQ(values_of(copy), values);
}

TEST(Views, ContiguousOfAContiguousTensorReturnsTheSameStorage) {
  Tensor base = iota({2, 3});
  CopyBytes before = memory::copy_bytes();
  Tensor same = contiguous(base);
  EXPECT_TRUE(same.shares_storage(base));
  EXPECT_EQ(memory::copy_bytes().contiguous, before.contiguous);
  EXPECT_EQ(memory::copy_bytes().strided, before.strided);
  Tensor copy = contiguous(base.transpose(0, 1));
  EXPECT_FALSE(copy.shares_storage(base));
  EXPECT_EQ(values_of(copy), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(memory::copy_bytes().strided - before.strided, 6 * 4);
}

TEST(Views, ReshapeIsAViewWhenStridesAllowAndACopyOtherwise) {
  Tensor base = iota({2, 3, 4});
  Tensor view = reshape(base, {6, -1});
  EXPECT_TRUE(view.shares_storage(base));
  EXPECT_EQ(view.shape(), (Dims{6, 4}));
  // Splitting a dim of a narrowed (strided) view is still a view.
  Tensor split = reshape(base.narrow(2, 0, 2), {2, 3, 2, 1});
  EXPECT_TRUE(split.shares_storage(base));
  // Merging transposed dims needs a copy; the values follow the logical order.
  Tensor merged = reshape(base.transpose(1, 2), {2, 12});
  EXPECT_FALSE(merged.shares_storage(base));
  EXPECT_TRUE(merged.is_contiguous());
  std::vector<float> values = values_of(merged);
  EXPECT_EQ(values[1], 4.0f);  // [0][0][1] of the transposed view is base[0][1][0]
  // Tensor::view refuses what would need a copy, naming the op and the shapes.
  std::string message = message_of([&] { base.transpose(1, 2).view({2, 12}); });
  EXPECT_NE(message.find("view: cannot view f32[2, 4, 3] (strided) as [2, 12] without a copy"),
            std::string::npos)
      << message;
}

TEST(Views, BadArgumentsNameTheOpAndTheShape) {
  Tensor base = iota({2, 3});
  std::string message = message_of([&] { base.narrow(1, 2, 2); });
  EXPECT_NE(message.find("narrow: range [2, 4) out of bounds for dim 1 of shape [2, 3]"),
            std::string::npos)
      << message;
  message = message_of([&] { base.narrow(0, -1, 1); });
  EXPECT_NE(message.find("narrow: range [-1, 0)"), std::string::npos) << message;
  message = message_of([&] { base.squeeze(0); });
  EXPECT_NE(message.find("squeeze: dim 0 of shape [2, 3] is not 1"), std::string::npos) << message;
  message = message_of([&] { base.unsqueeze(4); });
  EXPECT_NE(message.find("unsqueeze: dim 4 out of range for rank 3"), std::string::npos) << message;
  message = message_of([&] { base.broadcast_as({3, 3}); });
  EXPECT_NE(message.find("broadcast_as: cannot broadcast [2, 3] to [3, 3]"), std::string::npos)
      << message;
  message = message_of([&] { base.permute({0, 0}); });
  EXPECT_NE(message.find("permute: dim 0 repeated"), std::string::npos) << message;
  message = message_of([&] { base.transpose(0, 2); });
  EXPECT_NE(message.find("transpose: dim 2 out of range for rank 2"), std::string::npos)
      << message;
  message = message_of([&] { reshape(base, {4, 2}); });
  EXPECT_NE(message.find("reshape: cannot reshape [2, 3] (6 elements) to [4, 2]"),
            std::string::npos)
      << message;
  message = message_of([&] { Tensor::empty({2, -3}, DType::f32); });
  EXPECT_NE(message.find("empty: negative extent in shape [2, -3]"), std::string::npos) << message;
  message = message_of([&] { base.dim(5); });
  EXPECT_NE(message.find("dim: dim 5 out of range for rank 2"), std::string::npos) << message;
}

TEST(Views, DescribeShowsDtypeShapeAndStridedness) {
  Tensor base = zeros({1, 14, 7, 64}, DType::bf16);
  EXPECT_EQ(base.describe(), "bf16[1, 14, 7, 64]");
  EXPECT_EQ(base.transpose(1, 2).describe(), "bf16[1, 7, 14, 64] (strided)");
}

}  // namespace
}  // namespace fornace
