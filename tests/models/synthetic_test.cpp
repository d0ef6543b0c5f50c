// Tests of synthetic checkpoints: preset shapes, determinism, weight statistics, atomic output.
#include "models/synthetic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "common/source_paths.h"
#include "cpu/thread_pool.h"
#include "io/files.h"
#include "io/test_files.h"
#include "ops/creation.h"

namespace fornace {
namespace {

using test_support::error_message;
using test_support::expect_message_names;
using test_support::list_directory;
using test_support::read_bytes;
using test_support::TemporaryDirectory;
using test_support::write_bytes;

// A directory with stand-in tokenizer files, so these tests do not need the real tokenizer.
struct TokenizerFixture {
  TemporaryDirectory directory;
  TokenizerFixture() {
    write_bytes(directory.file("tokenizer.json"), "{\"model\": \"stand-in\"}");
    write_bytes(directory.file("tokenizer_config.json"), "{\"config\": \"stand-in\"}");
  }
};

SyntheticOptions tiny_options(const std::string& out, const std::string& tokenizer_directory,
                              uint64_t seed = 0, DType dtype = DType::bf16) {
  SyntheticOptions options;
  options.preset = "tiny";
  options.out_directory = out;
  options.seed = seed;
  options.dtype = dtype;
  options.tokenizer_directory = tokenizer_directory;
  return options;
}

int64_t parameter_count(const std::vector<TensorSpec>& specs) {
  int64_t total = 0;
  for (const TensorSpec& spec : specs) total += spec.shape.product();
  return total;
}

const TensorSpec& spec_named(const std::vector<TensorSpec>& specs, const std::string& name) {
  for (const TensorSpec& spec : specs) {
    if (spec.name == name) return spec;
  }
  throw Error("no spec " + name);
}

TEST(SyntheticPreset, Qwen25HalfBillionHasTheRealShapes) {
  ModelConfig config = synthetic_preset("qwen2.5-0.5b");
  EXPECT_EQ(config.model_type, "qwen2");
  EXPECT_EQ(config.hidden_size, 896);
  EXPECT_EQ(config.num_hidden_layers, 24);
  EXPECT_EQ(config.num_attention_heads, 14);
  EXPECT_EQ(config.num_key_value_heads, 2);
  EXPECT_EQ(config.intermediate_size, 4864);
  EXPECT_EQ(config.vocab_size, 151936);
  EXPECT_TRUE(config.tie_word_embeddings);
  EXPECT_EQ(config.rope_theta, 1e6);
  EXPECT_EQ(config.rms_norm_eps, 1e-6);
  EXPECT_EQ(config.max_position_embeddings, 32768);
  EXPECT_EQ(config.eos_token_ids, (std::vector<int64_t>{151645, 151643}));

  std::vector<TensorSpec> specs = checkpoint_tensor_specs(config, DType::bf16);
  EXPECT_EQ(specs.size(), 2u + 24u * 12u);
  // Hugging Face reports 494,032,768 parameters for Qwen2.5-0.5B.
  EXPECT_EQ(parameter_count(specs), 494032768);
  EXPECT_EQ(spec_named(specs, "model.embed_tokens.weight").shape, (Dims{151936, 896}));
  EXPECT_EQ(spec_named(specs, "model.layers.0.self_attn.q_proj.weight").shape, (Dims{896, 896}));
  EXPECT_EQ(spec_named(specs, "model.layers.0.self_attn.q_proj.bias").shape, (Dims{896}));
  EXPECT_EQ(spec_named(specs, "model.layers.23.self_attn.k_proj.weight").shape, (Dims{128, 896}));
  EXPECT_EQ(spec_named(specs, "model.layers.23.self_attn.v_proj.bias").shape, (Dims{128}));
  EXPECT_EQ(spec_named(specs, "model.layers.5.self_attn.o_proj.weight").shape, (Dims{896, 896}));
  EXPECT_EQ(spec_named(specs, "model.layers.5.mlp.gate_proj.weight").shape, (Dims{4864, 896}));
  EXPECT_EQ(spec_named(specs, "model.layers.5.mlp.up_proj.weight").shape, (Dims{4864, 896}));
  EXPECT_EQ(spec_named(specs, "model.layers.5.mlp.down_proj.weight").shape, (Dims{896, 4864}));
  EXPECT_EQ(spec_named(specs, "model.layers.5.input_layernorm.weight").shape, (Dims{896}));
  EXPECT_EQ(spec_named(specs, "model.layers.5.post_attention_layernorm.weight").shape, (Dims{896}));
  EXPECT_EQ(spec_named(specs, "model.norm.weight").shape, (Dims{896}));
  for (const TensorSpec& spec : specs) {
    EXPECT_EQ(spec.name.find("o_proj.bias"), std::string::npos);
    EXPECT_NE(spec.name, "lm_head.weight");
    EXPECT_EQ(spec.dtype, DType::bf16);
  }
}

TEST(SyntheticPreset, Qwen25OneAndAHalfBillionHasTheRealParameterCount) {
  ModelConfig config = synthetic_preset("qwen2.5-1.5b");
  EXPECT_EQ(config.hidden_size, 1536);
  EXPECT_EQ(config.num_hidden_layers, 28);
  EXPECT_EQ(config.num_attention_heads, 12);
  EXPECT_EQ(config.num_key_value_heads, 2);
  EXPECT_EQ(config.intermediate_size, 8960);
  // Hugging Face reports 1,543,714,304 parameters for Qwen2.5-1.5B.
  EXPECT_EQ(parameter_count(checkpoint_tensor_specs(config, DType::bf16)), 1543714304);
}

TEST(SyntheticPreset, UntiedConfigGetsAnLmHead) {
  ModelConfig config = synthetic_preset("tiny");
  config.tie_word_embeddings = false;
  EXPECT_EQ(spec_named(checkpoint_tensor_specs(config, DType::f32), "lm_head.weight").shape,
            (Dims{151936, 64}));
}

TEST(SyntheticPreset, PresetsPassConfigValidation) {
  for (const std::string& name : synthetic_preset_names()) {
    ModelConfig config = parse_model_config(model_config_to_json(synthetic_preset(name)), name);
    EXPECT_EQ(config.hidden_size, synthetic_preset(name).hidden_size) << name;
  }
}

TEST(SyntheticPreset, UnknownPresetListsTheKnownOnes) {
  expect_message_names(error_message([] { synthetic_preset("gpt-5"); }),
                       {"'gpt-5'", "tiny", "qwen2.5-0.5b", "qwen2.5-1.5b"});
}

TEST(SyntheticModel, SameSeedGivesIdenticalBytesAndAnotherSeedDiffers) {
  TokenizerFixture tokenizer;
  TemporaryDirectory directory;
  std::string first = directory.file("first"), second = directory.file("second"),
              other = directory.file("other");
  write_synthetic_model(tiny_options(first, tokenizer.directory.path(), 7));
  write_synthetic_model(tiny_options(second, tokenizer.directory.path(), 7));
  write_synthetic_model(tiny_options(other, tokenizer.directory.path(), 8));
  for (const char* file : {"model.safetensors", "config.json", "generation_config.json"}) {
    EXPECT_EQ(read_bytes(first + "/" + file), read_bytes(second + "/" + file)) << file;
  }
  EXPECT_NE(read_bytes(first + "/model.safetensors"), read_bytes(other + "/model.safetensors"));
  EXPECT_EQ(read_bytes(first + "/model.safetensors").size(),
            read_bytes(other + "/model.safetensors").size());
}

TEST(SyntheticModel, ValuesDoNotDependOnTheThreadCount) {
  TensorSpec spec{"model.embed_tokens.weight", DType::f32, {4096, 64}};
  std::vector<float> threaded = to_f32_vector(synthetic_tensor(spec, 3));
  int threads = num_threads();
  set_num_threads(1);
  std::vector<float> single = to_f32_vector(synthetic_tensor(spec, 3));
  set_num_threads(threads);
  EXPECT_EQ(threaded, single);
}

TEST(SyntheticModel, Bf16WeightsAreTheRoundedF32Weights) {
  TensorSpec f32_spec{"model.layers.0.mlp.up_proj.weight", DType::f32, {128, 64}};
  TensorSpec bf16_spec = f32_spec;
  bf16_spec.dtype = DType::bf16;
  std::vector<float> exact = to_f32_vector(synthetic_tensor(f32_spec, 11));
  std::vector<float> rounded = to_f32_vector(synthetic_tensor(bf16_spec, 11));
  ASSERT_EQ(exact.size(), rounded.size());
  for (size_t index = 0; index < exact.size(); ++index) {
    ASSERT_EQ(rounded[index], bf16_to_f32(f32_to_bf16(exact[index]))) << index;
  }
}

struct Moments {
  double mean = 0;
  double stddev = 0;
  double within_one_stddev = 0;  // Fraction of values within one standard deviation of the mean.
};

Moments moments_of(const std::vector<float>& values) {
  Moments result;
  for (float value : values) result.mean += value;
  result.mean /= values.size();
  for (float value : values) result.stddev += (value - result.mean) * (value - result.mean);
  result.stddev = std::sqrt(result.stddev / values.size());
  for (float value : values) {
    result.within_one_stddev += std::abs(value - result.mean) <= result.stddev;
  }
  result.within_one_stddev /= values.size();
  return result;
}

TEST(SyntheticModel, WeightsFollowTheDocumentedDistributions) {
  struct Expected {
    const char* name;
    Dims shape;
    double mean;
    double stddev;
  };
  const std::vector<Expected> cases = {
      {"model.embed_tokens.weight", {151936, 64}, 0.0, 1.0 / 8.0},
      {"model.layers.1.self_attn.q_proj.weight", {64, 64}, 0.0, 1.0 / 8.0},
      {"model.layers.1.mlp.down_proj.weight", {64, 128}, 0.0, 1.0 / std::sqrt(128.0)},
      {"model.layers.1.self_attn.k_proj.bias", {4096}, 0.0, 0.1},
      {"model.layers.1.input_layernorm.weight", {4096}, 1.0, 0.1},
      {"model.norm.weight", {4096}, 1.0, 0.1},
  };
  for (const Expected& expected : cases) {
    Moments moments =
        moments_of(to_f32_vector(synthetic_tensor({expected.name, DType::f32, expected.shape}, 0)));
    double count = static_cast<double>(expected.shape.product());
    EXPECT_NEAR(moments.mean, expected.mean, 5 * expected.stddev / std::sqrt(count))
        << expected.name;
    EXPECT_NEAR(moments.stddev, expected.stddev, 0.05 * expected.stddev) << expected.name;
    // A normal distribution has 68.3% of its mass within one standard deviation.
    EXPECT_NEAR(moments.within_one_stddev, 0.683, 0.03) << expected.name;
  }
}

TEST(SyntheticModel, WrittenDirectoryLoadsAsACheckpoint) {
  TokenizerFixture tokenizer;
  TemporaryDirectory directory;
  std::string out = directory.file("tiny");
  SyntheticSummary summary =
      write_synthetic_model(tiny_options(out, tokenizer.directory.path(), 1, DType::f32));
  EXPECT_EQ(list_directory(directory.path()), (std::vector<std::string>{"tiny"}));
  EXPECT_EQ(list_directory(out),
            (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors",
                                      "tokenizer.json", "tokenizer_config.json"}));
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_EQ(read_bytes(out + "/" + file), read_bytes(tokenizer.directory.file(file))) << file;
  }
  ModelConfig config = load_model_config(out);
  EXPECT_EQ(config.hidden_size, 64);
  EXPECT_EQ(config.torch_dtype, "float32");
  EXPECT_EQ(config.eos_token_ids, (std::vector<int64_t>{151645, 151643}));

