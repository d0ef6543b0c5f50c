// Loads through the packed-weights cache: the first stores what it packed, the second maps it,
// and both give the logits of a load without the cache, bit for bit (bf16 panels of a
// checkpoint, interleaved quads of a GGUF file).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "common/test_models.h"
#include "io/test_files.h"
#include "models/model.h"
#include "ops/creation.h"

namespace fornace {
namespace {

std::vector<float> logits_of(Model& model) {
  std::vector<uint32_t> ids = test_prompt_ids(40, model.config().vocab_size);
  KvCacheSet cache(KvCacheKind::prealloc, model.config().num_hidden_layers,
                   model.kv_cache_shape(static_cast<int64_t>(ids.size())));
  Tensor input = from_vector(std::vector<float>(ids.begin(), ids.end()),
                             {1, static_cast<int64_t>(ids.size())}, DType::u32);
  return to_f32_vector(model.forward(input, cache, Logits::all));
}

// What one load_model call packed, mapped from the cache, and wrote to it, and its logits.
struct Load {
  int64_t packed = 0;
  int64_t stored = 0;
  int64_t written = 0;
  std::vector<float> logits;
};

// `cache`: the packed-weights cache's directory, none for no cache.
Load load(const std::string& path, const std::optional<std::string>& cache) {
  ModelOptions options;
  options.packed_cache_directory = cache;
  std::unique_ptr<Model> model = load_model(path, options);
  const LoadReport& report = model->load_report();
  return {report.packed_bytes, report.packed_from_cache_bytes, report.packed_cache_written_bytes,
          logits_of(*model)};
}

TEST(PackedCacheModels, ASecondLoadMapsWhatTheFirstStoredAndGivesTheSameLogits) {
  const std::vector<std::string> paths = {tiny_model_directory(DType::bf16),
                                          synthetic_gguf_file("tiny", DType::f32, "q4_0")};
  test_support::TemporaryDirectory cache;
  for (const std::string& path : paths) {
    Load without = load(path, std::nullopt);
    if (without.packed == 0) {
      std::cout << "the active kernels pack nothing of " << path << "\n";
      continue;
    }
    EXPECT_EQ(without.stored + without.written, 0) << path;
    Load first = load(path, cache.path());
    Load second = load(path, cache.path());
    EXPECT_EQ(first.stored, 0) << path;
    EXPECT_EQ(first.written, first.packed) << path;
    EXPECT_EQ(second.stored, second.packed) << path << ": every form from the cache";
    EXPECT_EQ(second.written, 0) << path;
    EXPECT_EQ(first.logits, without.logits) << path;
    EXPECT_EQ(second.logits, without.logits) << path;
  }
}

}  // namespace
}  // namespace fornace
