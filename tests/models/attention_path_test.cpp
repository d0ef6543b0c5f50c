// The candle attention path inside the Qwen2 model: the fused path's logits for every cache kind,
// and exactly the copies that Candle's op sequence makes per decode step.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/relative_error.h"
#include "common/source_paths.h"
#include "common/test_models.h"
#include "core/memory.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "models/model.h"
#include "models/synthetic.h"
#include "ops/creation.h"

namespace fornace {
namespace {

TEST(AttentionPaths, CandleAndFusedGiveTheSameLogitsForEveryCacheKind) {
  std::string directory = tiny_model_directory(DType::f32);
  ModelOptions candle_options;
  candle_options.attention = AttentionPath::candle;
  std::unique_ptr<Model> fused = load_model(directory);
  std::unique_ptr<Model> candle = load_model(directory, candle_options);
  const ModelConfig& config = fused->config();
  for (KvCacheKind kind : all_kv_cache_kinds()) {
    SCOPED_TRACE(kv_cache_kind_name(kind));
    KvCacheSet fused_cache(kind, config.num_hidden_layers, fused->kv_cache_shape(64));
    KvCacheSet candle_cache(kind, config.num_hidden_layers, candle->kv_cache_shape(64));
    std::vector<uint32_t> prompt = test_prompt_ids(9, config.vocab_size);
    std::vector<int32_t> input(prompt.begin(), prompt.end());
    for (int step = 0; step <= 10; ++step) {
      Tensor ids = from_ids(input, {1, static_cast<int64_t>(input.size())});
      std::vector<float> expected = to_f32_vector(fused->forward(ids, fused_cache));
      std::vector<float> actual = to_f32_vector(candle->forward(ids, candle_cache));
      EXPECT_LE(relative_l2(actual, expected), 1e-5) << "step " << step;
      int32_t next =
          static_cast<int32_t>(std::max_element(expected.begin(), expected.end()) - expected.begin());
      EXPECT_EQ(std::max_element(actual.begin(), actual.end()) - actual.begin(), next);
      input = {next};
    }
  }
}

// Qwen2.5-0.5B's attention (24 layers, 14 query heads, 2 KV heads, head_dim 64) with a small MLP
// and vocabulary, in bf16: the copies per decode step depend on nothing else.
std::string half_b_attention_model() {
  namespace fs = std::filesystem;
  fs::path directory =
      fs::path(fornace::test_paths::build()) / "test-models" / "qwen2.5-0.5b-attention";
  if (fs::exists(directory / "model.safetensors")) return directory.string();
  ModelConfig config = synthetic_preset("qwen2.5-0.5b");
  config.intermediate_size = 64;
  config.vocab_size = 512;
  config.torch_dtype = "bfloat16";
  fs::create_directories(directory);
  std::ofstream(directory / "config.json") << model_config_to_json(config);
  std::vector<TensorSpec> specs = checkpoint_tensor_specs(config, DType::bf16);
  write_safetensors_streamed((directory / "model.safetensors").string(), specs,
                             [&](size_t index) { return synthetic_tensor(specs[index], 5); });
  return directory.string();
}

// The bytes that one decode step copies, when the cache holds `length` positions after it.
CopyBytes decode_step_copies(Model& model, KvCacheKind kind, int64_t prompt_length) {
  const ModelConfig& config = model.config();
  KvCacheSet cache(kind, config.num_hidden_layers, model.kv_cache_shape(prompt_length + 8));
  std::vector<uint32_t> prompt = test_prompt_ids(prompt_length, config.vocab_size);
  model.forward(from_ids(std::vector<int32_t>(prompt.begin(), prompt.end()),
                         {1, prompt_length}),
                cache);
  Tensor next = from_ids({3}, {1, 1});
  CopyBytes before = memory::copy_bytes();
  model.forward(next, cache);
  CopyBytes after = memory::copy_bytes();
  return {after.contiguous - before.contiguous, after.strided - before.strided,
          after.strided_runs - before.strided_runs};
}

// Per layer and decode step, with L the positions after the append, H = 2 KV heads, n = 7
// repeats, D = 64 and e = 2 bytes (bf16), the candle path adds to the fused path's copies:
//   cat:            repeat_kv(K): cat of n contiguous K, n·L·H·D·e contiguous, reshape a view;
//                   repeat_kv(V): V is the transposed view, but for batch 1 every transposed
//                   input is one block, so cat copies n·L·H·D·e contiguous; its result is
//                   transposed, so the reshape copies n·L·H·D·e strided, in runs of D·e.
//   cat-contiguous: both as cat's K: 2·n·L·H·D·e contiguous, nothing strided.
//   prealloc:       K and V are narrowed views of the buffer: each cat takes the strided path
//                   (n·L·H·D·e in runs of D·e) and so does each reshape: 4·n·L·H·D·e strided.
// The contiguous() after repeat_kv, the matmuls (K and V read in place), the scale, the softmax
// and the final reshape (a [1, 1, 14, 64] view) copy nothing.
TEST(AttentionPaths, CandlePathCopiesWhatCandlesOpsCopyPerDecodeStep) {
  std::string directory = half_b_attention_model();
  ModelOptions candle_options;
  candle_options.attention = AttentionPath::candle;
  std::unique_ptr<Model> fused = load_model(directory);
  std::unique_ptr<Model> candle = load_model(directory, candle_options);
  constexpr int64_t kLayers = 24, kKvHeads = 2, kRepeats = 7, kHeadDim = 64, kElement = 2;
  constexpr int64_t kPrompt = 40;
  constexpr int64_t kLength = kPrompt + 1;
  const int64_t repeated = kLayers * kRepeats * kLength * kKvHeads * kHeadDim * kElement;
  const int64_t runs = kLayers * kRepeats * kLength * kKvHeads;
  struct Expected {
    KvCacheKind kind;
    int64_t contiguous, strided, strided_runs;
  };
  for (Expected expected : {Expected{KvCacheKind::cat, 2 * repeated, repeated, runs},
                            Expected{KvCacheKind::cat_contiguous, 2 * repeated, 0, 0},
                            Expected{KvCacheKind::prealloc, 0, 4 * repeated, 4 * runs}}) {
    SCOPED_TRACE(kv_cache_kind_name(expected.kind));
    CopyBytes fused_copies = decode_step_copies(*fused, expected.kind, kPrompt);
    CopyBytes candle_copies = decode_step_copies(*candle, expected.kind, kPrompt);
    EXPECT_EQ(fused_copies.strided, 0);
    EXPECT_EQ(candle_copies.contiguous - fused_copies.contiguous, expected.contiguous);
    EXPECT_EQ(candle_copies.strided, expected.strided);
    EXPECT_EQ(candle_copies.strided_runs, expected.strided_runs);
  }
}

}  // namespace
}  // namespace fornace
