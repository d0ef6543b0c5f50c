// KV cache kinds on random keys and values laid out as the model produces them.
#include <gtest/gtest.h>

#include "core/error.h"
#include "nn/kv_cache.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/quantized.h"

namespace fornace {
namespace {

constexpr int64_t kHeads = 2;
constexpr int64_t kHeadDim = 8;

// K as RoPE leaves it (contiguous [1, H, S, D]) and V as the projection leaves it: a
// [1, S, H, D] tensor transposed to a [1, H, S, D] view.
std::pair<Tensor, Tensor> model_like_step(int64_t length, uint64_t seed) {
  Tensor key = randn({1, kHeads, length, kHeadDim}, seed);
  Tensor value = randn({1, length, kHeads, kHeadDim}, seed + 1).transpose(1, 2);
  return {key, value};
}

// Expected cache contents built with plain loops from the per-step tensors.
std::vector<float> concatenate_by_hand(const std::vector<Tensor>& steps) {
  int64_t total = 0;
  for (const Tensor& step : steps) total += step.dim(2);
  std::vector<float> result(kHeads * total * kHeadDim);
  int64_t position = 0;
  for (const Tensor& step : steps) {
    std::vector<float> values = to_f32_vector(step);  // Row-major [1, H, S, D].
    int64_t length = step.dim(2);
    for (int64_t head = 0; head < kHeads; ++head) {
      for (int64_t row = 0; row < length; ++row) {
        for (int64_t i = 0; i < kHeadDim; ++i) {
          result[(head * total + position + row) * kHeadDim + i] =
              values[(head * length + row) * kHeadDim + i];
        }
      }
    }
    position += length;
  }
  return result;
}

TEST(KvCache, AllKindsHoldTheSameValuesAndOnlyCatKeepsAStridedV) {
  KvCacheShape shape{1, kHeads, kHeadDim, 64, DType::f32};
  std::vector<std::unique_ptr<KvCache>> caches;
  for (KvCacheKind kind : all_kv_cache_kinds()) caches.push_back(make_kv_cache(kind, shape));
  std::vector<Tensor> key_steps;
  std::vector<Tensor> value_steps;
  for (int step = 0; step < 10; ++step) {
    auto [key, value] = model_like_step(step == 0 ? 7 : 1, 100 + 2 * step);
    key_steps.push_back(key);
    value_steps.push_back(value);
    std::vector<float> expected_keys = concatenate_by_hand(key_steps);
    std::vector<float> expected_values = concatenate_by_hand(value_steps);
    for (size_t index = 0; index < caches.size(); ++index) {
      auto [keys, values] = caches[index]->append(key, value);
      KvCacheKind kind = all_kv_cache_kinds()[index];
      SCOPED_TRACE(kv_cache_kind_name(kind));
      EXPECT_EQ(keys.shape(), (Dims{1, kHeads, 7 + step, kHeadDim}));
      EXPECT_EQ(to_f32_vector(keys), expected_keys);
      EXPECT_EQ(to_f32_vector(values), expected_values);
      if (kind == KvCacheKind::cat) {
        EXPECT_FALSE(values.is_contiguous()) << "step " << step;
      }
      if (kind == KvCacheKind::cat_contiguous) {
        EXPECT_TRUE(values.is_contiguous());
        EXPECT_TRUE(keys.is_contiguous());
      }
    }
  }
}

TEST(KvCache, CatCopiesTheWholeCacheEveryStepAndPreallocCopiesOnlyTheNewRows) {
  KvCacheShape shape{1, kHeads, kHeadDim, 64, DType::f32};
  auto [prompt_key, prompt_value] = model_like_step(16, 1);
  auto [key, value] = model_like_step(1, 3);
  int64_t row_bytes = kHeads * kHeadDim * 4;
  for (KvCacheKind kind : all_kv_cache_kinds()) {
    SCOPED_TRACE(kv_cache_kind_name(kind));
    auto cache = make_kv_cache(kind, shape);
    cache->append(prompt_key, prompt_value);
    cache->append(key, value);
    CopyBytes before = memory::copy_bytes();
    cache->append(key, value);  // The cache now holds 17 positions; this adds the 18th.
    CopyBytes after = memory::copy_bytes();
    int64_t copied = (after.contiguous - before.contiguous) + (after.strided - before.strided);
    if (kind == KvCacheKind::prealloc) {
      EXPECT_EQ(copied, 2 * row_bytes);
    } else {
      EXPECT_EQ(copied, 2 * 18 * row_bytes);
    }
  }
}

// A set's prealloc layers share one allocation (so that it can sit in 2 MiB pages); each layer,
// full or sliding, still holds only what was appended to it.
TEST(KvCache, PreallocSetLayersShareOneBufferAndKeepTheirOwnPositions) {
  KvCacheShape shape{1, kHeads, kHeadDim, 24, DType::f32};
  shape.window = 5;
  shape.sliding_layers = {true, false, true, false};
  KvCacheSet set(KvCacheKind::prealloc, 4, shape);
  std::vector<std::vector<Tensor>> key_steps(4), value_steps(4);
  for (int step = 0; step < 4; ++step) {
    for (int64_t layer = 0; layer < 4; ++layer) {
      auto [key, value] = model_like_step(step == 0 ? 6 : 1, 1000 + 10 * layer + 2 * step);
      key_steps[layer].push_back(key);
      value_steps[layer].push_back(value);
      set.layer(layer).append(key, value);
    }
  }
  for (int64_t layer = 0; layer < 4; ++layer) {
    SCOPED_TRACE(concat("layer ", layer));
    auto [keys, values] = set.layer(layer).contents();
    EXPECT_TRUE(keys.shares_storage(set.layer(0).contents().first));
    EXPECT_TRUE(values.shares_storage(keys));
    std::vector<float> expected_keys = concatenate_by_hand(key_steps[layer]);
    std::vector<float> expected_values = concatenate_by_hand(value_steps[layer]);
    if (shape.is_sliding(layer)) {
      // Positions 4..8 of 9, in ring order: slot p % 5 holds position p.
      EXPECT_EQ(keys.dim(2), 5);
      std::vector<float> held_keys = to_f32_vector(keys);
      std::vector<float> held_values = to_f32_vector(values);
      for (int64_t head = 0; head < kHeads; ++head) {
        for (int64_t position = 4; position < 9; ++position) {
          for (int64_t i = 0; i < kHeadDim; ++i) {
            int64_t held = (head * 5 + position % 5) * kHeadDim + i;
            int64_t all = (head * 9 + position) * kHeadDim + i;
            EXPECT_EQ(held_keys[held], expected_keys[all]);
            EXPECT_EQ(held_values[held], expected_values[all]);
          }
        }
      }
    } else {
      EXPECT_EQ(to_f32_vector(keys), expected_keys);
      EXPECT_EQ(to_f32_vector(values), expected_values);
    }
  }
}

// A cache truncated to a prefix then appended to holds what one that only ever saw that prefix
// and the new positions holds, for every kind, with and without a sliding window.
TEST(KvCache, ATruncatedCacheHoldsThePrefixAndWhatComesAfter) {
  for (int64_t window : {0, 6}) {
    for (KvCacheKind kind : all_kv_cache_kinds()) {
      SCOPED_TRACE(std::string(kv_cache_kind_name(kind)) + " window " + std::to_string(window));
      KvCacheShape shape{1, kHeads, kHeadDim, 64, DType::f32};
      std::unique_ptr<KvCache> reused = make_kv_cache(kind, shape, window);
      std::unique_ptr<KvCache> fresh = make_kv_cache(kind, shape, window);
      std::vector<std::pair<Tensor, Tensor>> steps;
      for (int step = 0; step < 4; ++step) steps.push_back(model_like_step(1, 300 + 2 * step));
      for (const auto& [key, value] : steps) reused->append(key, value);
      // 4 positions: nothing has left a window of 6 yet.
      ASSERT_TRUE(reused->can_truncate(2));
      EXPECT_FALSE(reused->can_truncate(5));
      reused->truncate(2);
      EXPECT_EQ(reused->length(), 2);
      fresh->append(steps[0].first, steps[0].second);
      fresh->append(steps[1].first, steps[1].second);
      auto [key, value] = model_like_step(3, 400);
      auto [reused_keys, reused_values] = reused->append(key, value);
      auto [fresh_keys, fresh_values] = fresh->append(key, value);
      EXPECT_EQ(to_f32_vector(contiguous(reused_keys)), to_f32_vector(contiguous(fresh_keys)));
      EXPECT_EQ(to_f32_vector(contiguous(reused_values)), to_f32_vector(contiguous(fresh_values)));
      EXPECT_EQ(reused->length(), 5);
      // Past the window, positions the prefix needs are gone.
      for (int step = 0; step < 4; ++step) reused->append(key.narrow(2, 0, 1), value.narrow(2, 0, 1));
      EXPECT_EQ(reused->can_truncate(3), window == 0);
      EXPECT_TRUE(reused->can_truncate(reused->length()));
    }
  }
}

TEST(KvCache, ASetKeepsAPrefixOnlyWhenEveryLayerCan) {
  KvCacheShape shape{1, kHeads, kHeadDim, 32, DType::f32};
  shape.window = 4;
  shape.sliding_layers = {true, false};
  KvCacheSet set(KvCacheKind::prealloc, 2, shape);
  auto append_all = [&](int64_t positions) {
    for (int64_t layer = 0; layer < 2; ++layer) {
      auto [key, value] = model_like_step(positions, 500);
      set.layer(layer).append(key, value);
    }
  };
  append_all(3);
  EXPECT_EQ(set.keep_prefix(2), 2);
  EXPECT_EQ(set.length(), 2);
  append_all(5);  // 7 positions: the sliding layer has wrapped.
  EXPECT_EQ(set.keep_prefix(6), 0);
  EXPECT_EQ(set.length(), 0);
  EXPECT_EQ(set.layer(1).length(), 0);
}

TEST(KvCache, PreallocRefusesMorePositionsThanItHolds) {
  KvCacheShape shape{1, kHeads, kHeadDim, 4, DType::f32};
  auto cache = make_kv_cache(KvCacheKind::prealloc, shape);
  auto [key, value] = model_like_step(3, 5);
  cache->append(key, value);
  try {
    cache->append(key, value);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("exceed the preallocated 4"), std::string::npos);
  }
}

TEST(KvCache, UnknownKindIsRejectedWithTheKnownOnes) {
  try {
    parse_kv_cache_kind("paged");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("prealloc, cat or cat-contiguous"), std::string::npos);
  }
}