  Checkpoint checkpoint = Checkpoint::open_directory(out);
  std::vector<TensorSpec> specs = checkpoint_tensor_specs(config, DType::f32);
  EXPECT_EQ(checkpoint.names().size(), specs.size());
  EXPECT_EQ(summary.parameters, parameter_count(specs));
  EXPECT_EQ(summary.weight_bytes, parameter_count(specs) * 4);
  for (const TensorSpec& spec : specs) {
    Tensor tensor = checkpoint.tensor(spec.name);
    EXPECT_EQ(tensor.dtype(), DType::f32) << spec.name;
    EXPECT_EQ(tensor.shape(), spec.shape) << spec.name;
  }
  EXPECT_EQ(
      to_f32_vector(checkpoint.tensor("model.layers.1.mlp.gate_proj.weight")),
      to_f32_vector(synthetic_tensor(spec_named(specs, "model.layers.1.mlp.gate_proj.weight"), 1)));
  EXPECT_EQ(checkpoint.files()[0]->metadata().at("format"), "pt");
}

TEST(SyntheticModel, MissingTokenizerSaysHowToGetItAndWritesNothing) {
  TemporaryDirectory empty;
  TemporaryDirectory directory;
  std::string message = error_message(
      [&] { write_synthetic_model(tiny_options(directory.file("out"), empty.path())); });
  expect_message_names(message, {empty.file("tokenizer.json"), "scripts/get-tokenizer.sh"});
  EXPECT_TRUE(list_directory(directory.path()).empty());
}

