// cat (Candle's block and strided paths, and a growing transposed cache), slice_set,
// index_select, to_dtype and copy_into: values, layouts, copy counters and error messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <numeric>

#include "core/memory.h"
#include "cpu/cpu_features.h"
#include "cpu/thread_pool.h"
#include "ops/copy.h"
#include "test_tensors.h"

namespace fornace {
namespace {

using test::error_message;
using test::random_values;

// Logical [B, S, H, D] values; element (b, s, h, d) of the plain loops below.
struct Projection {
  int64_t batch, length, heads, head_dim;
  std::vector<float> values;
  float at(int64_t b, int64_t s, int64_t h, int64_t d) const {
    return values[((b * length + s) * heads + h) * head_dim + d];
  }
  // [B, S, H, D] viewed as [B, H, S, D], as Qwen2 attention does with V.
  Tensor transposed_view() const {
    return from_vector(values, {batch, length, heads, head_dim}).transpose(1, 2);
  }
};

Projection projection(int64_t length, uint64_t seed) {
  Projection result{2, length, 3, 4, {}};
  result.values = random_values(2 * length * 3 * 4, seed);
  return result;
}

int64_t bytes_of(const Tensor& tensor) {
  return tensor.numel() * static_cast<int64_t>(tensor.element_size());
}

TEST(Cat, ContiguousInputsTakeTheBlockPathAndGiveAContiguousResult) {
  for (int64_t dim : {0, 1, 2}) {
    Dims first_shape{2, 3, 4}, second_shape{2, 3, 4};
    first_shape[dim] = 1;
    second_shape[dim] = 3;
    std::vector<float> first_values = random_values(first_shape.product(), 1);
    std::vector<float> second_values = random_values(second_shape.product(), 2);
    Tensor first = from_vector(first_values, first_shape);
    Tensor second = from_vector(second_values, second_shape);
    CopyBytes before = memory::copy_bytes();
    Tensor result = cat({first, second}, dim);
    CopyBytes after = memory::copy_bytes();
    EXPECT_TRUE(result.is_contiguous());
    Dims shape{2, 3, 4};
    shape[dim] = 4;
    ASSERT_EQ(result.shape(), shape);
    EXPECT_EQ(after.contiguous - before.contiguous, bytes_of(result)) << "dim " << dim;
    EXPECT_EQ(after.strided - before.strided, 0) << "dim " << dim;
    std::vector<float> values = to_f32_vector(result);
    for (int64_t flat = 0; flat < shape.product(); ++flat) {
      std::vector<int64_t> index = test::unravel(flat, shape);
      float expected;
      if (index[dim] < 1) {
        expected = first_values[test::ravel(index, first_shape)];
      } else {
        index[dim] -= 1;
        expected = second_values[test::ravel(index, second_shape)];
      }
      ASSERT_EQ(values[flat], expected) << "dim " << dim << ", element " << flat;
    }
  }
}

TEST(Cat, TransposedViewsAlongDim2TakeTheStridedPathAndStayNonContiguous) {
  Projection past = projection(5, 3);
  Projection step = projection(2, 4);
  Tensor left = past.transposed_view();
  Tensor right = step.transposed_view();
  ASSERT_FALSE(left.is_contiguous());
  CopyBytes before = memory::copy_bytes();
  Tensor result = cat({left, right}, 2);
  CopyBytes after = memory::copy_bytes();
  ASSERT_EQ(result.shape(), (Dims{2, 3, 7, 4}));
  EXPECT_FALSE(result.is_contiguous());
  EXPECT_EQ(after.strided - before.strided, bytes_of(result));
  EXPECT_EQ(after.contiguous - before.contiguous, 0);
  std::vector<float> values = to_f32_vector(result);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t s = 0; s < 7; ++s)
        for (int64_t d = 0; d < 4; ++d) {
          float expected = s < 5 ? past.at(b, s, h, d) : step.at(b, s - 5, h, d);
          ASSERT_EQ(values[((b * 3 + h) * 7 + s) * 4 + d], expected);
        }
}

TEST(Cat, AGrowingTransposedCacheCopiesTheWholeCacheEveryStep) {
  // As the cat KV cache does: cache = cat([cache, v], 2) with V a transposed view. The result
  // stays non-contiguous, so every step takes the strided path again and copies the whole
  // cache. As in Candle, the previous result moved back to dim 0 is one block, so that part
  // goes by memcpy (contiguous bytes); the new transposed step goes element by element.
  Projection prompt = projection(4, 5);
  Tensor cache = prompt.transposed_view();
  std::vector<Projection> steps;
  for (int step = 0; step < 8; ++step) {
    steps.push_back(projection(1, 10 + step));
    Tensor value = steps.back().transposed_view();
    int64_t previous_bytes = bytes_of(cache);
    bool previous_contiguous_at_dim0 = cache.transpose(0, 2).is_contiguous();
    CopyBytes before = memory::copy_bytes();
    cache = cat({cache, value}, 2);
    CopyBytes after = memory::copy_bytes();
    EXPECT_FALSE(cache.is_contiguous()) << "step " << step;
    EXPECT_EQ(after.contiguous - before.contiguous + after.strided - before.strided,
              bytes_of(cache))
        << "step " << step;
    EXPECT_EQ(after.strided - before.strided,
              bytes_of(value) + (previous_contiguous_at_dim0 ? 0 : previous_bytes))
        << "step " << step;
    EXPECT_EQ(previous_contiguous_at_dim0, step > 0) << "step " << step;
  }
  ASSERT_EQ(cache.shape(), (Dims{2, 3, 12, 4}));
  std::vector<float> values = to_f32_vector(cache);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t s = 0; s < 12; ++s)
        for (int64_t d = 0; d < 4; ++d) {
          float expected = s < 4 ? prompt.at(b, s, h, d) : steps[s - 4].at(b, 0, h, d);
          ASSERT_EQ(values[((b * 3 + h) * 12 + s) * 4 + d], expected) << "position " << s;
        }
}

