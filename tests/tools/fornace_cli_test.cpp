// The fornace command line: bad input gets one `error:` line and the right exit code.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/run_fornace.h"
#include "common/source_paths.h"
#include "common/test_models.h"

namespace fornace {
namespace {

class FornaceCli : public ::testing::Test {
 protected:
  std::string model = tiny_model_directory(DType::f32);
  std::string run(const std::string& extra) { return "--model " + model + " " + extra; }
};

TEST_F(FornaceCli, GeneratesWithEachKvCacheAndReportsJson) {
  std::vector<std::vector<int64_t>> generated;
  for (const char* kind : {"prealloc", "cat", "cat-contiguous"}) {
    Outcome outcome = run_fornace(run("--prompt 'Alice was beginning' --max-new-tokens 6 "
                                      "--ignore-eos --json --kv-cache ") + kind);
    ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
    std::string last_line = outcome.out.substr(outcome.out.rfind('\n', outcome.out.size() - 2) + 1);
    nlohmann::json summary = nlohmann::json::parse(last_line);
    EXPECT_EQ(summary["kv_cache"], kind);
    EXPECT_EQ(summary["prompt_tokens"], 3);
    EXPECT_EQ(summary["generated_ids"].size(), 6u);
    EXPECT_EQ(summary["decode_step_ms"].size(), 5u);
    for (const char* key : {"model", "dtype", "threads", "prefill_ms", "prefill_tok_s",
                            "decode_tok_s", "mean_ms_last64", "peak_rss_mib", "load_ms",
                            "first_token_ms"}) {
      EXPECT_TRUE(summary.contains(key)) << key;
    }
    // The first token comes after loading and the prefill that produces it.
    EXPECT_GT(summary["load_ms"].get<double>(), 0.0);
    EXPECT_GE(summary["first_token_ms"].get<double>(),
              summary["load_ms"].get<double>() + summary["prefill_ms"].get<double>());
    generated.push_back(summary["generated_ids"].get<std::vector<int64_t>>());
    EXPECT_NE(outcome.err.find("decode: 6 tokens"), std::string::npos) << outcome.err;
  }
  EXPECT_EQ(generated[0], generated[1]);
  EXPECT_EQ(generated[0], generated[2]);
}

TEST_F(FornaceCli, ZeroNewTokensRunsPrefillOnly) {
  Outcome outcome = run_fornace(run("--prompt-ids 1,2,3 --max-new-tokens 0 --json"));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_NE(outcome.out.find("\"generated_ids\":[]"), std::string::npos) << outcome.out;
}

TEST_F(FornaceCli, TraceShowsPhasesStepsAndOps) {
  Outcome outcome = run_fornace(run("--prompt-ids 1,2,3,4 --max-new-tokens 4 --kv-cache cat --trace"));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  for (const char* fragment : {"tensor memory by phase", "prefill", "decode", "per decode step",
                               "strided", "ops that allocated most in prefill",
                               "trace: kernels: isa ",
                               "trace: activations for quantized weights: int8\n"}) {
    EXPECT_NE(outcome.err.find(fragment), std::string::npos) << fragment;
  }
}

TEST_F(FornaceCli, TraceTimesEachOpWithinItsPhase) {
  Outcome outcome = run_fornace(
      run("--prompt-ids 1,2,3,4,5 --max-new-tokens 6 --ignore-eos --trace --json --quiet"));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_NE(outcome.err.find("trace: time by op"), std::string::npos) << outcome.err;
  nlohmann::json summary = nlohmann::json::parse(
      outcome.out.substr(outcome.out.rfind('\n', outcome.out.size() - 2) + 1));
  const int64_t layers = nlohmann::json::parse(slurp(model + "/config.json"))["num_hidden_layers"];
  double op_ms[2] = {0, 0};
  int64_t decode_linear_calls = 0;
  for (const nlohmann::json& op : summary["trace"]["op_times"]) {
    const bool decode = op["phase"] == "decode";
    ASSERT_TRUE(decode || op["phase"] == "prefill") << op;
    EXPECT_GE(op["ms"].get<double>(), 0.0) << op;
    op_ms[decode] += op["ms"].get<double>();
    if (decode && op["op"] == "linear") decode_linear_calls = op["calls"];
  }
  double steps_ms = 0;
  for (const nlohmann::json& step : summary["decode_step_ms"]) steps_ms += step.get<double>();
  // Ops run inside their phase's wall time.
  EXPECT_GT(op_ms[0], 0.0);
  EXPECT_LE(op_ms[0], summary["prefill_ms"].get<double>());
  EXPECT_GT(op_ms[1], 0.0);
  EXPECT_LE(op_ms[1], steps_ms);
  // Per step and layer: q/k/v as one group, o_proj, gate/up as one group, down_proj; then the
  // head. A linear inside another op would not count again.
  EXPECT_EQ(decode_linear_calls, 5 * (4 * layers + 1));
}

TEST_F(FornaceCli, TraceAndJsonNameTheActivationRounding) {
  Outcome outcome =
      run_fornace(run("--prompt-ids 1,2 --max-new-tokens 1 --activations int8x2 --trace --json"));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_NE(outcome.err.find("trace: activations for quantized weights: int8x2\n"),
            std::string::npos)
      << outcome.err;
  EXPECT_NE(outcome.out.find("\"activations\":\"int8x2\""), std::string::npos) << outcome.out;
}

TEST_F(FornaceCli, DumpLogitsWritesOneRowPerForwardPass) {
  std::string path = fornace::test_paths::build("cli-logits.npy");
  Outcome outcome = run_fornace(run("--prompt-ids 5,6 --max-new-tokens 3 --quiet --dump-logits " + path));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  std::string bytes = slurp(path);
  ASSERT_GT(bytes.size(), 128u);
  EXPECT_EQ(bytes.substr(1, 5), "NUMPY");
  EXPECT_NE(bytes.find("'shape': (3, 151936)"), std::string::npos);
  EXPECT_EQ(bytes.size() - (bytes.find('\n') + 1), 3u * 151936u * 4u);
  std::remove(path.c_str());
}

TEST_F(FornaceCli, ChatWrapsThePromptInChatML) {
  Outcome chat = run_fornace(run("--chat --system 'Be brief.' --prompt 'Hi there' --max-new-tokens 1 --json"));
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  nlohmann::json summary = nlohmann::json::parse(chat.out.substr(chat.out.rfind('{')));
  // The prompt must be exactly the ChatML text, as `fornace tokenize` encodes it.
  std::string template_text =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
      "<|im_start|>assistant\n";
  std::string json_line = nlohmann::json(template_text).dump();
  std::string path = fornace::test_paths::build("cli-chat.jsonl");
  std::ofstream(path) << json_line << "\n";
  std::string command = fornace::test_paths::build("bin/fornace") + " tokenize --model " + model +
                        " < " + path + " > " + path + ".ids";
  ASSERT_EQ(std::system(command.c_str()), 0);
  nlohmann::json ids = nlohmann::json::parse(slurp(path + ".ids"));
  EXPECT_EQ(summary["prompt_tokens"], ids.size());
  EXPECT_EQ(ids.front(), 151644);  // <|im_start|>
  std::remove(path.c_str());
  std::remove((path + ".ids").c_str());
}

// Each cache type generates; the trace gives its bytes per position: 2 layers x K and V x 2 kv
// heads x a row of 32 values (128 bytes f32, 64 f16 or bf16, Q8_0's 34 and Q4_0's 18 padded to
// whole 32-bit words: 36 and 20).
TEST_F(FornaceCli, EachCacheTypeGeneratesAndTheTraceGivesItsBytesPerPosition) {
  const std::string qwen3 = synthetic_model_directory("tiny-qwen3", DType::f32);
  for (const auto& [type, row_bytes] : std::vector<std::pair<std::string, int>>{
           {"f32", 128}, {"f16", 64}, {"bf16", 64}, {"q8_0", 36}, {"q4_0", 20}}) {
    Outcome outcome = run_fornace("--model " + qwen3 +
                                  " --prompt-ids 1,2,3 --max-new-tokens 3 --ignore-eos "
                                  "--max-context 10 --trace --json --quiet --cache-type " +
                                  type);
    ASSERT_EQ(outcome.exit_code, 0) << type << outcome.err;
    nlohmann::json summary = nlohmann::json::parse(outcome.out);
    EXPECT_EQ(summary["cache_type"], type);
    EXPECT_EQ(summary["generated_ids"].size(), 3u) << type;
    const int per_position = 2 * 2 * 2 * row_bytes;
    std::string expected = "trace: kv cache " + type + ": " + std::to_string(per_position) +
                           " bytes of K+V per position (2 layers), " +
                           std::to_string(10 * per_position) + " bytes";
    EXPECT_NE(outcome.err.find(expected), std::string::npos) << expected << "\n" << outcome.err;
  }
}

TEST_F(FornaceCli, BadCacheTypesAreOneErrorLine) {
  expect_error(run_fornace(run("--prompt-ids 1 --cache-type q3_k")), 2,
               "unknown KV cache type 'q3_k' (expected f32, f16, bf16, q8_0 or q4_0)");
  expect_error(run_fornace(run("--prompt-ids 1 --cache-type q8_0 --kv-cache cat")), 1,
               "--cache-type q8_0 needs --kv-cache prealloc");
  expect_error(run_fornace(run("--prompt-ids 1 --cache-type q4_0 --kv-cache cat-contiguous")), 1,
               "needs --kv-cache prealloc");
  // The tiny Qwen2 model's head_dim is 16: no whole blocks of 32.
  expect_error(run_fornace(run("--prompt-ids 1 --cache-type q4_0")), 1,
               "a q4_0 KV cache needs a head_dim that is a multiple of 32");
  expect_error(run_fornace("--model " + synthetic_model_directory("tiny-qwen3", DType::f32) +
                           " --prompt-ids 1 --cache-type q8_0 --attention candle"),
               1, "needs the fused attention path");
}

TEST_F(FornaceCli, UnknownKvCacheKindIsAUsageError) {
  expect_error(run_fornace(run("--prompt hi --kv-cache paged")), 2, "unknown KV cache kind 'paged'");
}

TEST_F(FornaceCli, MalformedFlagValueIsAUsageError) {
  expect_error(run_fornace(run("--prompt hi --max-new-tokens ten")), 2, "--max-new-tokens");
  expect_error(run_fornace(run("--prompt hi --temperature -1")), 2, "--temperature");
  expect_error(run_fornace(run("--prompt hi --top-p 1.5")), 2, "--top-p");
  expect_error(run_fornace(run("--prompt hi --activations int4")), 2,
               "--activations: expects int8, int8x2 or f32, got 'int4'");
}

TEST_F(FornaceCli, NegativeMaxNewTokensIsAUsageError) {
  expect_error(run_fornace(run("--prompt hi --max-new-tokens -1")), 2, "--max-new-tokens");
}

TEST_F(FornaceCli, TwoPromptOptionsAreAUsageError) {
  expect_error(run_fornace(run("--prompt hi --prompt-ids 1,2")), 2, "only one of");
}

TEST_F(FornaceCli, EmptyPromptIsRejected) {
  expect_error(run_fornace(run("--prompt ''")), 2, "empty");
  std::string path = fornace::test_paths::build("cli-empty-prompt.txt");
  std::ofstream(path).close();
  expect_error(run_fornace(run("--prompt-file " + path)), 1, "empty");
  std::remove(path.c_str());
}

TEST_F(FornaceCli, MissingModelDirectoryOrFilesAreRuntimeErrors) {
  expect_error(run_fornace("--model /nonexistent/model --prompt hi"), 1, "/nonexistent/model");
  // Neither a directory nor a regular file: refused before anything opens it.
  std::string fifo = fornace::test_paths::build("cli-fifo-model");
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_error(run_fornace("--model " + fifo + " --prompt hi"), 1,
               "neither a checkpoint directory nor a GGUF file");
  std::remove(fifo.c_str());
  std::string empty = fornace::test_paths::build("cli-empty-model");
  std::filesystem::create_directories(empty);
  expect_error(run_fornace("--model " + empty + " --prompt-ids 1"), 1, "config.json");
}

TEST_F(FornaceCli, MissingPromptFileIsARuntimeError) {
  expect_error(run_fornace(run("--prompt-file /nonexistent/prompt.txt")), 1, "/nonexistent/prompt.txt");
}

TEST_F(FornaceCli, PromptBeyondTheContextIsRejected) {
  expect_error(run_fornace(run("--prompt-ids 1,2,3 --max-new-tokens 10 --max-context 8")), 1,
               "exceed the context of 8");
  // The tiny preset has max_position_embeddings 4096.
  expect_error(run_fornace(run("--prompt-ids 1,2,3 --max-new-tokens 5000")), 1,
               "max_position_embeddings");
}

TEST_F(FornaceCli, MaxContextTooLargeForMemoryIsRefusedBeforeAllocating) {
  expect_error(run_fornace(run("--prompt-ids 1 --max-context 100000000000")), 1, "bytes");
}

TEST_F(FornaceCli, PromptIdsOutOfTheVocabularyAreRejected) {
  expect_error(run_fornace(run("--prompt-ids 1,151936")), 1, "out of the vocabulary");
}

TEST_F(FornaceCli, HelpDocumentsEveryFlag) {
  Outcome outcome = run_fornace("--help");
  EXPECT_EQ(outcome.exit_code, 0);
  for (const char* flag :
       {"--model", "--prompt", "--prompt-file", "--prompt-ids", "--chat", "--system",
        "--max-new-tokens", "--ignore-eos", "--kv-cache", "--dtype", "--threads", "--temperature",
        "--top-k", "--top-p", "--min-p", "--seed", "--repeat-penalty", "--repeat-last-n",
        "--max-context", "--trace", "--json", "--dump-logits", "--quiet"}) {
    EXPECT_NE(outcome.out.find(std::string("  ") + flag + " "), std::string::npos) << flag;
  }
}

TEST_F(FornaceCli, NoArgumentsIsAUsageError) {
  expect_error(run_fornace(""), 2, "--model is required");
}

TEST_F(FornaceCli, SubcommandsWithoutArgumentsAreUsageErrors) {
  expect_error(run_fornace("synth"), 2, "--preset is required");
  expect_error(run_fornace("tokenize"), 2, "--model is required");
  expect_error(run_fornace("quantize"), 2, "--type is required");
  expect_error(run_fornace("serve"), 2, "--model is required");
}

TEST_F(FornaceCli, QuantizeRefusesAnUnknownTypeAndAMissingModel) {
  expect_error(run_fornace("quantize --type q3_k --model x --out y.gguf"), 2,
               "--type must be one of f32|bf16|q8_0|q4_0|q4_k_m|q5_k_m|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k, got 'q3_k'");
  std::string out = fornace::test_paths::build("quantize-missing.gguf");
  expect_error(run_fornace("quantize --type q8_0 --model /nonexistent/model --out " + out), 1,
               "/nonexistent/model");
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST_F(FornaceCli, AGgufThatIsNotOneIsOneErrorLine) {
  std::string path = fornace::test_paths::build("not-a-model.gguf");
  std::ofstream(path) << "GGUF but not really";
  expect_error(run_fornace("--model " + path + " --prompt-ids 1,2"), 1, "not-a-model.gguf");
}

TEST_F(FornaceCli, HelpOfEachCommandGoesToStdoutWithExitCodeZero) {
  for (const char* command : {"--help", "synth --help", "tokenize --help", "quantize --help", "serve --help", "-h"}) {
    Outcome outcome = run_fornace(command);
    EXPECT_EQ(outcome.exit_code, 0) << command;
    EXPECT_EQ(outcome.err, "") << command;
    EXPECT_EQ(outcome.out.rfind("usage: fornace", 0), 0u) << outcome.out;
  }
}

TEST_F(FornaceCli, HelpGivesTheDefaults) {
  std::string help = run_fornace("--help").out;
  for (const char* text :
       {"--max-new-tokens N", "(default: 128)", "(default: prealloc)", "(default: 1.1)",
        "(default: 299792458)", "(default: as stored)", "checkpoint directory or GGUF file (required)"}) {
    EXPECT_NE(help.find(text), std::string::npos) << text;
  }
}

TEST_F(FornaceCli, FlagsTakeTheirValuesAfterAnEqualsSign) {
  Outcome outcome = run_fornace("--model=" + model +
                                " --prompt-ids=1,2 --max-new-tokens=2 --kv-cache=cat --json");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  nlohmann::json summary = nlohmann::json::parse(outcome.out.substr(outcome.out.rfind('{')));
  EXPECT_EQ(summary["kv_cache"], "cat");
  EXPECT_EQ(summary["generated_ids"].size(), 2u);
}

TEST_F(FornaceCli, OutOfRangeValuesNameTheFlagAndTheRange) {
  expect_error(run_fornace(run("--prompt hi --threads 0")), 2,
               "--threads: expects an integer in [1, 1024], got '0'");
  expect_error(run_fornace(run("--prompt hi --top-p=0")), 2,
               "--top-p: expects a number in (0, 1], got '0'");
  expect_error(run_fornace(run("--prompt hi --min-p 1")), 2, "--min-p: expects a number in [0, 1)");
  expect_error(run_fornace(run("--prompt-ids 1,x")), 2, "--prompt-ids");
  expect_error(run_fornace(run("--prompt hi --dtype q8")), 2, "--dtype: expects bf16, f32 or f16");
}

TEST_F(FornaceCli, MalformedFlagsAreUsageErrors) {
  expect_error(run_fornace(run("--prompt hi --bogus 3")), 2, "unknown argument '--bogus'");
  expect_error(run_fornace(run("--prompt hi stray")), 2, "unknown argument 'stray'");
  expect_error(run_fornace(run("--prompt hi --json=yes")), 2, "--json takes no value");
  expect_error(run_fornace(run("--prompt")), 2, "--prompt needs a value");
  expect_error(run_fornace(run("--prompt a --prompt b")), 2, "--prompt is given more than once");
}

TEST_F(FornaceCli, IntegersAreDecimal) {
  auto sampled_ids = [&](const std::string& seed) {
    Outcome outcome = run_fornace(
        run("--prompt-ids 1,2 --max-new-tokens 4 --temperature 1 --json --quiet --seed " + seed));
    EXPECT_EQ(outcome.exit_code, 0) << outcome.err;
    return nlohmann::json::parse(outcome.out.substr(outcome.out.rfind('{')))["generated_ids"];
  };
  ASSERT_NE(sampled_ids("10"), sampled_ids("8"));    // The seed matters.
  EXPECT_EQ(sampled_ids("010"), sampled_ids("10"));  // Ten, not octal eight.
}

TEST_F(FornaceCli, SummaryMeanSaysHowManyStepsItCovers) {
  // 6 new tokens: the first from the prefill, then 5 decode steps, fewer than 64.
  Outcome outcome = run_fornace(run("--prompt-ids 1,2,3 --max-new-tokens 6 --ignore-eos --json"));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_NE(outcome.err.find(" ms over the last 5 steps\n"), std::string::npos) << outcome.err;
  nlohmann::json summary = nlohmann::json::parse(outcome.out.substr(outcome.out.rfind('{')));
  EXPECT_EQ(summary["mean_steps"], 5);
  double total = 0;
  for (double ms : summary["decode_step_ms"]) total += ms;
  EXPECT_NEAR(summary["mean_ms_last64"].get<double>(), total / 5, 1e-9);
}

TEST_F(FornaceCli, SummaryWithoutDecodeStepsSaysSo) {
  Outcome outcome = run_fornace(run("--prompt-ids 1,2,3 --max-new-tokens 1"));
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_NE(outcome.err.find("decode: 1 tokens, 0.00 tok/s, no decode steps\n"), std::string::npos)
      << outcome.err;
}

}  // namespace
}  // namespace fornace