TEST(SyntheticModel, ReplacesAnExistingModelDirectoryOnlyAfterSuccess) {
  TokenizerFixture tokenizer;
  TemporaryDirectory directory;
  std::string out = directory.file("model");
  write_synthetic_model(tiny_options(out, tokenizer.directory.path(), 1));
  std::string first = read_bytes(out + "/model.safetensors");
  // A failing rewrite (no tokenizer) keeps the old model.
  TemporaryDirectory empty;
  EXPECT_THROW(write_synthetic_model(tiny_options(out, empty.path(), 2)), Error);
  EXPECT_EQ(read_bytes(out + "/model.safetensors"), first);
  // A successful rewrite replaces it and leaves no staging or old directories behind.
  write_synthetic_model(tiny_options(out, tokenizer.directory.path(), 2));
  EXPECT_NE(read_bytes(out + "/model.safetensors"), first);
  EXPECT_EQ(list_directory(directory.path()), (std::vector<std::string>{"model"}));
}

TEST(SyntheticModel, RefusesToReplaceSomethingThatIsNotAModel) {
  TokenizerFixture tokenizer;
  TemporaryDirectory directory;
  std::string out = directory.file("documents");
  std::filesystem::create_directory(out);
  write_bytes(out + "/notes.txt", "keep me");
  expect_message_names(
      error_message([&] { write_synthetic_model(tiny_options(out, tokenizer.directory.path())); }),
      {out, "refusing"});
  EXPECT_EQ(read_bytes(out + "/notes.txt"), "keep me");
  write_bytes(directory.file("plain-file"), "x");
  expect_message_names(error_message([&] {
                         write_synthetic_model(tiny_options(directory.file("plain-file"),
                                                            tokenizer.directory.path()));
                       }),
                       {directory.file("plain-file"), "not a directory"});
  EXPECT_EQ(list_directory(directory.path()),
            (std::vector<std::string>{"documents", "plain-file"}));
}