TEST(Cat, ContiguousInputsMadeFirstStayContiguous) {
  // The cat-contiguous kind: contiguous() first, then the block path.
  Projection past = projection(3, 6);
  Projection step = projection(1, 7);
  Tensor result = cat({contiguous(past.transposed_view()), contiguous(step.transposed_view())}, 2);
  EXPECT_TRUE(result.is_contiguous());
  EXPECT_EQ(to_f32_vector(result), to_f32_vector(cat({past.transposed_view(),
                                                      step.transposed_view()}, 2)));
}

TEST(Cat, StridedInputsAlongDim0AndBf16) {
  std::vector<float> values = test::representable(random_values(3 * 4, 8), DType::bf16);
  Tensor transposed = from_vector(values, {3, 4}, DType::bf16).transpose(0, 1);  // [4, 3]
  Tensor result = cat({transposed, transposed.narrow(0, 1, 2)}, 0);
  ASSERT_EQ(result.shape(), (Dims{6, 3}));
  EXPECT_EQ(result.dtype(), DType::bf16);
  std::vector<float> actual = to_f32_vector(result);
  for (int64_t row = 0; row < 6; ++row)
    for (int64_t column = 0; column < 3; ++column) {
      int64_t source_row = row < 4 ? row : row - 4 + 1;
      EXPECT_EQ(actual[row * 3 + column], values[column * 4 + source_row]);
    }
}

TEST(Cat, RejectsMismatchedInputsNamingTheShapes) {
  std::string message = error_message([] { cat({zeros({2, 3}), zeros({2, 4})}, 0); });
  EXPECT_NE(message.find("cat: along dim 0, f32[2, 3] and f32[2, 4] do not match"),
            std::string::npos)
      << message;
  message = error_message([] { cat({zeros({2, 3}), zeros({2, 3}, DType::bf16)}, 1); });
  EXPECT_NE(message.find("cat: along dim 1, f32[2, 3] and bf16[2, 3] do not match"),
            std::string::npos)
      << message;
  message = error_message([] { cat({zeros({2, 3}), zeros({2, 3})}, 2); });
  EXPECT_NE(message.find("cat: dim 2 out of range for rank 2"), std::string::npos) << message;
  message = error_message([] { cat({}, 0); });
  EXPECT_NE(message.find("cat: no inputs"), std::string::npos) << message;
}

TEST(SliceSet, WritesTheRowsAtTheOffset) {
  Tensor destination = zeros({2, 3, 8, 4});
  std::vector<float> source_values = random_values(2 * 3 * 2 * 4, 9);
  slice_set(destination, from_vector(source_values, {2, 3, 2, 4}), 2, 5);
  std::vector<float> values = to_f32_vector(destination);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t s = 0; s < 8; ++s)
        for (int64_t d = 0; d < 4; ++d) {
          float expected =
              s >= 5 && s < 7 ? source_values[((b * 3 + h) * 2 + (s - 5)) * 4 + d] : 0.0f;
          ASSERT_EQ(values[((b * 3 + h) * 8 + s) * 4 + d], expected);
        }
}

