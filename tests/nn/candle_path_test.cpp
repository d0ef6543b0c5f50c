// Candle's repeat_kv and attention op sequence against loops and against the fused attention.
#include "nn/candle_path.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/relative_error.h"
#include "core/error.h"
#include "core/memory.h"
#include "ops/creation.h"
#include "ops/math.h"

namespace fornace {
namespace {

constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = 64;

// V as a projection leaves it: [1, S, H, D] viewed as [1, H, S, D].
Tensor transposed_view(int64_t length, uint64_t seed, DType dtype = DType::f32) {
  return randn({1, length, kKvHeads, kHeadDim}, seed, 1.0, dtype).transpose(1, 2);
}

TEST(RepeatKv, GivesEachQueryHeadItsKvHeadInAnyLayout) {
  for (bool transposed : {false, true}) {
    Tensor x = transposed ? transposed_view(5, 1) : randn({1, kKvHeads, 5, kHeadDim}, 1);
    Tensor repeated = repeat_kv(x, 3);
    ASSERT_EQ(repeated.shape(), (Dims{1, kKvHeads * 3, 5, kHeadDim}));
    std::vector<float> source = to_f32_vector(x);
    std::vector<float> result = to_f32_vector(repeated);
    for (int64_t head = 0; head < kKvHeads * 3; ++head) {
      for (int64_t i = 0; i < 5 * kHeadDim; ++i) {
        ASSERT_EQ(result[head * 5 * kHeadDim + i], source[(head / 3) * 5 * kHeadDim + i])
            << "head " << head << " element " << i;
      }
    }
  }
}

// Candle's cat on a transposed view goes through its transposed path, whose inputs are one block
// each for batch 1: contiguous copies of repeats x the tensor. The reshape then copies the
// transposed result through the strided copy in runs of one head_dim.
TEST(RepeatKv, CopiesATransposedViewInRunsOfOneHeadDim) {
  constexpr int64_t kLength = 33;
  constexpr int64_t kRepeats = 7;
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor x = transposed_view(kLength, 2, dtype);
    int64_t bytes = kRepeats * kKvHeads * kLength * kHeadDim * dtype_size(dtype);
    CopyBytes before = memory::copy_bytes();
    Tensor repeated = repeat_kv(x, kRepeats);
    CopyBytes after = memory::copy_bytes();
    EXPECT_TRUE(repeated.is_contiguous());
    EXPECT_EQ(after.contiguous - before.contiguous, bytes);
    EXPECT_EQ(after.strided - before.strided, bytes);
    EXPECT_EQ(after.strided_runs - before.strided_runs, kRepeats * kKvHeads * kLength);

    // A contiguous input repeats by block copies alone, and the reshape is a view.
    Tensor contiguous_x = randn({1, kKvHeads, kLength, kHeadDim}, 3, 1.0, dtype);
    before = memory::copy_bytes();
    repeat_kv(contiguous_x, kRepeats);
    after = memory::copy_bytes();
    EXPECT_EQ(after.contiguous - before.contiguous, bytes);
    EXPECT_EQ(after.strided - before.strided, 0);
  }
}

TEST(CandleAttention, MatchesTheFusedAttentionForPromptsAndDecodeSteps) {
  constexpr int64_t kQueryHeads = 14;
  const double scale = 1.0 / std::sqrt(double(kHeadDim));
  struct Case {
    int64_t query_length, key_length;
  };
  uint64_t seed = 10;
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (Case shape : {Case{1, 1}, Case{1, 40}, Case{7, 7}, Case{5, 19}}) {
      for (bool transposed_value : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(shape.query_length) +
                     " of " + std::to_string(shape.key_length) +
                     (transposed_value ? ", V transposed" : ""));
        Tensor query = randn({1, kQueryHeads, shape.query_length, kHeadDim}, seed++);
        Tensor key = randn({1, kKvHeads, shape.key_length, kHeadDim}, seed++, 1.0, dtype);
        Tensor value = transposed_value
                           ? transposed_view(shape.key_length, seed++, dtype)
                           : randn({1, kKvHeads, shape.key_length, kHeadDim}, seed++, 1.0, dtype);
        Tensor candle = candle_attention(query, key, value, scale);
        Tensor fused = attention(query, key, value, scale, true);
        ASSERT_EQ(candle.shape(), fused.shape());
        // A bf16 K rounds the query to bf16 in q · kᵀ, as a bf16 matmul does.
        EXPECT_LE(relative_l2(to_f32_vector(candle), to_f32_vector(fused)),
                  dtype == DType::f32 ? 1e-5 : 1e-2);
      }
    }
  }
}

TEST(AttentionPath, ParsesItsNamesAndRejectsOthers) {
  EXPECT_EQ(parse_attention_path("fused"), AttentionPath::fused);
  EXPECT_EQ(parse_attention_path("candle"), AttentionPath::candle);
  EXPECT_STREQ(attention_path_name(AttentionPath::candle), "candle");
  try {
    parse_attention_path("flash");
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("fused or candle"), std::string::npos);
  }
}

}  // namespace
}  // namespace fornace
