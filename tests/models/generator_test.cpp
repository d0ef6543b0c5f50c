// The generation loop on the tiny model: EOS handling, streaming order, step records.
#include <gtest/gtest.h>

#include <cmath>

#include "common/relative_error.h"
#include "common/test_models.h"
#include "core/error.h"
#include "engine/generator.h"

namespace fornace {
namespace {

GenerationResult generate(Model& model, const GenerationOptions& options,
                          const std::function<void(uint32_t)>& on_token = {}) {
  Generator generator(model, KvCacheKind::prealloc, 64, SamplerOptions{});
  return generator.generate(test_prompt_ids(5, model.config().vocab_size), options, on_token);
}

TEST(Generator, StopsAtTheFirstEosIdUnlessTold) {
  std::unique_ptr<Model> model = load_model(tiny_model_directory(DType::f32));
  GenerationOptions options;
  options.max_new_tokens = 8;
  options.ignore_eos = true;
  std::vector<uint32_t> free_run = generate(*model, options).generated;
  ASSERT_EQ(free_run.size(), 8u);

  options.ignore_eos = false;
  options.eos_ids = {free_run[2]};
  GenerationResult stopped = generate(*model, options);
  EXPECT_TRUE(stopped.stopped_at_eos);
  std::vector<uint32_t> expected(free_run.begin(), free_run.begin() + 3);
  // The run stops at the first occurrence of the eos id, which may come earlier.
  size_t first = std::find(free_run.begin(), free_run.end(), free_run[2]) - free_run.begin();
  expected.resize(first + 1);
  EXPECT_EQ(stopped.generated, expected);

  options.ignore_eos = true;
  EXPECT_EQ(generate(*model, options).generated, free_run);
}

TEST(Generator, StreamsEveryIdInOrderAndTimesEveryDecodeStep) {
  std::unique_ptr<Model> model = load_model(tiny_model_directory(DType::f32));
  GenerationOptions options;
  options.max_new_tokens = 6;
  options.ignore_eos = true;
  std::vector<uint32_t> streamed;
  GenerationResult result = generate(*model, options, [&](uint32_t id) { streamed.push_back(id); });
  EXPECT_EQ(streamed, result.generated);
  ASSERT_EQ(result.steps.size(), 5u);  // The first id comes from the prefill.
  for (const DecodeStep& step : result.steps) EXPECT_GT(step.ms, 0.0);
  EXPECT_GT(result.prefill_ms, 0.0);
  EXPECT_GT(result.decode_tokens_per_second(), 0.0);
}

TEST(Generator, PreallocDecodeStepsAllocateNothingAndCatAllocatesItsGrowingCache) {
  std::unique_ptr<Model> model = load_model(tiny_model_directory(DType::f32));
  const ModelConfig& config = model->config();
  GenerationOptions options;
  options.max_new_tokens = 6;
  options.ignore_eos = true;
  std::vector<uint32_t> prompt = test_prompt_ids(7, config.vocab_size);
  for (KvCacheKind kind : all_kv_cache_kinds()) {
    SCOPED_TRACE(kv_cache_kind_name(kind));
    Generator generator(*model, kind, 32, SamplerOptions{});
    GenerationResult result = generator.generate(prompt, options);
    int64_t position = static_cast<int64_t>(prompt.size());
    for (const DecodeStep& step : result.steps) {
      // A cat step allocates exactly the new K and V of every layer: (position + 1) rows each.
      int64_t cache_bytes = 2 * config.num_hidden_layers * config.num_key_value_heads *
                            config.head_dim() * (position + 1) * 4;
      EXPECT_EQ(step.allocated_bytes, kind == KvCacheKind::prealloc ? 0 : cache_bytes)
          << "position " << position;
      ++position;
    }
  }
}

TEST(Generator, ChunkedPrefillGivesTheSameLogitsAsOnePass) {
  std::unique_ptr<Model> model = load_model(tiny_model_directory(DType::f32));
  std::vector<uint32_t> prompt = test_prompt_ids(11, model->config().vocab_size);
  for (KvCacheKind kind : all_kv_cache_kinds()) {
    SCOPED_TRACE(kv_cache_kind_name(kind));
    std::vector<std::vector<float>> logits;
    std::vector<std::vector<uint32_t>> generated;
    for (int64_t chunk : {0, 4, 1}) {
      GenerationOptions options;
      options.max_new_tokens = 4;
      options.ignore_eos = true;
      options.keep_logits = true;
      options.prefill_chunk = chunk;
      Generator generator(*model, kind, 32, SamplerOptions{});
      GenerationResult result = generator.generate(prompt, options);
      ASSERT_EQ(result.logits.size(), 4u);
      logits.push_back(result.logits.front());
      generated.push_back(result.generated);
    }
    for (size_t run = 1; run < logits.size(); ++run) {
      double error = 0;
      double norm = 0;
      for (size_t i = 0; i < logits[0].size(); ++i) {
        error += (logits[run][i] - logits[0][i]) * (logits[run][i] - logits[0][i]);
        norm += logits[0][i] * logits[0][i];
      }
      EXPECT_LE(std::sqrt(error / norm), 1e-5) << "run " << run;
      EXPECT_EQ(generated[run], generated[0]) << "run " << run;
    }
  }
}

// A second turn that begins with the first turn's prompt and answer: with reuse it prefills only
// what the cache lacks, and gives the logits and tokens of a fresh generator's full prefill.
// `expected_again`: what the same prompt once more reuses.
void expect_reuse_matches_a_full_prefill(Model& model, KvCacheKind kind, int64_t first_length,
                                         int64_t expected_reuse, int64_t expected_again) {
  const int64_t vocab = model.config().vocab_size;
  GenerationOptions options;
  options.max_new_tokens = 4;
  options.ignore_eos = true;
  options.keep_logits = true;
  Generator conversation(model, kind, 64, SamplerOptions{});
  std::vector<uint32_t> turn = test_prompt_ids(first_length, vocab);
  GenerationResult first = conversation.generate(turn, options);
  turn.insert(turn.end(), first.generated.begin(), first.generated.end());
  for (uint32_t id : test_prompt_ids(6, vocab)) turn.push_back((id + 7) % vocab);

  options.reuse_cache = true;
  GenerationResult reused = conversation.generate(turn, options);
  Generator fresh(model, kind, 64, SamplerOptions{});
  GenerationResult expected = fresh.generate(turn, options);
  EXPECT_EQ(expected.reused_tokens, 0);
  EXPECT_EQ(reused.reused_tokens, expected_reuse);
  EXPECT_EQ(reused.generated, expected.generated);
  ASSERT_EQ(reused.logits.size(), expected.logits.size());
  for (size_t step = 0; step < reused.logits.size(); ++step) {
    EXPECT_LE(relative_l2(reused.logits[step], expected.logits[step]), 1e-5) << "step " << step;
  }
  GenerationResult again = conversation.generate(turn, options);
  EXPECT_EQ(again.reused_tokens, expected_again);
  EXPECT_EQ(again.generated, expected.generated);
}

TEST(Generator, AReusedPromptPrefixGivesTheLogitsOfAFullPrefill) {
  std::unique_ptr<Model> model = load_model(tiny_model_directory(DType::f32));
  for (KvCacheKind kind : all_kv_cache_kinds()) {
    SCOPED_TRACE(kv_cache_kind_name(kind));
    // The cache holds the prompt and all generated tokens but the last; the same prompt again
    // reuses all of it but its last token (9 + 4 + 6 tokens).
    expect_reuse_matches_a_full_prefill(*model, kind, 9, 9 + 3, 18);
  }
}

TEST(Generator, ASlidingWindowReusesItsCacheOnlyUntilPositionsLeaveTheWindow) {
  // tiny-gemma3: local layers of a window of 8 positions.
  std::unique_ptr<Model> model = load_model(synthetic_model_directory("tiny-gemma3", DType::f32));
  for (KvCacheKind kind : all_kv_cache_kinds()) {
    SCOPED_TRACE(kv_cache_kind_name(kind));
    // A second turn that continues the cache as it is reuses all of it, window or not; the
    // same prompt again would drop the cache's last positions (22 held, 18 kept), which the
    // local layers cannot: their window no longer holds the positions before those.
    expect_reuse_matches_a_full_prefill(*model, kind, 3, 3 + 3, 0);
    expect_reuse_matches_a_full_prefill(*model, kind, 9, 9 + 3, 0);
  }
}

TEST(Generator, RefusesAPromptBeyondItsContext) {
  std::unique_ptr<Model> model = load_model(tiny_model_directory(DType::f32));
  Generator generator(*model, KvCacheKind::prealloc, 8, SamplerOptions{});
  GenerationOptions options;
  options.max_new_tokens = 4;
  try {
    generator.generate(test_prompt_ids(5, model->config().vocab_size), options);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("exceed the context of 8"), std::string::npos);
  }
}

}  // namespace
}  // namespace fornace