TEST(SliceSet, RejectsANonContiguousSourceWithAClearError) {
  Tensor destination = zeros({2, 3, 8, 4});
  Tensor strided = projection(2, 10).transposed_view();  // [2, 3, 2, 4], strided
  std::string message = error_message([&] { slice_set(destination, strided, 2, 0); });
  EXPECT_NE(message.find("slice_set: source f32[2, 3, 2, 4] (strided) must be contiguous; call "
                         "contiguous() first"),
            std::string::npos)
      << message;
  // The same values made contiguous are accepted.
  slice_set(destination, contiguous(strided), 2, 0);
}

TEST(SliceSet, RejectsBadRangesShapesAndDestinations) {
  Tensor destination = zeros({2, 8});
  std::string message = error_message([&] { slice_set(destination, zeros({2, 3}), 1, 6); });
  EXPECT_NE(message.find("slice_set: rows [6, 9) out of range for dim 1 of f32[2, 8]"),
            std::string::npos)
      << message;
  message = error_message([&] { slice_set(destination, zeros({3, 3}), 1, 0); });
  EXPECT_NE(message.find("slice_set: source f32[3, 3] does not match destination f32[2, 8] "
                         "outside dim 1"),
            std::string::npos)
      << message;
  message = error_message([&] { slice_set(destination, zeros({2, 3}, DType::f16), 1, 0); });
  EXPECT_NE(message.find("slice_set: source f16[2, 3] does not match destination f32[2, 8]"),
            std::string::npos)
      << message;
  message = error_message([&] { slice_set(zeros({8, 2}).transpose(0, 1), zeros({2, 3}), 1, 0); });
  EXPECT_NE(message.find("slice_set: destination f32[2, 8] (strided) must be contiguous"),
            std::string::npos)
      << message;
}

TEST(IndexSelect, PicksRowsForU32AndI32IdsFromAnyLayout) {
  std::vector<float> table_values = random_values(10 * 4, 11);
  std::vector<int32_t> ids = {3, 0, 9, 3, 7, 1};
  for (DType id_dtype : {DType::u32, DType::i32}) {
    for (test::Storage kind : test::kAllStorages) {
      Tensor table = test::make_tensor(table_values, {10, 4}, DType::f32, kind);
      Tensor result = index_select(table, from_ids(ids, {2, 3}, id_dtype));
      ASSERT_EQ(result.shape(), (Dims{2, 3, 4}));
      std::vector<float> values = to_f32_vector(result);
      for (size_t i = 0; i < ids.size(); ++i)
        for (int64_t d = 0; d < 4; ++d) {
          ASSERT_EQ(values[i * 4 + d], table_values[ids[i] * 4 + d]) << table.describe();
        }
    }
  }
}

// A prompt's worth of ids is split across two threads: every row still lands in its place, and
// an id out of range at the end of the list is refused before any row is written.
TEST(IndexSelect, SplitsLongIdListsAcrossThreads) {
  set_num_threads(2);
  std::vector<float> table_values = random_values(50 * 3, 12);
  Tensor table = from_vector(table_values, {50, 3});
  std::vector<int32_t> ids(203);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37 + 11) % 50);
  std::vector<float> values = to_f32_vector(index_select(table, from_ids(ids, {1, 203})));
  ASSERT_EQ(values.size(), ids.size() * 3);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t d = 0; d < 3; ++d) ASSERT_EQ(values[i * 3 + d], table_values[ids[i] * 3 + d]) << i;
  }
  ids.back() = 50;
  Tensor output = full({1, 203, 3}, 7.0f);
  std::string message =
      error_message([&] { index_select_into(output, table, from_ids(ids, {1, 203})); });
  EXPECT_NE(message.find("index_select: id 50 out of range"), std::string::npos) << message;
  std::vector<float> untouched = to_f32_vector(output);
  EXPECT_EQ(std::count(untouched.begin(), untouched.end(), 7.0f), 203 * 3);
  set_num_threads(0);
}

