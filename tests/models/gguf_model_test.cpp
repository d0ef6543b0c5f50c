// GGUF files as models: the same logits as the checkpoint they were written from, the tensor
// changes llama.cpp's converter makes (Llama's Q/K rows, Gemma's norms), llama-quantize's
// per-tensor types, and errors that name the file and the key or tensor.
#include "models/gguf_model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/relative_error.h"
#include "common/run_fornace.h"
#include "common/source_paths.h"
#include "common/test_models.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/safetensors.h"
#include "io/test_files.h"
#include "models/gguf_export.h"
#include "models/model.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "text/tokenizer.h"

namespace fornace {
namespace {

namespace fs = std::filesystem;

const char* kTinyPresets[] = {"tiny", "tiny-llama", "tiny-qwen3", "tiny-gemma3"};

std::vector<float> all_logits(const std::string& path, const ModelOptions& options = {}) {
  std::unique_ptr<Model> model = load_model(path, options);
  std::vector<uint32_t> ids = test_prompt_ids(9, model->config().vocab_size);
  KvCacheSet cache(KvCacheKind::prealloc, model->config().num_hidden_layers,
                   model->kv_cache_shape(16));
  Tensor input = from_vector(std::vector<float>(ids.begin(), ids.end()),
                             {1, static_cast<int64_t>(ids.size())}, DType::u32);
  return to_f32_vector(model->forward(input, cache, Logits::all));
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

// A copy of `source` with metadata changed by `edit` (and tensors kept), at `path`.
std::string rewritten(const std::string& source, const ScratchPath& out,
                      const std::function<void(GgufWriter&)>& edit) {
  std::shared_ptr<GgufFile> file = GgufFile::open(source);
  GgufWriter writer;
  for (const GgufKeyValue& entry : file->metadata()) writer.set(entry.key, entry.value);
  for (const GgufTensorInfo& info : file->tensors())
    writer.add_tensor(info.name, info.type, info.dims);
  edit(writer);
  writer.write(out.string(), [&](size_t index, std::span<std::byte> data) {
    std::memcpy(data.data(), file->tensors()[index].data, data.size());
  });
  return out.string();
}

// Bit for bit, except Llama: llama.cpp keeps llama3 rotary scaling as per-frequency divisors
// (rope_freqs), so the frequencies are recomputed as base / divisor, a last-bit difference.
TEST(GgufModels, AFloatFileGivesTheCheckpointsLogits) {
  for (const char* preset : kTinyPresets) {
    for (auto [dtype, type] : {std::pair{DType::f32, "f32"}, {DType::bf16, "bf16"}}) {
      std::string directory = synthetic_model_directory(preset, dtype);
      std::vector<float> expected = all_logits(directory);
      std::vector<float> actual = all_logits(synthetic_gguf_file(preset, dtype, type));
      ASSERT_EQ(actual.size(), expected.size()) << preset;
      if (std::string(preset) == "tiny-llama") {
        EXPECT_LT(relative_l2(actual, expected), 1e-6) << preset << " " << type;
      } else {
        EXPECT_EQ(std::memcmp(actual.data(), expected.data(), sizeof(float) * actual.size()), 0)
            << preset << " " << type;
      }
    }
  }
}

TEST(GgufModels, TheConfigComesBackFromTheMetadata) {
  for (const char* preset : kTinyPresets) {
    ModelConfig expected = synthetic_preset(preset);
    std::shared_ptr<GgufFile> file = GgufFile::open(synthetic_gguf_file(preset, DType::f32, "f32"));
    ModelConfig config = model_config_from_gguf(*file);
    EXPECT_EQ(config.model_type, expected.model_type);
    EXPECT_EQ(config.hidden_size, expected.hidden_size);
    EXPECT_EQ(config.intermediate_size, expected.intermediate_size);
    EXPECT_EQ(config.num_hidden_layers, expected.num_hidden_layers);
    EXPECT_EQ(config.num_attention_heads, expected.num_attention_heads);
    EXPECT_EQ(config.num_key_value_heads, expected.num_key_value_heads);
    EXPECT_EQ(config.head_dim(), expected.head_dim());
    EXPECT_EQ(config.vocab_size, expected.vocab_size);
    EXPECT_EQ(config.tie_word_embeddings, expected.tie_word_embeddings);
    EXPECT_EQ(config.attention_bias, expected.attention_bias);
    EXPECT_EQ(config.sliding_layers, expected.sliding_layers) << preset;
    EXPECT_EQ(config.sliding_window, expected.sliding_window);
    EXPECT_FLOAT_EQ(config.rope_theta, expected.rope_theta);
    EXPECT_FLOAT_EQ(config.final_logit_softcapping, expected.final_logit_softcapping);
  }
}

// numpy's w.reshape(heads, 2, D/2, K).swapaxes(1, 2), the interleaving llama.cpp's converter
// applies to Llama's Q and K, written as nested loops over (head, half, i).
TEST(GgufModels, LlamaQueryAndKeyRowsArePairedPerHeadAsLlamaCppStoresThem) {
  std::string directory = synthetic_model_directory("tiny-llama", DType::f32);
  Checkpoint checkpoint = Checkpoint::open_directory(directory);
  std::shared_ptr<GgufFile> file =
      GgufFile::open(synthetic_gguf_file("tiny-llama", DType::f32, "f32"));
  const int64_t head_dim = synthetic_preset("tiny-llama").head_dim();
  for (auto [hf, gguf] :
       {std::pair{"model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"},
        {"model.layers.1.self_attn.k_proj.weight", "blk.1.attn_k.weight"}}) {
    std::vector<float> original = to_f32_vector(checkpoint.tensor(hf));
    const GgufTensorInfo& info = file->tensor(gguf);
    const auto* stored = static_cast<const float*>(info.data);
    const int64_t columns = info.columns();
    const int64_t heads = info.rows() / head_dim;
    int64_t mismatches = 0;
    for (int64_t head = 0; head < heads; ++head) {
      for (int64_t half = 0; half < 2; ++half) {
        for (int64_t i = 0; i < head_dim / 2; ++i) {
          int64_t hf_row = (head * 2 + half) * (head_dim / 2) + i;    // [heads, 2, D/2]
          int64_t gguf_row = (head * (head_dim / 2) + i) * 2 + half;  // [heads, D/2, 2]
          mismatches += std::memcmp(stored + gguf_row * columns, original.data() + hf_row * columns,
                                    sizeof(float) * columns) != 0;
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << gguf;
  }
}

TEST(GgufModels, GemmaNormsAreStoredAsOnePlusTheWeight) {
  std::string directory = synthetic_model_directory("tiny-gemma3", DType::f32);
  Checkpoint checkpoint = Checkpoint::open_directory(directory);
  std::shared_ptr<GgufFile> file =
      GgufFile::open(synthetic_gguf_file("tiny-gemma3", DType::f32, "f32"));
  for (auto [hf, gguf] :
       {std::pair{"model.norm.weight", "output_norm.weight"},
        {"model.layers.0.self_attn.q_norm.weight", "blk.0.attn_q_norm.weight"},
        {"model.layers.2.post_feedforward_layernorm.weight", "blk.2.post_ffw_norm.weight"}}) {
    std::vector<float> original = to_f32_vector(checkpoint.tensor(hf));
    const auto* stored = static_cast<const float*>(file->tensor(gguf).data);
    for (size_t i = 0; i < original.size(); ++i) ASSERT_EQ(stored[i], original[i] + 1.0f) << gguf;
  }
}

// llama-quantize's choices for Qwen2.5-0.5B (24 layers, 896 wide, ffn 4864, tied embeddings),
// worked out from its rules: K-quant rows need 256 | columns, else Q4_K -> Q5_0, Q6_K -> Q8_0;
// attn_v and ffn_down get Q6_K in layers 0-2, 21-23 and where (layer - 3) % 3 == 2.
TEST(GgufQuantize, TensorTypesFollowLlamaQuantizeForQwen25HalfB) {
  auto type = [](GgufFileType file_type, const std::string& name, int64_t columns) {
    return block_format(gguf_tensor_type(file_type, name, columns, 24, true)).name;
  };
  const GgufFileType q4_k_m = GgufFileType::q4_k_m;
  EXPECT_STREQ(type(q4_k_m, "token_embd.weight", 896), "Q8_0");
  EXPECT_STREQ(type(q4_k_m, "blk.4.attn_q.weight", 896), "Q5_0");
  EXPECT_STREQ(type(q4_k_m, "blk.4.ffn_up.weight", 896), "Q5_0");
  EXPECT_STREQ(type(q4_k_m, "blk.0.attn_v.weight", 896), "Q8_0");
  EXPECT_STREQ(type(q4_k_m, "blk.3.attn_v.weight", 896), "Q5_0");
  EXPECT_STREQ(type(q4_k_m, "blk.0.ffn_down.weight", 4864), "Q6_K");
  EXPECT_STREQ(type(q4_k_m, "blk.3.ffn_down.weight", 4864), "Q4_K");
  EXPECT_STREQ(type(q4_k_m, "blk.5.ffn_down.weight", 4864), "Q6_K");
  EXPECT_STREQ(type(q4_k_m, "blk.20.ffn_down.weight", 4864), "Q6_K");
  EXPECT_STREQ(type(q4_k_m, "blk.19.ffn_down.weight", 4864), "Q4_K");
  EXPECT_STREQ(type(q4_k_m, "blk.21.ffn_down.weight", 4864), "Q6_K");
  EXPECT_STREQ(type(GgufFileType::q5_k_m, "blk.3.ffn_down.weight", 4864), "Q5_K");
  EXPECT_STREQ(type(GgufFileType::q5_k_m, "blk.3.attn_q.weight", 896), "Q5_1");
  EXPECT_STREQ(type(GgufFileType::q4_0, "blk.3.attn_q.weight", 896), "Q4_0");
  EXPECT_STREQ(type(GgufFileType::q4_0, "token_embd.weight", 896), "Q8_0");
  EXPECT_STREQ(type(GgufFileType::q4_0, "token_embd.weight", 2048), "Q6_K");
  EXPECT_STREQ(type(GgufFileType::q8_0, "token_embd.weight", 2048), "Q8_0");
  EXPECT_STREQ(type(GgufFileType::bf16, "blk.3.attn_q.weight", 896), "BF16");
  // One block type throughout, llama.cpp's fallback where the rows cannot hold it.
  EXPECT_STREQ(type(GgufFileType::q5_0, "token_embd.weight", 896), "Q5_0");
  EXPECT_STREQ(type(GgufFileType::q4_1, "blk.3.ffn_down.weight", 4864), "Q4_1");
  EXPECT_STREQ(type(GgufFileType::q6_k, "output.weight", 1536), "Q6_K");
  EXPECT_STREQ(type(GgufFileType::q6_k, "blk.3.attn_q.weight", 896), "Q8_0");
  EXPECT_STREQ(type(GgufFileType::q4_k, "blk.3.attn_v.weight", 2048), "Q4_K");
  EXPECT_STREQ(type(GgufFileType::q5_k, "blk.3.attn_q.weight", 896), "Q5_1");
}

TEST(GgufModels, AnArchitectureFornaceDoesNotRunNamesTheFileAndKey) {
  std::string source = synthetic_gguf_file("tiny", DType::f32, "f32");
  ScratchPath bert("bert.gguf");
  std::string path = rewritten(source, bert, [](GgufWriter& writer) {
    writer.set("general.architecture", GgufValue("bert"));
  });
  std::string message = error_of([&] { load_model(path); });
  for (const char* part : {"bert.gguf", "general.architecture", "bert", "qwen2", "gemma3"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << ": " << message;
  }
}

TEST(GgufModels, AMissingOrWronglyTypedKeyIsNamed) {
  std::string source = synthetic_gguf_file("tiny", DType::f32, "f32");
  ScratchPath no_blocks("no-blocks.gguf");
  std::string missing = rewritten(source, no_blocks, [](GgufWriter& writer) {
    GgufWriter copy;
    for (const GgufKeyValue& entry : writer.metadata()) {
      if (entry.key != "qwen2.block_count") copy.set(entry.key, entry.value);
    }
    for (const GgufTensorSpec& spec : writer.tensors())
      copy.add_tensor(spec.name, spec.type, spec.dims);
    writer = copy;
  });
  std::string message = error_of([&] { load_model(missing); });
  EXPECT_NE(message.find("no-blocks.gguf"), std::string::npos) << message;
  EXPECT_NE(message.find("qwen2.block_count"), std::string::npos) << message;

  ScratchPath string_heads("string-heads.gguf");
  std::string wrong = rewritten(source, string_heads, [](GgufWriter& writer) {
    writer.set("qwen2.attention.head_count", GgufValue("four"));
  });
  message = error_of([&] { load_model(wrong); });
  EXPECT_NE(message.find("qwen2.attention.head_count"), std::string::npos) << message;
}

TEST(GgufModels, AMissingTensorIsNamedInBothNamings) {
  std::string source = synthetic_gguf_file("tiny-qwen3", DType::f32, "f32");
  std::shared_ptr<GgufFile> file = GgufFile::open(source);
  GgufWriter writer;
  for (const GgufKeyValue& entry : file->metadata()) writer.set(entry.key, entry.value);
  std::vector<size_t> kept;
  for (size_t index = 0; index < file->tensors().size(); ++index) {
    const GgufTensorInfo& info = file->tensors()[index];
    if (info.name == "blk.1.attn_k_norm.weight") continue;
    writer.add_tensor(info.name, info.type, info.dims);
    kept.push_back(index);
  }
  ScratchPath no_k_norm("no-k-norm.gguf");
  std::string path = no_k_norm.string();
  writer.write(path, [&](size_t index, std::span<std::byte> data) {
    std::memcpy(data.data(), file->tensors()[kept[index]].data, data.size());
  });
  std::string message = error_of([&] { load_model(path); });
  for (const char* part :
       {"no-k-norm.gguf", "blk.1.attn_k_norm.weight", "model.layers.1.self_attn.k_norm.weight"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << ": " << message;
  }
}

TEST(GgufQuantize, WarnsWhenLlamaCppWillReadAnotherModel) {
  ScratchPath out("warned.gguf");
  GgufExportSummary gemma =
      export_gguf(*ModelFiles::open(synthetic_model_directory("tiny-gemma3", DType::f32)),
                  out.string(), GgufFileType::q8_0);
  ASSERT_EQ(gemma.warnings.size(), 1u);
  EXPECT_NE(gemma.warnings[0].find("query_pre_attn_scalar 256"), std::string::npos);
  GgufExportSummary qwen =
      export_gguf(*ModelFiles::open(synthetic_model_directory("tiny", DType::f32)), out.string(),
                  GgufFileType::q8_0);
  EXPECT_TRUE(qwen.warnings.empty());
}

TEST(GgufQuantize, AFailedExportLeavesNoFile) {
  std::string directory = synthetic_model_directory("tiny", DType::f32);
  fs::path out = fs::path(fornace::test_paths::build()) / "test-models" / "no-such-dir" / "x.gguf";
  EXPECT_FALSE(error_of([&] {
                 export_gguf(*ModelFiles::open(directory), out.string(), GgufFileType::bf16);
               }).empty());
  EXPECT_FALSE(fs::exists(out));
  ScratchPath missing_config("no-config");
  fs::create_directories(missing_config.path());
  ScratchPath target("no-config.gguf");
  std::string message = error_of([&] {
    export_gguf(*ModelFiles::open(missing_config.string()), target.string(), GgufFileType::q8_0);
  });
  EXPECT_NE(message.find("config.json"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(target.path()));
}

// What `fornace quantize` writes, as npm's @huggingface/gguf reads it: every tensor with the
// GGUF name, dims and type that the names, shapes and llama-quantize rules say, and the config
// and tokenizer keys with the checkpoint's values.
TEST(GgufQuantize, TheIndependentReaderSeesWhatQuantizeMeantToWrite) {
  const std::string preset = "tiny";
  std::string path = synthetic_gguf_file(preset, DType::f32, "q4_k_m");
  auto result = test_support::run_command_line(
      "node " +
      test_support::shell_quote(fornace::test_paths::source("tests/reference/gguf/read_gguf.mjs")) +
      " " + test_support::shell_quote(path));
  ASSERT_EQ(result.exit_code, 0) << result.output << "\n(make test-packages installs the reader)";
  nlohmann::json read = nlohmann::json::parse(result.output);
  ModelConfig config = synthetic_preset(preset);
  std::vector<TensorSpec> specs = checkpoint_tensor_specs(config, DType::f32);
  ASSERT_EQ(read["tensors"].size(), specs.size());
  for (size_t index = 0; index < specs.size(); ++index) {
    const TensorSpec& spec = specs[index];
    const nlohmann::json& info = read["tensors"][index];
    EXPECT_EQ(info["name"], gguf_tensor_name(spec.name, config.model_type));
    nlohmann::json dims = nlohmann::json::array();
    for (size_t dim = spec.shape.size(); dim-- > 0;)
      dims.push_back(std::to_string(spec.shape[dim]));
    EXPECT_EQ(info["shape"], dims) << spec.name;
    BlockType expected = spec.shape.size() == 1
                             ? BlockType::f32
                             : gguf_tensor_type(GgufFileType::q4_k_m, info["name"], spec.shape[1],
                                                config.num_hidden_layers, true);
    EXPECT_EQ(info["dtype"], block_format(expected).ggml_type) << spec.name;
  }
  const nlohmann::json& metadata = read["metadata"];
  EXPECT_EQ(metadata["general.architecture"]["value"], "qwen2");
  EXPECT_EQ(metadata["general.file_type"]["value"], 15);  // llama.cpp's MOSTLY_Q4_K_M
  EXPECT_EQ(metadata["qwen2.block_count"]["value"], config.num_hidden_layers);
  EXPECT_EQ(metadata["qwen2.embedding_length"]["value"], config.hidden_size);
  EXPECT_EQ(metadata["qwen2.attention.head_count_kv"]["value"], config.num_key_value_heads);
  EXPECT_EQ(metadata["tokenizer.ggml.model"]["value"], "gpt2");
  EXPECT_EQ(metadata["tokenizer.ggml.pre"]["value"], "qwen2");
  EXPECT_EQ(metadata["tokenizer.ggml.tokens"]["value"].size(),
            static_cast<size_t>(config.vocab_size));
  nlohmann::json tokenizer_config = nlohmann::json::parse(
      slurp(synthetic_model_directory(preset, DType::f32) + "/tokenizer_config.json"));
  EXPECT_EQ(metadata["tokenizer.chat_template"]["value"], tokenizer_config["chat_template"]);
}

// The tokenizer read back from a written file's keys encodes the corpus as the checkpoint's
// tokenizer.json does, and renders the same chat template.
TEST(GgufModels, TheFilesTokenizerEncodesAsTheCheckpointsTokenizerJson) {
  std::string corpus = slurp(fornace::test_paths::source("tests/data/alice.txt"));
  ASSERT_FALSE(corpus.empty());
  for (const char* preset : kTinyPresets) {
    std::string directory = synthetic_model_directory(preset, DType::f32);
    Tokenizer from_json = Tokenizer::load(directory);
    Tokenizer from_gguf = Tokenizer::load(synthetic_gguf_file(preset, DType::f32, "q8_0"));
    EXPECT_EQ(from_gguf.encode(corpus), from_json.encode(corpus)) << preset;
    std::vector<ChatMessage> chat = {{"system", "Be brief."}, {"user", "Hi <b>there</b> 😀"}};
    EXPECT_EQ(from_gguf.apply_chat_template(chat, true), from_json.apply_chat_template(chat, true))
        << preset;
  }
}

// Decode reads every tensor once, the embedding only when it is also the lm_head: the sum over
// the checkpoint's tensors, and over a GGUF file's (quantized bytes as stored).
TEST(WeightsReadPerToken, EveryTensorOnceAndTheEmbeddingOnlyAsTheLmHead) {
  for (const char* preset : {"tiny", "tiny-llama", "tiny-gemma3"}) {
    ModelConfig config = synthetic_preset(preset);
    for (bool tied : {true, false}) {
      config.tie_word_embeddings = tied;
      // Biases are widened to f32 at load, so a forward pass reads them in f32.
      int64_t expected = 0;
      std::vector<TensorSpec> specs = checkpoint_tensor_specs(config, DType::bf16);
      for (const TensorSpec& spec : specs) {
        if (spec.name == "model.embed_tokens.weight" && !tied) continue;
        bool bias = spec.name.size() > 5 && spec.name.substr(spec.name.size() - 5) == ".bias";
        expected += spec.shape.product() * (bias ? 4 : 2);
      }
      ScratchPath checkpoint(std::string(preset) + (tied ? "-tied" : "-untied"));
      ScratchPath gguf(std::string(preset) + (tied ? "-tied" : "-untied") + ".gguf");
      const fs::path& directory = checkpoint.path();
      fs::create_directories(directory);
      std::ofstream(directory / "config.json") << model_config_to_json(config);
      write_safetensors_streamed((directory / "model.safetensors").string(), specs,
                                 [&](size_t index) { return synthetic_tensor(specs[index], 3); });
      std::unique_ptr<Model> model = load_model(directory.string());
      EXPECT_EQ(model->weights_read_per_token().total(), expected) << preset << " tied " << tied;

      export_gguf(*ModelFiles::open(directory.string()), gguf.string(), GgufFileType::bf16);
      std::shared_ptr<GgufFile> file = GgufFile::open(gguf.string());
      int64_t stored = 0;
      for (const GgufTensorInfo& info : file->tensors()) {
        if ((info.name == "token_embd.weight" && !tied) || info.name == "rope_freqs.weight")
          continue;
        stored += static_cast<int64_t>(info.bytes);
      }
      std::unique_ptr<Model> from_gguf = load_model(gguf.string());
      EXPECT_EQ(from_gguf->weights_read_per_token().total(), stored) << preset << " tied " << tied;
    }
  }
}

}  // namespace
}  // namespace fornace
