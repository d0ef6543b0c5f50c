// Tokenizer speed: load time of the Qwen tokenizer.json, and encode throughput over the whole
// alice corpus on one thread, with the piece cache warm (steady state) and cold (a new tokenizer).
//   build/bin/micro-tokenizer --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
#include "text/tokenizer.h"

#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

namespace {

const std::string model_directory = FORNACE_SOURCE_DIR "/models";

const std::string& alice_corpus() {
  static const std::string corpus = [] {
    std::ifstream stream(FORNACE_SOURCE_DIR "/tests/data/alice.txt", std::ios::binary);
    std::stringstream contents;
    contents << stream.rdbuf();
    return contents.str();
  }();
  return corpus;
}

void TokenizerLoad(benchmark::State& state) {
  for (auto _ : state) {
    fornace::Tokenizer tokenizer = fornace::Tokenizer::load(model_directory);
    benchmark::DoNotOptimize(tokenizer.vocab_size());
  }
}
BENCHMARK(TokenizerLoad)->Unit(benchmark::kMillisecond);

void EncodeAliceWarmCache(benchmark::State& state) {
  const std::string& corpus = alice_corpus();
  fornace::Tokenizer tokenizer = fornace::Tokenizer::load(model_directory);
  size_t tokens = tokenizer.encode(corpus).size();  // Fills the piece cache.
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer.encode(corpus).data());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}
BENCHMARK(EncodeAliceWarmCache)->Unit(benchmark::kMillisecond);

void EncodeAliceColdCache(benchmark::State& state) {
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

void DecodeAlice(benchmark::State& state) {
  const std::string& corpus = alice_corpus();
  fornace::Tokenizer tokenizer = fornace::Tokenizer::load(model_directory);
  std::vector<uint32_t> ids = tokenizer.encode(corpus);
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer.decode(ids).data());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * corpus.size()));
}
BENCHMARK(DecodeAlice)->Unit(benchmark::kMillisecond);

}  // namespace
