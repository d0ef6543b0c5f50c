// Tokenizer speed: load time of the Qwen and Gemma 3 tokenizers, and encode throughput over the
// whole alice corpus on one thread (Qwen with the piece cache warm and cold, and Gemma 3).
//   build/bin/micro-tokenizer --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
// scripts/get-tokenizer.sh fetches both (Gemma 3's, 33 MB, into models/tokenizers/gemma3/);
// $FORNACE_GEMMA3_TOKENIZER names another copy. Benchmarks whose file is missing are skipped with
// a message.
#include "text/tokenizer.h"

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace {

const std::string model_directory = FORNACE_SOURCE_DIR "/models";

std::string read_whole_file(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  std::stringstream contents;
  contents << stream.rdbuf();
  return contents.str();
}

const std::string& alice_corpus() {
  static const std::string corpus = read_whole_file(FORNACE_SOURCE_DIR "/tests/data/alice.txt");
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
