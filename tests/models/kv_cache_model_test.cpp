// The three KV cache kinds inside the tiny model of each family: same K, V and logits at every
// step (bitwise; with sliding-window layers, whose keys each kind holds in its own order, to
// rounding); and the K and V a decode step reads, which for Gemma 3's local layers is the window.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/generator.h"
#include "models/model.h"
#include "ops/creation.h"
#include "common/relative_error.h"
#include "common/test_models.h"

namespace fornace {
namespace {

// Checks, for the tiny model of `preset` in `dtype`, over a prompt and ten decode steps.
void expect_all_kinds_return_the_same_tensors(const std::string& preset, DType dtype) {
  SCOPED_TRACE(preset + " " + dtype_name(dtype));
  std::unique_ptr<Model> model = load_model(synthetic_model_directory(preset, dtype));
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
    const bool bitwise = config.sliding_layers.empty();
    auto expect_same = [&](const std::vector<float>& actual, const std::vector<float>& expected,
                           const std::string& what) {
      if (bitwise) {
        EXPECT_EQ(actual, expected) << what;
      } else {
        EXPECT_LE(relative_l2(actual, expected), 1e-5) << what;
      }
    };
    for (size_t kind = 1; kind < kinds.size(); ++kind) {
      expect_same(logits[kind], logits[0], kv_cache_kind_name(kinds[kind]));
    }
    for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
      if (config.is_sliding(layer)) continue;
      auto [reference_keys, reference_values] = caches[0].layer(layer).contents();
      for (size_t kind = 1; kind < kinds.size(); ++kind) {
        auto [keys, values] = caches[kind].layer(layer).contents();
        std::string what = concat(kv_cache_kind_name(kinds[kind]), " layer ", layer);
        expect_same(to_f32_vector(keys), to_f32_vector(reference_keys), what);
        expect_same(to_f32_vector(values), to_f32_vector(reference_values), what);
        EXPECT_EQ(values.dtype(), dtype);
        // V reaches the cache as Candle's code of the family leaves it: a transposed view,
        // which cat keeps strided, except in Qwen3, whose Candle code makes it contiguous.
        if (kinds[kind] == KvCacheKind::cat && step > 0) {
          EXPECT_EQ(values.is_contiguous(), preset == "tiny-qwen3") << "layer " << layer;
        }
      }
    }
    const std::vector<float>& last = logits[0];
    int32_t next = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    input = {next};
  }
}

TEST(KvCacheKinds, all_kinds_return_the_same_tensors) {
  for (const char* preset : {"tiny", "tiny-llama", "tiny-qwen3", "tiny-gemma3"}) {
    expect_all_kinds_return_the_same_tensors(preset, DType::f32);
    expect_all_kinds_return_the_same_tensors(preset, DType::bf16);
  }
}

// A decode step at position p reads p + 1 positions of K and V in a global layer and at most
// the window (8 in tiny-gemma3) in a local one, whatever the cache kind.
TEST(KvCacheKinds, LocalLayersReadOnlyTheirWindowInADecodeStep) {
  std::unique_ptr<Model> model =
      load_model(synthetic_model_directory("tiny-gemma3", DType::f32));
  const ModelConfig& config = model->config();
  ASSERT_EQ(config.sliding_window, 8);
  for (KvCacheKind kind : all_kv_cache_kinds()) {
    SCOPED_TRACE(kv_cache_kind_name(kind));
    Generator generator(*model, kind, 64, SamplerOptions{});
    GenerationOptions options;
    options.max_new_tokens = 6;
    options.ignore_eos = true;
    GenerationResult result = generator.generate(test_prompt_ids(20, config.vocab_size), options);
    ASSERT_EQ(result.steps.size(), 5u);
    const KvCacheShape shape = model->kv_cache_shape(64);
    const int64_t position_bytes = 2 * config.num_key_value_heads * config.head_dim() * 4;
    for (size_t step = 0; step < result.steps.size(); ++step) {
      int64_t held = 20 + static_cast<int64_t>(step) + 1;  // the prompt and this step's token
      int64_t expected = 0;
      for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
        expected += (config.is_sliding(layer) ? 8 : held) * position_bytes;
      }
      EXPECT_EQ(result.steps[step].kv_read_bytes, expected) << "step " << step;
      EXPECT_EQ(KvCacheSet::bytes_read(config.num_hidden_layers, shape, held), expected);
    }
  }
}

}  // namespace
}  // namespace fornace
