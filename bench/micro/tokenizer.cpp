// Tokenizer speed: load time of the Qwen and Gemma 3 tokenizers (from tokenizer.json, and from
// the GGUF vocabulary written from it), and encode throughput over the whole alice corpus on one
// thread (Qwen with the piece cache warm and cold, and Gemma 3).
//   build/bin/micro-tokenizer --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
// scripts/get-tokenizer.sh fetches both (Gemma 3's, 33 MB, into models/tokenizers/gemma3/);
// $FORNACE_GEMMA3_TOKENIZER names another copy. Benchmarks whose file is missing are skipped with
// a message.
#include "text/tokenizer.h"

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/source_paths.h"
#include "core/error.h"
#include "text/gguf_vocabulary.h"

namespace {

const std::string model_directory = fornace::test_paths::source("models");

std::string read_whole_file(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  std::stringstream contents;
  contents << stream.rdbuf();
  return contents.str();
}

const std::string& alice_corpus() {
  static const std::string corpus =
      read_whole_file(fornace::test_paths::source("tests/data/alice.txt"));
  return corpus;
}

// Skips the benchmark with a message unless `path` exists; returns whether it does.
bool require_file(benchmark::State& state, const std::string& path, const char* how_to_get_it) {
  if (std::filesystem::exists(path)) return true;
  state.SkipWithError((path + " is missing: " + how_to_get_it).c_str());
  return false;
}

bool require_qwen(benchmark::State& state) {
  return require_file(state, model_directory + "/tokenizer.json", "run scripts/get-tokenizer.sh");
}

std::string gemma3_path() {
  const char* path = std::getenv("FORNACE_GEMMA3_TOKENIZER");
  return path ? path : model_directory + "/tokenizers/gemma3/tokenizer.json";
}

bool require_gemma3(benchmark::State& state) {
  return require_file(state, gemma3_path(), "run scripts/get-tokenizer.sh");
}

double process_cpu_seconds() {
  timespec now;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Run as a child (FORNACE_MICRO_LOAD_ONCE names a tokenizer directory), this program loads that
// tokenizer once, prints the wall and CPU seconds it took and exits before benchmark's main.
const bool load_once_child = [] {
  const char* directory = std::getenv("FORNACE_MICRO_LOAD_ONCE");
  if (directory == nullptr) return false;
  auto wall_start = std::chrono::steady_clock::now();
  double cpu_start = process_cpu_seconds();
  size_t size = fornace::Tokenizer::load(directory).vocab_size();
  double cpu = process_cpu_seconds() - cpu_start;
  std::chrono::duration<double> wall = std::chrono::steady_clock::now() - wall_start;
  std::printf("%.9f %.9f %zu\n", wall.count(), cpu, size);
  std::fflush(stdout);
  std::_Exit(0);
}();

void TokenizerLoad(benchmark::State& state) {
  if (!require_qwen(state)) return;
  for (auto _ : state) {
    fornace::Tokenizer tokenizer = fornace::Tokenizer::load(model_directory);
    benchmark::DoNotOptimize(tokenizer.vocab_size());
  }
}
BENCHMARK(TokenizerLoad)->Unit(benchmark::kMillisecond);

// The whole Gemma 3 load (262k tokens, 515k merges, SentencePiece-style BPE): Tokenizer::load of
// its directory, reading tokenizer.json (33 MB) and tokenizer_config.json as fornace does.
void TokenizerLoadGemma3(benchmark::State& state) {
  if (!require_gemma3(state)) return;
  const std::string directory = std::filesystem::path(gemma3_path()).parent_path();
  for (auto _ : state) benchmark::DoNotOptimize(fornace::Tokenizer::load(directory).vocab_size());
}
BENCHMARK(TokenizerLoadGemma3)->Unit(benchmark::kMillisecond);

// Building the tokenizer from the GGUF vocabulary (tokenizer.ggml.* values already in memory, as
// the GGUF reader gives them) that llama.cpp's converter writes for the same tokenizer.json: for
// Gemma 3 (model llama) this includes finding every split of each token, SentencePiece's merges.
void TokenizerFromGgufVocabulary(benchmark::State& state, const std::string& directory) {
  if (!require_file(state, directory + "/tokenizer.json", "run scripts/get-tokenizer.sh")) return;
  const fornace::text::GgufVocabulary vocabulary = fornace::text::load_gguf_vocabulary(directory);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        fornace::Tokenizer::from_gguf_vocabulary(vocabulary, directory).vocab_size());
  }
}
BENCHMARK_CAPTURE(TokenizerFromGgufVocabulary, Qwen, model_directory)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(TokenizerFromGgufVocabulary, Gemma3,
                  std::filesystem::path(gemma3_path()).parent_path().string())
    ->Unit(benchmark::kMillisecond);