// Candle's Gemma 3 appends V, the transposed view of the v projection, with slice_set and no
// contiguous(). With one KV head (Gemma 3 270M and 1B) that view is contiguous under the rule
// that ignores extent-1 dims, for a prompt and for one token, so the append works; with four KV
// heads (Gemma 3 4B) a prompt's V is strided and slice_set refuses it, as in Candle.
TEST(KvCache, SliceSetOfGemmasTransposedVFailsOnlyWithSeveralKvHeads) {
  for (int64_t kv_heads : {1, 4}) {
    SCOPED_TRACE(concat(kv_heads, " KV heads"));
    Tensor buffer = zeros({1, kv_heads, 64, 256});
    for (int64_t length : {1, 7}) {
      Tensor value = randn({1, length, kv_heads, 256}, 3).transpose(1, 2);
      bool strided = kv_heads > 1 && length > 1;
      EXPECT_EQ(value.is_contiguous(), !strided) << length;
      if (strided) {
        EXPECT_THROW(slice_set(buffer, value, 2, 0), Error) << length;
      } else {
        slice_set(buffer, value, 2, 0);
      }
    }
  }
}

// A quantized cache holds each row as the blocks that quantize_rows makes of it: prealloc and a
// sliding ring, a prompt and decode steps, a truncated prefix; the cat kinds refuse it.
TEST(KvCache, QuantizedCachesHoldTheBlocksOfEachRowAndKeepPrefixes) {
  constexpr int64_t kBlockHeadDim = 64;
  for (BlockType type : {BlockType::q8_0, BlockType::q4_0}) {
    for (int64_t window : {0, 6}) {
      SCOPED_TRACE(std::string(kv_cache_type_name(type)) + " window " + std::to_string(window));
      KvCacheShape shape{1, kHeads, kBlockHeadDim, 32, DType::f32};
      shape.blocks = type;
      auto cache = make_kv_cache(KvCacheKind::prealloc, shape, window);
      Tensor prompt_key = randn({1, kHeads, 4, kBlockHeadDim}, 600);
      Tensor prompt_value = randn({1, 4, kHeads, kBlockHeadDim}, 601).transpose(1, 2);
      auto [keys, values] = cache->append(prompt_key, prompt_value);
      EXPECT_EQ(keys.dtype(), DType::u32);
      EXPECT_EQ(keys.dim(3), block_row_words(type, kBlockHeadDim));
      EXPECT_EQ(to_f32_vector(contiguous(keys)), to_f32_vector(quantize_rows(prompt_key, type)));
      EXPECT_EQ(to_f32_vector(contiguous(values)),
                to_f32_vector(quantize_rows(prompt_value, type)));
      Tensor step_key = randn({1, kHeads, 1, kBlockHeadDim}, 602);
      Tensor step_value = randn({1, kHeads, 1, kBlockHeadDim}, 603);
      auto [held_keys, held_values] = cache->append(step_key, step_value);
      EXPECT_EQ(held_keys.dim(2), 5);
      EXPECT_EQ(to_f32_vector(contiguous(held_keys.narrow(2, 4, 1))),
                to_f32_vector(quantize_rows(step_key, type)));
      ASSERT_TRUE(cache->can_truncate(2));
      cache->truncate(2);
      auto [kept_keys, kept_values] = cache->append(step_key, step_value);
      EXPECT_EQ(to_f32_vector(contiguous(kept_keys.narrow(2, 0, 2))),
                to_f32_vector(quantize_rows(prompt_key.narrow(2, 0, 2), type)));
      EXPECT_EQ(to_f32_vector(contiguous(kept_values.narrow(2, 2, 1))),
                to_f32_vector(quantize_rows(step_value, type)));
    }
    KvCacheShape shape{1, kHeads, kBlockHeadDim, 32, DType::f32};
    shape.blocks = type;
    // K and V of 64 values: 2 blocks of 34 (Q8_0) or 18 (Q4_0) bytes a row.
    EXPECT_EQ(shape.bytes_per_position(), 2 * kHeads * (type == BlockType::q8_0 ? 68 : 36));
    EXPECT_EQ(KvCacheSet::prealloc_bytes(3, shape), 3 * 32 * shape.bytes_per_position());
    for (KvCacheKind kind : {KvCacheKind::cat, KvCacheKind::cat_contiguous}) {
      EXPECT_THROW(KvCacheSet(kind, 2, shape), Error);
    }
  }
}

TEST(KvCache, CacheTypesParseByLlamaCppNamesAndUnknownOnesAreListed) {
  for (BlockType type : all_kv_cache_types()) {
    EXPECT_EQ(parse_kv_cache_type(kv_cache_type_name(type)), type);
  }
  EXPECT_EQ(parse_kv_cache_type("Q8_0"), BlockType::q8_0);
  try {
    parse_kv_cache_type("q3_k");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("f32, f16, bf16, q8_0 or q4_0"), std::string::npos);
  }
}

}  // namespace
}  // namespace fornace
