// The grammar constraint in the sampler on the Qwen vocabulary: random logits, and logits that
// push toward the longest tokens, still give JSON that parses, fits the schema and ends within
// max_tokens; after the JSON only the end-of-sequence ids are allowed.
#include "engine/grammar_constraint.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "engine/sampler.h"
#include "text/json_schema.h"
#include "text/tokenizer_fixture.h"

namespace fornace {
namespace {

const std::shared_ptr<const text::TokenTrie>& qwen_trie() {
  static const auto trie = std::make_shared<const text::TokenTrie>(
      text::TokenTrie::from_tokenizer(testing::qwen_tokenizer()));
  return trie;
}

std::shared_ptr<const text::Grammar> schema_grammar(const char* schema) {
  return std::make_shared<const text::Grammar>(
      text::compile_json_schema(nlohmann::ordered_json::parse(schema)));
}

const char* const kPerson = R"({"type":"object","properties":{"name":{"type":"string"},
    "age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},
    "required":["name","age"]})";

struct Generated {
  std::string text;
  bool ended = false;  // An end-of-sequence id was picked.
  int64_t tokens = 0;
};

// Samples up to `max_tokens` ids under the constraint; `logits_for` fills each step's logits.
template <typename Fill>
Generated generate(std::shared_ptr<const text::Grammar> grammar, int64_t max_tokens,
                   Fill&& logits_for, double temperature) {
  const uint32_t eos = *testing::qwen_tokenizer().token_to_id("<|im_end|>");
  SamplerOptions options;
  options.temperature = temperature;
  options.repeat_penalty = 1.0;
  options.seed = 7;
  options.constraint = std::make_shared<GrammarConstraint>(grammar, qwen_trie(),
                                                           std::vector<uint32_t>{eos}, max_tokens);
  Sampler sampler(options);
  Generated generated;
  std::vector<float> logits(151936);
  std::vector<uint32_t> history = {0};
  for (; generated.tokens < max_tokens; ++generated.tokens) {
    logits_for(logits);
    const uint32_t id = sampler.sample(logits, history, 1);
    history.push_back(id);
    if (id == eos) {
      generated.ended = true;
      break;
    }
    EXPECT_FALSE(testing::qwen_tokenizer().is_special(id)) << id;
    generated.text += qwen_trie()->token_bytes(id);
  }
  return generated;
}

void expect_person(const std::string& text) {
  nlohmann::json value;
  ASSERT_NO_THROW(value = nlohmann::json::parse(text)) << text;
  ASSERT_TRUE(value.is_object()) << text;
  EXPECT_TRUE(value["name"].is_string()) << text;
  EXPECT_TRUE(value["age"].is_number_integer()) << text;
  for (const auto& [key, item] : value.items()) {
    EXPECT_TRUE(key == "name" || key == "age" || key == "tags") << text;
  }
  if (value.contains("tags")) {
    EXPECT_TRUE(value["tags"].is_array() && value["tags"].size() <= 3) << text;
  }
}

TEST(GrammarConstraint, RandomLogitsGiveJsonThatFitsTheSchema) {
  const auto grammar = schema_grammar(kPerson);
  std::mt19937 random(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  // Each step's logits: one random vector read from a random offset.
  std::vector<float> base(151936);
  for (float& logit : base) logit = normal(random);
  int ended = 0;
  for (int run = 0; run < 4; ++run) {
    Generated generated = generate(
        grammar, 300,
        [&](std::vector<float>& logits) {
          const size_t offset = random() % base.size();
          for (size_t id = 0; id < logits.size(); ++id) {
            logits[id] = base[(id + offset) % base.size()];
          }
        },
        1.0);
    expect_person(generated.text);
    ended += generated.ended;
  }
  EXPECT_GT(ended, 0);
}

TEST(GrammarConstraint, ShortBudgetsStillCloseTheJson) {
  const auto grammar = schema_grammar(kPerson);
  // The shortest instance, {"name":"","age":0}, is 19 bytes: budgets from there up.
  for (int64_t max_tokens : {19, 20, 25, 40}) {
    // Greedy on logits that favour long tokens, which a budget must stop in time.
    Generated generated = generate(
        grammar, max_tokens,
        [&](std::vector<float>& logits) {
          for (uint32_t id = 0; id < logits.size(); ++id) {
            logits[id] = id < qwen_trie()->vocab_size()
                             ? static_cast<float>(qwen_trie()->token_bytes(id).size())
                             : 0.0f;
          }
        },
        0.0);
    expect_person(generated.text);
    EXPECT_LE(generated.tokens, max_tokens);
  }
}

TEST(GrammarConstraint, OnlyEndOfSequenceAfterTheJson) {
  const auto grammar = std::make_shared<const text::Grammar>(text::json_object_grammar());
  const uint32_t eos = *testing::qwen_tokenizer().token_to_id("<|im_end|>");
  auto progress = GrammarConstraint(grammar, qwen_trie(), {eos}, 100).start_progress();
  for (uint32_t id : testing::qwen_tokenizer().encode("{\"a\": [1, 2]}")) progress->accept(id);
  ASSERT_TRUE(progress->complete());
  std::vector<float> logits(151936, 0.0f);
  progress->mask(logits);
  for (uint32_t id = 0; id < logits.size(); ++id) {
    ASSERT_EQ(logits[id] == 0.0f, id == eos) << id;
  }
}

}  // namespace
}  // namespace fornace
