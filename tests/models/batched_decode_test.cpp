// A batched decode step (several sequences, one token each, one pass) gives each sequence the
// logits and greedy tokens it gets decoded alone, on every family and cache kind.
#include <gtest/gtest.h>

#include "common/relative_error.h"
#include "common/test_models.h"
#include "core/error.h"
#include "models/model.h"
#include "ops/creation.h"
#include "ops/math.h"

namespace fornace {
namespace {

Tensor ids_tensor(const std::vector<uint32_t>& ids) {
  return from_vector(std::vector<float>(ids.begin(), ids.end()),
                     {1, static_cast<int64_t>(ids.size())}, DType::u32);
}

uint32_t greedy(const std::vector<float>& logits) {
  return static_cast<uint32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<float> row(const Tensor& logits, int64_t index) {
  return to_f32_vector(logits.narrow(0, index, 1));
}

constexpr int kSteps = 6;

// Per sequence, the logits of each decode step when it runs alone.
std::vector<std::vector<std::vector<float>>> alone(Model& model, KvCacheKind kind,
                                                   const std::vector<std::vector<uint32_t>>& prompts) {
  std::vector<std::vector<std::vector<float>>> steps(prompts.size());
  for (size_t index = 0; index < prompts.size(); ++index) {
    KvCacheSet cache(kind, model.config().num_hidden_layers, model.kv_cache_shape(64));
    std::vector<float> logits = to_f32_vector(model.forward(ids_tensor(prompts[index]), cache));
    for (int step = 0; step < kSteps; ++step) {
      logits = to_f32_vector(model.forward(ids_tensor({greedy(logits)}), cache));
      steps[index].push_back(logits);
    }
  }
  return steps;
}

TEST(BatchedDecode, EachSequenceGetsTheLogitsItGetsAlone) {
  for (const char* preset : {"tiny", "tiny-llama", "tiny-qwen3", "tiny-gemma3"}) {
    std::unique_ptr<Model> model = load_model(synthetic_model_directory(preset, DType::f32));
    const int64_t vocab = model->config().vocab_size;
    // Different lengths, so the sequences sit at different positions (Gemma's window is 8).
    std::vector<std::vector<uint32_t>> prompts = {test_prompt_ids(3, vocab),
                                                  test_prompt_ids(11, vocab),
                                                  test_prompt_ids(6, vocab)};
    prompts[2][0] = 7;
    for (KvCacheKind kind : {KvCacheKind::prealloc, KvCacheKind::cat}) {
      auto expected = alone(*model, kind, prompts);
      std::vector<std::unique_ptr<KvCacheSet>> caches;
      std::vector<KvCacheSet*> pointers;
      std::vector<uint32_t> next;
      for (const std::vector<uint32_t>& prompt : prompts) {
        caches.push_back(std::make_unique<KvCacheSet>(kind, model->config().num_hidden_layers,
                                                      model->kv_cache_shape(64)));
        pointers.push_back(caches.back().get());
        next.push_back(greedy(to_f32_vector(model->forward(ids_tensor(prompt), *caches.back()))));
      }
      for (int step = 0; step < kSteps; ++step) {
        Tensor logits = model->forward_batch(next, pointers);
        ASSERT_EQ(logits.dim(0), static_cast<int64_t>(prompts.size()));
        for (size_t index = 0; index < prompts.size(); ++index) {
          std::vector<float> batched = row(logits, static_cast<int64_t>(index));
          EXPECT_LT(relative_l2(batched, expected[index][step]), 1e-5)
              << preset << " sequence " << index << " step " << step;
          next[index] = greedy(batched);
          EXPECT_EQ(next[index], greedy(expected[index][step])) << preset << " step " << step;
        }
      }
      for (size_t index = 0; index < prompts.size(); ++index) {
        EXPECT_EQ(caches[index]->length(), static_cast<int64_t>(prompts[index].size()) + kSteps);
      }
    }
  }
}

TEST(BatchedDecode, RefusesMismatchedOrRepeatedOrEmptyCaches) {
  std::unique_ptr<Model> model = load_model(tiny_model_directory(DType::f32));
  KvCacheSet first(KvCacheKind::prealloc, model->config().num_hidden_layers,
                   model->kv_cache_shape(16));
  KvCacheSet second(KvCacheKind::prealloc, model->config().num_hidden_layers,
                    model->kv_cache_shape(16));
  model->forward(ids_tensor({1, 2}), first);
  std::vector<KvCacheSet*> repeated = {&first, &first};
  EXPECT_THROW(model->forward_batch({3, 4}, repeated), Error);
  std::vector<KvCacheSet*> one = {&first};
  EXPECT_THROW(model->forward_batch({3, 4}, one), Error);
  std::vector<KvCacheSet*> without_prompt = {&first, &second};
  EXPECT_THROW(model->forward_batch({3, 4}, without_prompt), Error);
  EXPECT_THROW(model->forward_batch({}, {}), Error);
}

}  // namespace
}  // namespace fornace