// The same load as fornace does it, once in a fresh process (a child run of this program), where
// every allocation is new memory: its wall time is the benchmark's time (the CPU column is the
// parent's waiting), the child's CPU time the counter child_cpu_ms.
void TokenizerLoadGemma3FreshProcess(benchmark::State& state) {
  if (!require_gemma3(state)) return;
  const std::string directory = std::filesystem::path(gemma3_path()).parent_path();
  const std::string program = std::filesystem::read_symlink("/proc/self/exe");
  const std::string command =
      "FORNACE_MICRO_LOAD_ONCE='" + directory + "' '" + program + "' </dev/null";
  double child_cpu = 0;
  for (auto _ : state) {
    FILE* child = ::popen(command.c_str(), "r");
    double wall = 0, cpu = 0;
    size_t size = 0;
    bool read = child != nullptr && std::fscanf(child, "%lf %lf %zu", &wall, &cpu, &size) == 3;
    if (child != nullptr) ::pclose(child);
    if (!read || size == 0) {
      state.SkipWithError(("the child run failed: " + command).c_str());
      return;
    }
    state.SetIterationTime(wall);
    child_cpu += cpu;
  }
  state.counters["child_cpu_ms"] =
      benchmark::Counter(child_cpu * 1e3 / static_cast<double>(state.iterations()));
}
BENCHMARK(TokenizerLoadGemma3FreshProcess)->UseManualTime()->Unit(benchmark::kMillisecond);

// The loader's walk over Gemma 3's vocab (262k entries) and merges (515k pairs), as the file has
// them (pretty-printed): the file's "model" member alone, written to a temporary directory, so
// that Tokenizer::load reads all of it and then stops at the first check after the walk (no
// pre_tokenizer). What is timed is reading the file, the JSON, storing
// the vocab and the merge texts, and that one throw.
void TokenizerParseGemma3VocabAndMerges(benchmark::State& state) {
  if (!require_gemma3(state)) return;
  std::string json = read_whole_file(gemma3_path());
  size_t model = json.rfind("\"model\": {");
  if (model == std::string::npos) {
    state.SkipWithError("Gemma 3's tokenizer.json does not have the expected model member");
    return;
  }
  const std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("fornace-micro-gemma3-" + std::to_string(getpid()));
  std::filesystem::create_directories(directory);
  std::ofstream(directory / "tokenizer.json", std::ios::binary) << "{" << json.substr(model);
  const auto walk_error = [&] {
    try {
      fornace::Tokenizer::load(directory);
    } catch (const fornace::Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  std::string message = walk_error();
  const std::string expected = ": pre_tokenizer: missing";
  if (!message.ends_with(expected)) {
    state.SkipWithError(("the walk did not reach its end: " + message).c_str());
  } else {
    for (auto _ : state) benchmark::DoNotOptimize(walk_error().size());
    state.SetBytesProcessed(static_cast<int64_t>(
        state.iterations() * std::filesystem::file_size(directory / "tokenizer.json")));
  }
  std::filesystem::remove_all(directory);
}
BENCHMARK(TokenizerParseGemma3VocabAndMerges)->Unit(benchmark::kMillisecond);

void EncodeAliceWarmCache(benchmark::State& state) {
  if (!require_qwen(state)) return;
  const std::string& corpus = alice_corpus();
  fornace::Tokenizer tokenizer = fornace::Tokenizer::load(model_directory);
  size_t tokens = tokenizer.encode(corpus).size();  // Fills the piece cache.
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer.encode(corpus).data());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}
BENCHMARK(EncodeAliceWarmCache)->Unit(benchmark::kMillisecond);

void EncodeAliceColdCache(benchmark::State& state) {
  if (!require_qwen(state)) return;
  const std::string& corpus = alice_corpus();
  for (auto _ : state) {
    state.PauseTiming();
    fornace::Tokenizer tokenizer = fornace::Tokenizer::load(model_directory);
    state.ResumeTiming();
    benchmark::DoNotOptimize(tokenizer.encode(corpus).data());
    state.PauseTiming();  // The tokenizer's destruction is not encoding.
    { fornace::Tokenizer discarded = std::move(tokenizer); }
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus.size()));
}
BENCHMARK(EncodeAliceColdCache)->Unit(benchmark::kMillisecond);

// Gemma 3 encodes the text between added tokens as one piece (its pre-tokenizer splits at spaces,
// which its normalizer has already replaced), so the piece cache never holds it.
void EncodeAliceGemma3(benchmark::State& state) {
  if (!require_gemma3(state)) return;
  const std::string& corpus = alice_corpus();
  fornace::Tokenizer tokenizer =
      fornace::Tokenizer::load(std::filesystem::path(gemma3_path()).parent_path());
  size_t tokens = tokenizer.encode(corpus).size();
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer.encode(corpus).data());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}
BENCHMARK(EncodeAliceGemma3)->Unit(benchmark::kMillisecond);

void DecodeAlice(benchmark::State& state) {
  if (!require_qwen(state)) return;
  const std::string& corpus = alice_corpus();
  fornace::Tokenizer tokenizer = fornace::Tokenizer::load(model_directory);
  std::vector<uint32_t> ids = tokenizer.encode(corpus);
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer.decode(ids).data());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus.size()));
}
BENCHMARK(DecodeAlice)->Unit(benchmark::kMillisecond);

}  // namespace