TEST(SyntheticModel, NumpyReferenceFindsFiniteDistinctLogitsOnTheTinyModel) {
  TokenizerFixture tokenizer;
  TemporaryDirectory directory;
  for (DType dtype : {DType::f32, DType::bf16}) {
    std::string out = directory.file(dtype_name(dtype));
    write_synthetic_model(tiny_options(out, tokenizer.directory.path(), 0, dtype));
    auto result =
        test_support::run_command_line(fornace::test_paths::python() + " " +
                                       fornace::test_paths::source("tests/reference/qwen2_ref.py") +
                                       " --self-test --model " + out);
    EXPECT_EQ(result.exit_code, 0) << result.output;
  }
}

TEST(SynthCommand, UsageErrorsExitTwoWithOneLine) {
  std::string binary = fornace::test_paths::build("bin/fornace");
  if (!std::filesystem::exists(binary)) GTEST_SKIP() << "fornace is not built";
  TemporaryDirectory directory;
  for (const std::string& arguments :
       {std::string("synth"), std::string("synth --out ") + directory.file("x"),
        std::string("synth --preset nope --out ") + directory.file("x"),
        std::string("synth --preset tiny --out ") + directory.file("x") + " --dtype i32",
        std::string("synth --preset tiny --out ") + directory.file("x") + " --seed -1",
        std::string("synth --preset tiny --out ") + directory.file("x") + " --bogus"}) {
    auto result = test_support::run_command_line(binary + " " + arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments << ": " << result.output;
    EXPECT_EQ(result.output.rfind("error: ", 0), 0u) << result.output;
    EXPECT_EQ(result.output.find('\n'), result.output.size() - 1) << result.output;
  }
  EXPECT_TRUE(list_directory(directory.path()).empty());
}

TEST(SynthCommand, WritesTheModelAndReportsIt) {
  std::string binary = fornace::test_paths::build("bin/fornace");
  if (!std::filesystem::exists(binary)) GTEST_SKIP() << "fornace is not built";
  TokenizerFixture tokenizer;
  TemporaryDirectory directory;
  std::string out = directory.file("tiny");
  auto result =
      test_support::run_command_line(binary + " synth --preset tiny --seed 5 --out " + out +
                                     " --tokenizer-dir " + tokenizer.directory.path());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output.rfind("synth: wrote " + out, 0), 0u) << result.output;
  TemporaryDirectory again;
  write_synthetic_model(tiny_options(again.file("tiny"), tokenizer.directory.path(), 5));
  EXPECT_EQ(read_bytes(out + "/model.safetensors"),
            read_bytes(again.file("tiny/model.safetensors")));
  auto missing = test_support::run_command_line(binary + " synth --preset tiny --out " +
                                                directory.file("other") + " --tokenizer-dir " +
                                                directory.file("absent"));
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("get-tokenizer.sh"), std::string::npos) << missing.output;
}

}  // namespace
}  // namespace fornace
