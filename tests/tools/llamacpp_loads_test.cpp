// llama.cpp itself (npm's node-llama-cpp 3.21.1 prebuilt CPU binaries) loads the GGUF files that
// `fornace quantize` writes for each family, tokenizes as Fornace does and computes the same
// logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/run_fornace.h"
#include "common/source_paths.h"
#include "common/test_models.h"
#include "io/config.h"
#include "io/test_files.h"

namespace fornace {
namespace {

using nlohmann::json;
using test_support::shell_quote;
using test_support::TemporaryDirectory;

const std::string kReferenceDir = fornace::test_paths::source("tests/reference/llamacpp");

struct Family {
  const char* preset;
  const char* architecture;  // general.architecture as llama.cpp names it.
  const char* special_text;  // Text that starts with one of the family's special tokens.
};

// How far llama.cpp's next-token logits may be from Fornace's for a file type, as relative L2
// error, and whether its greedy tokens must be Fornace's. f32: the same arithmetic but for
// summation order and Gemma's GELU, which ggml reads from an f16 table (Qwen and Llama agree to
// about 1e-6, Gemma to 3e-4). bf16: Fornace runs the file's weights in f32 (--dtype f32) while
// llama.cpp rounds activations to bf16 before each matrix product (seen: 0.3-0.8%). q8_0 and
// q4_k_m: both round activations to 8-bit blocks for integer dot products, not in the same
// places, and Fornace keeps a bf16 KV cache (seen: 1.3-3%). A wrongly written tensor (rows out of
// order, a norm without its +1) is off by tens of percent.
struct FileType {
  const char* name;
  const char* llamacpp_name;  // print_info's "file type".
  double logit_tolerance;
  bool fornace_in_f32;   // Fornace runs the file with --dtype f32.
  bool same_argmax;      // llama.cpp's most likely next token is Fornace's greedy one.
  bool llamacpp_greedy;  // llama.cpp also generates greedily with its own sampler.
  bool rounds_activations;  // Both round activations to 8-bit blocks (llama.cpp and Fornace).
};
const FileType kFileTypes[] = {
    {"f32", "all F32", 1e-3, false, true, true, false},
    {"bf16", "BF16", 2e-2, true, true, false, false},
    {"q8_0", "Q8_0", 6e-2, false, false, false, true},
    {"q4_k_m", "Q4_K - Medium", 6e-2, false, false, false, true},
};

constexpr int64_t kPromptLength = 12;  // Longer than tiny-gemma3's sliding window of 8.
constexpr int64_t kNewTokens = 4;

std::string join_ids(const std::vector<uint32_t>& ids) {
  std::string text;
  for (uint32_t id : ids) text += (text.empty() ? "" : ",") + std::to_string(id);
  return text;
}

// Little-endian float32 values of a file written whole: a .npy (after its header) or raw.
std::vector<float> read_floats(const std::string& path, bool npy) {
  std::string bytes = slurp(path);
  size_t start = npy ? bytes.find('\n') + 1 : 0;
  std::vector<float> values((bytes.size() - start) / sizeof(float));
  std::memcpy(values.data(), bytes.data() + start, values.size() * sizeof(float));
  return values;
}

// Relative L2 error of `actual` against `expected` after each loses its mean: llama.cpp gives
// log-probabilities, which are the logits less one constant.
double centered_relative_l2(const float* actual, const float* expected, size_t count) {
  double actual_mean = 0;
  double expected_mean = 0;
  for (size_t i = 0; i < count; ++i) {
    actual_mean += actual[i];
    expected_mean += expected[i];
  }
  actual_mean /= static_cast<double>(count);
  expected_mean /= static_cast<double>(count);
  double error = 0;
  double norm = 0;
  for (size_t i = 0; i < count; ++i) {
    double want = expected[i] - expected_mean;
    double difference = (actual[i] - actual_mean) - want;
    error += difference * difference;
    norm += want * want;
  }
  return std::sqrt(error / norm);
}

// The synthetic f32 checkpoint of `preset` in a form llama.cpp computes the same: llama.cpp
// scales Gemma 3 attention scores by head_dim^-1/2 whatever query_pre_attn_scalar says, so the
// Gemma copy (links to the weights and tokenizer, a new config.json) sets it to head_dim.
std::string llamacpp_expressible_model(const std::string& preset, const std::string& scratch) {
  std::string source = synthetic_model_directory(preset, DType::f32);
  if (preset != "tiny-gemma3") return source;
  std::string copy = scratch + "/" + preset;
  std::filesystem::create_directories(copy);
  for (const auto& entry : std::filesystem::directory_iterator(source)) {
    if (entry.path().filename() == "config.json") continue;
    std::filesystem::create_symlink(entry.path(), copy + "/" + entry.path().filename().string());
  }
  json config = json::parse(slurp(source + "/config.json"));
  config["query_pre_attn_scalar"] = load_model_config(source).head_dim();
  std::ofstream(copy + "/config.json") << config.dump(2);
  return copy;
}

struct Case {
  Family family;
  FileType type;
};

void PrintTo(const Case& test_case, std::ostream* stream) {
  *stream << test_case.family.preset << " " << test_case.type.name;
}

class LlamaCppLoads : public ::testing::TestWithParam<Case> {};

// The error that rounding activations to 8-bit blocks adds, Fornace's against llama.cpp's, both
// measured from the exact logits: the file's weights dequantized to f32 with f32 activations
// (`--dtype f32`), one process per forward pass, on the same ids. The two round in different
// places and keep the KV cache in 16 bits (bf16 and f16), so only the size is compared (seen on
// the tiny models: Fornace 1.7-2.7 %, llama.cpp 1.3-2.6 %).
void expect_activation_error_like_llamacpp(const std::string& file,
                                           const std::vector<uint32_t>& prompt,
                                           const std::vector<uint32_t>& fornace_ids,
                                           const std::vector<float>& fornace_logits,
                                           const std::vector<float>& llamacpp_logits,
                                           size_t vocab, TemporaryDirectory& scratch) {
  double fornace_error = 0;
  double llamacpp_error = 0;
  for (int64_t row = 0; row < kNewTokens; ++row) {
    std::vector<uint32_t> context = prompt;
    context.insert(context.end(), fornace_ids.begin(), fornace_ids.begin() + row);
    const std::string exact_path = scratch.file("exact-" + std::to_string(row) + ".npy");
    Outcome exact = run_fornace("--model " + file + " --dtype f32 --threads 2 --ignore-eos --quiet" +
                                " --prompt-ids " + join_ids(context) +
                                " --max-new-tokens 1 --dump-logits " + exact_path);
    ASSERT_EQ(exact.exit_code, 0) << exact.err;
    const std::vector<float> exact_logits = read_floats(exact_path, true);
    ASSERT_EQ(exact_logits.size(), vocab);
    fornace_error +=
        centered_relative_l2(fornace_logits.data() + row * vocab, exact_logits.data(), vocab);
    llamacpp_error +=
        centered_relative_l2(llamacpp_logits.data() + row * vocab, exact_logits.data(), vocab);
  }
  fornace_error /= kNewTokens;
  llamacpp_error /= kNewTokens;
  std::printf("%s: 8-bit activation error, mean over %lld forward passes: Fornace %.3g, "
              "llama.cpp %.3g\n",
              file.c_str(), static_cast<long long>(kNewTokens), fornace_error, llamacpp_error);
  EXPECT_LE(fornace_error, 1.5 * llamacpp_error);
}

TEST_P(LlamaCppLoads, WhatFornaceWritesAndComputesTheSame) {
  ASSERT_TRUE(
      std::filesystem::exists(kReferenceDir + "/node_modules/node-llama-cpp/package.json") &&
      std::filesystem::exists(kReferenceDir + "/node_modules/@node-llama-cpp/linux-x64"))
      << "llama.cpp (npm node-llama-cpp and @node-llama-cpp/linux-x64) is not installed: run "
         "`npm ci --prefix tests/reference/llamacpp --ignore-scripts --omit=optional` in the "
         "source tree (make test does it through scripts/get-test-packages.sh)";
  const Family& family = GetParam().family;
  const FileType& type = GetParam().type;
  TemporaryDirectory scratch;
  const std::string model = llamacpp_expressible_model(family.preset, scratch.path());
  const ModelConfig config = load_model_config(model);
  const std::vector<uint32_t> prompt = test_prompt_ids(kPromptLength, config.vocab_size);
  const std::vector<std::string> texts = {
      "Hello world, this is a test.", "Numbers 1234567890 and 3.14", "你好，世界。日本語も",
      "emoji 🙂👍🏽 end",       "  two  spaces\n\ttab\n\n",    family.special_text};

  // Fornace: the file, its greedy ids and the logits of each forward pass (after the prompt, then
  // after each generated id but the last), and its tokens for the texts.
  const std::string file = scratch.file(std::string(family.preset) + "." + type.name + ".gguf");
  Outcome quantized = run_fornace("quantize --threads 2 --type " + std::string(type.name) +
                                  " --model " + shell_quote(model) + " --out " + file);
  ASSERT_EQ(quantized.exit_code, 0) << quantized.err;
  Outcome generated =
      run_fornace("--model " + file + (type.fornace_in_f32 ? " --dtype f32" : "") +
                  " --threads 2 --repeat-penalty 1 --ignore-eos --json --quiet --prompt-ids " +
                  join_ids(prompt) + " --max-new-tokens " + std::to_string(kNewTokens) +
                  " --dump-logits " + file + ".npy");
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  json summary = json::parse(generated.out.substr(generated.out.rfind('{')));
  const std::vector<uint32_t> fornace_ids = summary["generated_ids"].get<std::vector<uint32_t>>();
  const std::vector<float> fornace_logits = read_floats(file + ".npy", true);
  const size_t vocab = static_cast<size_t>(config.vocab_size);
  ASSERT_EQ(fornace_ids.size(), static_cast<size_t>(kNewTokens));
  ASSERT_EQ(fornace_logits.size(), kNewTokens * vocab);

  const std::string texts_path = scratch.file("texts.jsonl");
  {
    std::ofstream lines(texts_path);
    for (const std::string& text : texts) lines << json(text).dump() << "\n";
  }
  Outcome tokenized = run_shell_capturing(fornace_binary() + " tokenize --model " + file + " <" +
                                          texts_path + " >{out} 2>{err}");
  ASSERT_EQ(tokenized.exit_code, 0) << tokenized.err;
  std::vector<std::vector<uint32_t>> fornace_tokens;
  std::istringstream token_lines(tokenized.out);
  for (std::string line; std::getline(token_lines, line);) {
    fornace_tokens.push_back(json::parse(line).get<std::vector<uint32_t>>());
  }
  ASSERT_EQ(fornace_tokens.size(), texts.size()) << tokenized.out;

  // llama.cpp: its load report, its tokens, and its logits teacher-forced on Fornace's ids.
  json request = {{"model", file},
                  {"texts", texts},
                  {"prompt_ids", prompt},
                  {"forced_ids", std::vector<uint32_t>(fornace_ids.begin(), fornace_ids.end() - 1)},
                  {"new_tokens", type.llamacpp_greedy ? kNewTokens : 0},
                  {"log_probabilities_out", file + ".llamacpp.f32"}};
  const std::string request_path = scratch.file("requests.json");
  std::ofstream(request_path) << json::array({request}).dump();
  Outcome ran = run_shell_capturing("node " + shell_quote(kReferenceDir + "/run_llamacpp.mjs") +
                                    " " + request_path + " >{out} 2>{err} </dev/null");
  ASSERT_FALSE(ran.out.empty()) << ran.err;
  const json result = json::parse(ran.out).at(0);
  if (result.contains("error")) {
    std::string log_tail;  // llama.cpp says why in its last lines.
    const json& log = result["log"];
    for (size_t line = log.size() > 4 ? log.size() - 4 : 0; line < log.size(); ++line) {
      log_tail += "\n  " + log[line].get<std::string>();
    }
    FAIL() << "llama.cpp did not load " << file << ": " << result["error"] << log_tail;
  }
  ASSERT_EQ(ran.exit_code, 0) << ran.err;

  const json& info = result["print_info"];
  EXPECT_EQ(info["arch"], family.architecture);
  EXPECT_EQ(info["file type"], type.llamacpp_name);
  EXPECT_EQ(info["n_vocab"], std::to_string(config.vocab_size));
  EXPECT_EQ(info["n_layer"], std::to_string(config.num_hidden_layers));
  EXPECT_EQ(info["n_embd"], std::to_string(config.hidden_size));
  EXPECT_EQ(info["n_head"], std::to_string(config.num_attention_heads));
  EXPECT_EQ(info["n_head_kv"], std::to_string(config.num_key_value_heads));
  EXPECT_EQ(info["n_embd_head_k"], std::to_string(config.head_dim()));
  EXPECT_EQ(info["n_ff"], std::to_string(config.intermediate_size));
  EXPECT_EQ(std::stod(info["freq_base_train"].get<std::string>()), config.rope_theta);
  EXPECT_EQ(info["n_swa"], std::to_string(config.sliding_window));
  if (config.sliding_window > 0) {
    EXPECT_EQ(std::stod(info["freq_base_swa"].get<std::string>()), config.rope_local_base_freq);
  }
  // The one warning that llama.cpp gives for the families' own tokenizers too: a plain "</s>"
  // token that it makes end-of-generation.
  for (const json& warning : result["warnings"]) {
    EXPECT_NE(warning.get<std::string>().find("control-looking token"), std::string::npos)
        << warning;
  }

  for (size_t text = 0; text < texts.size(); ++text) {
    EXPECT_EQ(result["tokens"][text].get<std::vector<uint32_t>>(), fornace_tokens[text])
        << json(texts[text]).dump();
  }

  ASSERT_EQ(result["log_probability_rows"], kNewTokens);
  const std::vector<float> llamacpp_logits = read_floats(file + ".llamacpp.f32", false);
  ASSERT_EQ(llamacpp_logits.size(), fornace_logits.size());
  for (int64_t row = 0; row < kNewTokens; ++row) {
    const float* llamacpp_row = llamacpp_logits.data() + row * vocab;
    double error = centered_relative_l2(llamacpp_row, fornace_logits.data() + row * vocab, vocab);
    EXPECT_LE(error, type.logit_tolerance) << "forward pass " << row;
    std::printf("%s %s forward %lld: relative L2 %.3g\n", family.preset, type.name,
                static_cast<long long>(row), error);
    if (type.same_argmax) {
      size_t most_likely = std::max_element(llamacpp_row, llamacpp_row + vocab) - llamacpp_row;
      EXPECT_EQ(most_likely, fornace_ids[row]) << "forward pass " << row;
    }
  }
  if (type.llamacpp_greedy) {
    EXPECT_EQ(result["generated_ids"].get<std::vector<uint32_t>>(), fornace_ids);
  }
  if (type.rounds_activations) {
    expect_activation_error_like_llamacpp(file, prompt, fornace_ids, fornace_logits,
                                          llamacpp_logits, vocab, scratch);
  }
}

std::vector<Case> all_cases() {
  const Family families[] = {
      {"tiny", "qwen2", "<|im_start|>user\nHi<|im_end|>"},
      {"tiny-llama", "llama", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>"},
      {"tiny-qwen3", "qwen3", "<|im_start|>assistant\n<think>"},
      {"tiny-gemma3", "gemma3", "<start_of_turn>user\nHi<end_of_turn>"},
  };
  std::vector<Case> cases;
  for (const Family& family : families) {
    for (const FileType& type : kFileTypes) cases.push_back({family, type});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Families, LlamaCppLoads, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name =
                               std::string(info.param.family.preset) + "_" + info.param.type.name;
                           for (char& character : name) {
                             if (!std::isalnum(static_cast<unsigned char>(character)))
                               character = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace fornace
