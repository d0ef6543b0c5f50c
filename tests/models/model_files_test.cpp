// ModelFiles: one opening of a model's files for its weights and its tokenizer.
#include "io/model_files.h"

#include <gtest/gtest.h>

#include <string>

#include "common/test_models.h"
#include "models/model.h"
#include "text/tokenizer.h"

namespace fornace {
namespace {

TEST(ModelFiles, AGgufFileIsParsedOnceForTheModelAndTheTokenizer) {
  std::shared_ptr<const ModelFiles> files =
      ModelFiles::open(synthetic_gguf_file("tiny", DType::f32, "q8_0"));
  ASSERT_TRUE(files->is_gguf());
  const GgufFile* parsed = files->gguf().get();
  std::unique_ptr<Model> model = load_model(files);
  EXPECT_EQ(model->files(), files);
  EXPECT_EQ(model->files()->gguf().get(), parsed);
  EXPECT_EQ(files->mappings().size(), 1u);
  EXPECT_GT(Tokenizer::load(*files).vocab_size(), 0u);
  EXPECT_GT(model->load_report().mapped_bytes, 0);
}

TEST(ModelFiles, ACheckpointMapsItsWeightsOnlyWhenTheyAreAskedFor) {
  std::shared_ptr<const ModelFiles> files = ModelFiles::open(tiny_model_directory(DType::bf16));
  EXPECT_FALSE(files->is_gguf());
  EXPECT_TRUE(files->mappings().empty());
  EXPECT_GT(Tokenizer::load(*files).vocab_size(), 0u);
  EXPECT_TRUE(files->mappings().empty()) << "a tokenizer needs no weights";
  std::unique_ptr<Model> model = load_model(files);
  EXPECT_FALSE(files->mappings().empty());
  EXPECT_EQ(files->weight_files().size(), files->mappings().size());
}

}  // namespace
}  // namespace fornace
