// Layout views, contiguity and reshape-as-view rules.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/layout.h"

namespace fornace {
namespace {

TEST(Layout, ContiguousStridesAreRowMajor) {
  Layout layout = Layout::contiguous({2, 3, 4});
  EXPECT_EQ(layout.strides, (Dims{12, 4, 1}));
  EXPECT_TRUE(layout.is_contiguous());
}

TEST(Layout, TransposeSwapsStridesAndIsNotContiguous) {
  Layout layout = Layout::contiguous({2, 3, 4}).transpose(0, 2);
  EXPECT_EQ(layout.shape, (Dims{4, 3, 2}));
  EXPECT_EQ(layout.strides, (Dims{1, 4, 12}));
  EXPECT_FALSE(layout.is_contiguous());
}

TEST(Layout, ExtentOneDimsDoNotBreakContiguity) {
  // [1, S, H, D] viewed as [S, H, 1, D] by swapping the batch dim is still row-major.
  Layout layout = Layout::contiguous({1, 5, 2, 8}).transpose(0, 1).transpose(1, 2);
  EXPECT_TRUE(layout.is_contiguous());
}

TEST(Layout, NarrowMovesOffsetAndChecksRange) {
  Layout layout = Layout::contiguous({4, 6}).narrow(1, 2, 3);
  EXPECT_EQ(layout.offset, 2);
  EXPECT_EQ(layout.shape, (Dims{4, 3}));
  EXPECT_FALSE(layout.is_contiguous());
  try {
    (void)Layout::contiguous({4, 6}).narrow(1, 4, 3);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("narrow"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("[4, 6]"), std::string::npos);
  }
}

TEST(Layout, OutOfRangeDimThrowsNamingTheOp) {
  try {
    (void)Layout::contiguous({2, 3}).transpose(0, 2);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("transpose: dim 2 out of range"), std::string::npos);
  }
}

TEST(Layout, ReshapeOfContiguousIsAView) {
  auto reshaped = Layout::contiguous({2, 3, 4}).reshaped({6, 4});
  ASSERT_TRUE(reshaped.has_value());
  EXPECT_EQ(reshaped->strides, (Dims{4, 1}));
}

TEST(Layout, ReshapeThatSplitsAStridedDimIsAView) {
  // A [4, 6] slice of columns 0..6 of an [4, 12] buffer: splitting 6 into 2x3 keeps a view.
  Layout layout = Layout::contiguous({4, 12}).narrow(1, 0, 6);
  auto reshaped = layout.reshaped({4, 2, 3});
  ASSERT_TRUE(reshaped.has_value());
  EXPECT_EQ(reshaped->strides, (Dims{12, 3, 1}));
}

TEST(Layout, ReshapeThatMergesTransposedDimsNeedsACopy) {
  Layout layout = Layout::contiguous({2, 3}).transpose(0, 1);
  EXPECT_FALSE(layout.reshaped({6}).has_value());
}

TEST(Layout, BroadcastGivesZeroStrides) {
  Layout layout = Layout::contiguous({3, 1}).broadcast_as({2, 3, 4});
  EXPECT_EQ(layout.strides, (Dims{0, 1, 0}));
  EXPECT_THROW((void)Layout::contiguous({3, 2}).broadcast_as({3, 4}), Error);
}

TEST(Layout, UnsqueezeAndSqueezeRoundTrip) {
  Layout layout = Layout::contiguous({3, 4}).unsqueeze(1);
  EXPECT_EQ(layout.shape, (Dims{3, 1, 4}));
  EXPECT_EQ(layout.squeeze(1).shape, (Dims{3, 4}));
  EXPECT_THROW((void)layout.squeeze(0), Error);
}

}  // namespace
}  // namespace fornace
