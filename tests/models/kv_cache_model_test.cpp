// The three KV cache kinds inside the tiny Qwen2 model: same K, V and logits at every step.
#include <gtest/gtest.h>

#include "models/model.h"
#include "ops/creation.h"
#include "common/test_models.h"

namespace fornace {
namespace {

// Checks, for the tiny model in `dtype`, over a prompt and ten decode steps.
void expect_all_kinds_return_the_same_tensors(DType dtype) {
  SCOPED_TRACE(dtype_name(dtype));
  std::unique_ptr<Model> model = load_model(tiny_model_directory(dtype));
  // The cache holds K and V in the weights' dtype, as Candle's does.
  ASSERT_EQ(model->kv_dtype(), dtype);
  const ModelConfig& config = model->config();
  std::vector<KvCacheKind> kinds = all_kv_cache_kinds();
  std::vector<KvCacheSet> caches;
  for (KvCacheKind kind : kinds) {
    caches.emplace_back(kind, config.num_hidden_layers, model->kv_cache_shape(64));
  }
  std::vector<uint32_t> prompt = test_prompt_ids(9, config.vocab_size);
  std::vector<int32_t> input(prompt.begin(), prompt.end());
  constexpr int kDecodeSteps = 10;
  for (int step = 0; step <= kDecodeSteps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    Tensor ids = from_ids(input, {1, static_cast<int64_t>(input.size())});
    std::vector<std::vector<float>> logits;
    for (KvCacheSet& cache : caches) logits.push_back(to_f32_vector(model->forward(ids, cache)));
    for (size_t kind = 1; kind < kinds.size(); ++kind) {
      EXPECT_EQ(logits[kind], logits[0]) << kv_cache_kind_name(kinds[kind]);
    }
    for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
      auto [reference_keys, reference_values] = caches[0].layer(layer).contents();
      for (size_t kind = 1; kind < kinds.size(); ++kind) {
        auto [keys, values] = caches[kind].layer(layer).contents();
        EXPECT_EQ(to_f32_vector(keys), to_f32_vector(reference_keys))
            << kv_cache_kind_name(kinds[kind]) << " layer " << layer;
        EXPECT_EQ(to_f32_vector(values), to_f32_vector(reference_values))
            << kv_cache_kind_name(kinds[kind]) << " layer " << layer;
        EXPECT_EQ(values.dtype(), dtype);
        if (kinds[kind] == KvCacheKind::cat && step > 0) {
          EXPECT_FALSE(values.is_contiguous()) << "layer " << layer;
        }
      }
    }
    const std::vector<float>& last = logits[0];
    int32_t next = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    input = {next};
  }
}

TEST(KvCacheKinds, all_kinds_return_the_same_tensors) {
  expect_all_kinds_return_the_same_tensors(DType::f32);
  expect_all_kinds_return_the_same_tensors(DType::bf16);
}

}  // namespace
}  // namespace fornace