TEST(IndexSelect, RejectsOutOfRangeAndNonIntegerIds) {
  Tensor table = zeros({10, 4}, DType::bf16);
  std::string message =
      error_message([&] { index_select(table, from_ids({1, 10}, {2}, DType::u32)); });
  EXPECT_NE(message.find("index_select: id 10 out of range for 10 rows of bf16[10, 4]"),
            std::string::npos)
      << message;
  message = error_message([&] { index_select(table, from_ids({-1}, {1}, DType::i32)); });
  EXPECT_NE(message.find("index_select: id -1 out of range"), std::string::npos) << message;
  message = error_message([&] { index_select(table, zeros({2})); });
  EXPECT_NE(message.find("index_select: ids must be u32 or i32, got f32[2]"), std::string::npos)
      << message;
}

TEST(ToDtype, ConvertsStridedInputsAndCountsTheCopy) {
  std::vector<float> values = random_values(3 * 5, 12);
  Tensor transposed = from_vector(values, {3, 5}).transpose(0, 1);
  CopyBytes before = memory::copy_bytes();
  Tensor result = to_dtype(transposed, DType::bf16);
  CopyBytes after = memory::copy_bytes();
  EXPECT_TRUE(result.is_contiguous());
  EXPECT_EQ(result.dtype(), DType::bf16);
  EXPECT_EQ(after.strided - before.strided, bytes_of(result));
  std::vector<float> actual = to_f32_vector(result);
  std::vector<float> expected = test::representable(to_f32_vector(transposed), DType::bf16);
  EXPECT_EQ(actual, expected);
  // Same dtype and contiguous: the tensor itself.
  Tensor same = from_vector(values, {3, 5});
  EXPECT_TRUE(to_dtype(same, DType::f32).shares_storage(same));
}

TEST(ToDtype, RoundsContiguousF32ToBf16BitForBitAsTheScalarDoesOnEveryIsa) {
  // Ties to even both ways, the largest finite values (which round to infinity), infinities,
  // NaNs (quiet and signalling, both signs), denormals and zeros, then random values; an odd
  // length, so that the vector loops' tails run too. f32_to_bf16 is checked against an
  // independent decoder in dtype_test.cpp.
  std::vector<uint32_t> bits = {0x3f808000u, 0x3f818000u, 0x3f80c000u, 0x7f7fffffu, 0xff7fffffu,
                                0x7f800000u, 0xff800000u, 0x7fc00001u, 0x7f800001u, 0xffa00000u,
                                0x00000001u, 0x807fffffu, 0x00008000u, 0x00000000u, 0x80000000u};
  std::vector<float> values;
  for (uint32_t word : bits) values.push_back(std::bit_cast<float>(word));
  for (float value : random_values(1000, 14)) values.push_back(value * 1e3f);
  // Each special value once more among the random ones, alone in a run of 32, in a lane of
  // either half, so that a vector loop must find it wherever it is.
  for (size_t index = 0; index < bits.size(); ++index) {
    values[64 + 32 * index + (index * 7) % 32] = std::bit_cast<float>(bits[index]);
  }
  std::vector<uint16_t> expected;
  for (float value : values) expected.push_back(f32_to_bf16(value));
  const cpu::Isa detected = cpu::detected_isa();
  for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (isa > detected) continue;
    cpu::set_isa(isa);
    Tensor result = to_dtype(from_vector(values, {static_cast<int64_t>(values.size())}),
                             DType::bf16);
    const auto* words = static_cast<const uint16_t*>(result.raw());
    std::vector<uint16_t> actual(words, words + values.size());
    EXPECT_EQ(actual, expected) << cpu::isa_name(isa);
  }
  cpu::reset_isa();
}

TEST(ToDtype, IntegersAndFloatsConvertBothWays) {
  Tensor ids = from_ids({0, 7, 123456}, {3}, DType::u32);
  EXPECT_EQ(to_f32_vector(to_dtype(ids, DType::f32)), (std::vector<float>{0, 7, 123456}));
  EXPECT_EQ(to_i64_vector(to_dtype(ids, DType::i32)), (std::vector<int64_t>{0, 7, 123456}));
}

TEST(CopyInto, CopiesBetweenLayoutsAndRejectsShapeMismatch) {
  std::vector<float> values = random_values(4 * 6, 13);
  Tensor destination = zeros({6, 4});
  copy_into(destination.transpose(0, 1), from_vector(values, {4, 6}));
  std::vector<float> actual = to_f32_vector(destination);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 6; ++c) EXPECT_EQ(actual[c * 4 + r], values[r * 6 + c]);
  std::string message = error_message([&] { copy_into(destination, zeros({4, 6})); });
  EXPECT_NE(message.find("copy_into: shape mismatch, destination f32[6, 4] and source f32[4, 6]"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace fornace
