// Structured outputs' cost per decode step on the Qwen vocabulary (151,936 logits): the token
// trie build, one uncached mask walk (inside a string, where nearly every token is allowed), and
// whole replays of a JSON text token by token (mask the logits, accept the id), for json_object
// and for a schema, each from a fresh constraint so that every new state's walk is counted.
//   build/bin/micro-structured-output --benchmark_repetitions=10 \
//     --benchmark_report_aggregates_only=true
// scripts/get-tokenizer.sh puts the Qwen tokenizer in models/.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/source_paths.h"
#include "engine/grammar_constraint.h"
#include "range_statistics.h"
#include "text/json_schema.h"
#include "text/token_trie.h"
#include "text/tokenizer.h"

namespace {

using namespace fornace;

constexpr size_t kQwenLogits = 151936;

const std::string tokenizer_directory = fornace::test_paths::source("models");

// Milliseconds, and the smallest and largest repetition beside the median.
void in_milliseconds_with_range(benchmark::internal::Benchmark* benchmark) {
  benchmark->Unit(benchmark::kMillisecond)
      ->ComputeStatistics("min", fornace::micro::minimum)
      ->ComputeStatistics("max", fornace::micro::maximum);
}

bool require_qwen(benchmark::State& state) {
  if (std::filesystem::exists(tokenizer_directory + "/tokenizer.json")) return true;
  state.SkipWithError("models/tokenizer.json is missing: run scripts/get-tokenizer.sh");
  return false;
}

const Tokenizer& qwen() {
  static const Tokenizer tokenizer = Tokenizer::load(tokenizer_directory);
  return tokenizer;
}

std::shared_ptr<const text::TokenTrie> qwen_trie() {
  static const auto trie =
      std::make_shared<const text::TokenTrie>(text::TokenTrie::from_tokenizer(qwen()));
  return trie;
}

// A schema and a text that fits it, with strings, numbers, nesting and an array.
const char* const kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},"age":{"type":"integer"},"email":{"type":["string","null"]},
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
    "zip":{"type":"string"}},"required":["street","city"]},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":8},
  "score":{"type":"number"},"active":{"type":"boolean"}},
  "required":["name","age","address","tags","active"]})";

const char* const kText =
    R"({"name": "Ada Lovelace, Countess of Lovelace, mathematician and writer", "age": 36, )"
    R"("email": null, "address": {"street": "12 St James's Square", "city": "London", )"
    R"("zip": "SW1Y 4JH"}, "tags": ["analytical engine", "notes", "Bernoulli numbers", )"
    R"("poetical science"], "score": 98.5, "active": true})";

// Masks and accepts every id of `text` from a fresh constraint each iteration; the time per
// iteration divided by the ids (items_per_second: steps per second) is the cost of one step.
void replay(benchmark::State& state, std::shared_ptr<const text::Grammar> grammar) {
  if (!require_qwen(state)) return;
  const std::vector<uint32_t> ids = qwen().encode(kText);
  const std::vector<uint32_t> eos = {*qwen().token_to_id("<|im_end|>")};
  std::vector<float> logits(kQwenLogits);
  for (auto _ : state) {
    auto progress = GrammarConstraint(grammar, qwen_trie(), eos, 4096).start_progress();
    for (uint32_t id : ids) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      progress->mask(logits);
      if (logits[id] != 0.0f) state.SkipWithError("the text's own id was masked");
      progress->accept(id);
    }
    if (!progress->complete()) state.SkipWithError("the text did not complete the grammar");
  }
  state.counters["steps"] = static_cast<double>(ids.size());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(ids.size()));
}

void BM_TrieBuild(benchmark::State& state) {
  if (!require_qwen(state)) return;
  for (auto _ : state) {
    text::TokenTrie trie = text::TokenTrie::from_tokenizer(qwen());
    benchmark::DoNotOptimize(trie.node_count());
    state.counters["nodes"] = static_cast<double>(trie.node_count());
  }
}
BENCHMARK(BM_TrieBuild)->Apply(in_milliseconds_with_range);

// One walk from a state inside a string value, with a fresh matcher (no transition known yet)
// and with a warm one (transitions known, mask not cached): the first and later visits.
void BM_MaskWalkInString(benchmark::State& state) {
  if (!require_qwen(state)) return;
  const bool warm = state.range(0) != 0;
  const text::Grammar grammar = text::json_object_grammar();
  std::vector<uint64_t> mask;
  text::GrammarMatcher warm_matcher(grammar);
  for (auto _ : state) {
    std::optional<text::GrammarMatcher> fresh;
    text::GrammarMatcher* matcher = &warm_matcher;
    if (!warm) matcher = &fresh.emplace(grammar);
    const int32_t inside = matcher->next(matcher->initial_state(), std::string("{\"key\": \"val"));
    qwen_trie()->allowed(*matcher, inside, text::Grammar::kUnbounded, mask);
    benchmark::DoNotOptimize(mask.data());
  }
}
BENCHMARK(BM_MaskWalkInString)->Arg(0)->Arg(1)->Apply(in_milliseconds_with_range);

void BM_StepsJsonObject(benchmark::State& state) {
  static const auto grammar = std::make_shared<const text::Grammar>(text::json_object_grammar());
  replay(state, grammar);
}
BENCHMARK(BM_StepsJsonObject)->Apply(in_milliseconds_with_range);

void BM_StepsSchema(benchmark::State& state) {
  static const auto grammar = std::make_shared<const text::Grammar>(
      text::compile_json_schema(nlohmann::ordered_json::parse(kSchema)));
  replay(state, grammar);
}
BENCHMARK(BM_StepsSchema)->Apply(in_milliseconds_with_range);

// The floor: filling the logits and applying a mask that allows everything.
void BM_StepsUnconstrainedFill(benchmark::State& state) {
  if (!require_qwen(state)) return;
  const std::vector<uint32_t> ids = qwen().encode(kText);
  std::vector<float> logits(kQwenLogits);
  for (auto _ : state) {
    for (size_t step = 0; step < ids.size(); ++step) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      benchmark::DoNotOptimize(logits.data());
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(ids.size()));
}
BENCHMARK(BM_StepsUnconstrainedFill)->Apply(in_milliseconds_with_range);

}  // namespace
