// Tokenizers built from GGUF vocabularies: the vocabularies written from the family tokenizers'
// tokenizer.json against the Hugging Face goldens and the tokenizer.json tokenizer, small
// hand-made vocabularies of both models with ids worked out by hand, and the errors.
#include "text/gguf_vocabulary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/tokenizer.h"
#include "tokenizer_fixture.h"

namespace fornace {
namespace {

using testing::GoldenCase;
using testing::source_path;
using text::GgufTokenType;
using text::GgufVocabulary;

// ---- The families, through tokenizer.json -> GgufVocabulary -> Tokenizer ----------------------

struct Family {
  const char* name;
  const char* model;
  const char* pre;
  std::vector<const char*> golden_files;  // Hugging Face's ids; none for Qwen2.5.
};

void PrintTo(const Family& family, std::ostream* stream) { *stream << family.name; }

const std::vector<Family>& families() {
  static const std::vector<Family> all = {
      {"qwen2_5", "gpt2", "qwen2", {}},
      {"qwen3",
       "gpt2",
       "qwen2",
       {"tests/data/tokenizer-golden-qwen3.jsonl", "tests/data/tokenizer-golden.jsonl"}},
      {"llama3", "gpt2", "llama-bpe", {"tests/data/tokenizer-golden-llama3.jsonl"}},
      {"llama3_1", "gpt2", "llama-bpe", {"tests/data/tokenizer-golden-llama3_1.jsonl"}},
      {"gemma3", "llama", "", {"tests/data/tokenizer-golden-gemma3.jsonl"}},
  };
  return all;
}

std::string family_directory(const std::string& family) {
  return source_path("models/tokenizers/" + family);
}

struct FamilyTokenizers {
  GgufVocabulary vocabulary;
  Tokenizer from_gguf;
  Tokenizer from_json;
};

const FamilyTokenizers& family_tokenizers(const std::string& family) {
  static std::map<std::string, FamilyTokenizers> by_family;
  auto found = by_family.find(family);
  if (found == by_family.end()) {
    GgufVocabulary vocabulary = text::load_gguf_vocabulary(family_directory(family));
    Tokenizer from_gguf = Tokenizer::from_gguf_vocabulary(vocabulary, family + " (GGUF)");
    found = by_family
                .emplace(family, FamilyTokenizers{std::move(vocabulary), std::move(from_gguf),
                                                  Tokenizer::load(family_directory(family))})
                .first;
  }
  return found->second;
}

class GgufFamily : public ::testing::TestWithParam<Family> {
 protected:
  const FamilyTokenizers& tokenizers() const { return family_tokenizers(GetParam().name); }
  const Tokenizer& tokenizer() const { return tokenizers().from_gguf; }
};

TEST_P(GgufFamily, WritesTheConvertersModelAndPreTokenizer) {
  const GgufVocabulary& vocabulary = tokenizers().vocabulary;
  EXPECT_EQ(vocabulary.model, GetParam().model);
  EXPECT_EQ(vocabulary.pre, GetParam().pre);
  EXPECT_EQ(vocabulary.tokens.size(), tokenizers().from_json.vocab_size());
  EXPECT_EQ(vocabulary.token_types.size(), vocabulary.tokens.size());
  bool sentencepiece = vocabulary.model == "llama";
  EXPECT_EQ(vocabulary.scores.size(), sentencepiece ? vocabulary.tokens.size() : 0u);
  EXPECT_EQ(vocabulary.merges.empty(), sentencepiece);
  EXPECT_TRUE(vocabulary.chat_template.has_value());
}

TEST_P(GgufFamily, EncodeGivesTheReferenceIdsForEveryGoldenCase) {
  size_t cases = 0, equal = 0;
  for (const char* file : GetParam().golden_files) {
    for (const GoldenCase& golden : testing::cached_golden_cases(file)) {
      std::vector<uint32_t> ids = tokenizer().encode(golden.text);
      ++cases;
      equal += ids == golden.ids;
      if (ids != golden.ids && ids.size() < 200)
        EXPECT_EQ(ids, golden.ids) << file << ", case: " << golden.name;
    }
  }
  EXPECT_EQ(equal, cases) << GetParam().name;
  if (!GetParam().golden_files.empty()) EXPECT_GE(cases, 400u);
}

// Qwen2.5 has no goldens of its own: its tokenizer.json tokenizer (which shares Qwen3's vocabulary
// and merges) gives the ids for Qwen3's golden texts.
TEST_P(GgufFamily, EncodeGivesTheJsonTokenizersIdsForTheGoldenTextsAndTheCorpus) {
  std::vector<std::string> texts;
  for (const char* file :
       {"tests/data/tokenizer-golden-qwen3.jsonl", "tests/data/tokenizer-golden-gemma3.jsonl"}) {
    for (const GoldenCase& golden : testing::cached_golden_cases(file))
      texts.push_back(golden.text);
  }
  std::string corpus = testing::read_test_file(source_path("tests/data/alice.txt"));
  std::istringstream lines(corpus);
  for (std::string line; std::getline(lines, line);) texts.push_back(line);
  size_t equal = 0;
  for (const std::string& text : texts) {
    std::vector<uint32_t> ids = tokenizer().encode(text);
    std::vector<uint32_t> expected = tokenizers().from_json.encode(text);
    equal += ids == expected;
    if (ids != expected && ids.size() < 200) EXPECT_EQ(ids, expected) << "text: " << text;
  }
  EXPECT_EQ(equal, texts.size()) << GetParam().name;
  EXPECT_TRUE(tokenizer().encode(corpus) == tokenizers().from_json.encode(corpus));
}

TEST_P(GgufFamily, DecodeOfEncodeGivesTheReferenceText) {
  size_t cases = 0, equal = 0;
  for (const char* file : GetParam().golden_files) {
    for (const GoldenCase& golden : testing::cached_golden_cases(file)) {
      std::string decoded = tokenizer().decode(tokenizer().encode(golden.text));
      ++cases;
      equal += decoded == golden.decoded;
      EXPECT_EQ(decoded, golden.decoded) << file << ", case: " << golden.name;
    }
  }
  EXPECT_EQ(equal, cases) << GetParam().name;
  std::string corpus = testing::read_test_file(source_path("tests/data/alice.txt"));
  EXPECT_TRUE(tokenizer().decode(tokenizer().encode(corpus)) == corpus);
}

TEST_P(GgufFamily, BosEosAndPrefixFollowTheConfig) {
  const Tokenizer& json = tokenizers().from_json;
  EXPECT_EQ(tokenizer().eos_token_id(), json.eos_token_id());
  const GgufVocabulary& vocabulary = tokenizers().vocabulary;
  // Llama 3's files set no add_bos_token and no template: llama.cpp's default for llama-bpe adds
  // the bos, where the Hugging Face encode does not.
  if (std::string(GetParam().name) == "llama3") {
    EXPECT_FALSE(vocabulary.add_bos_token.has_value());
    EXPECT_EQ(tokenizer().prefix_token_id(), json.token_to_id("<|begin_of_text|>"));
  } else {
    EXPECT_EQ(tokenizer().prefix_token_id(), json.prefix_token_id());
  }
}

TEST_P(GgufFamily, ChatTemplateRendersAsFromTheJson) {
  std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(tokenizer().apply_chat_template(messages, true),
            tokenizers().from_json.apply_chat_template(messages, true));
}

INSTANTIATE_TEST_SUITE_P(Families, GgufFamily, ::testing::ValuesIn(families()),
                         [](const ::testing::TestParamInfo<Family>& info) {
                           return std::string(info.param.name);
                         });

TEST(GgufVocabularyFromJson, GemmaTokensAreTypedAsTheConverterTypesThem) {
  const GgufVocabulary& vocabulary = family_tokenizers("gemma3").vocabulary;
  const Tokenizer& json = family_tokenizers("gemma3").from_json;
  const auto type_of = [&](std::string_view token) {
    std::optional<uint32_t> id = json.token_to_id(token);
    EXPECT_TRUE(id.has_value()) << token;
    return static_cast<GgufTokenType>(vocabulary.token_types[id.value_or(0)]);
  };
  EXPECT_EQ(type_of("<0x41>"), GgufTokenType::byte);
  EXPECT_EQ(type_of("<bos>"), GgufTokenType::control);
  EXPECT_EQ(type_of("<start_of_turn>"), GgufTokenType::control);
  EXPECT_EQ(type_of("<unused0>"), GgufTokenType::control);  // Not special, but looks it.
  EXPECT_EQ(type_of("\n"), GgufTokenType::user_defined);
  EXPECT_EQ(type_of("\u2581the"), GgufTokenType::normal);
  // A user-defined run of "▁" is written with spaces, as llama.cpp matches it in the raw text.
  uint32_t run = *json.token_to_id("\u2581\u2581");
  EXPECT_EQ(vocabulary.tokens[run], "  ");
  EXPECT_EQ(static_cast<GgufTokenType>(vocabulary.token_types[run]), GgufTokenType::user_defined);
  EXPECT_EQ(vocabulary.bos_token_id, json.token_to_id("<bos>"));
  EXPECT_EQ(vocabulary.unknown_token_id, json.token_to_id("<unk>"));
  EXPECT_EQ(vocabulary.padding_token_id, json.token_to_id("<pad>"));
  EXPECT_EQ(vocabulary.add_bos_token, true);
  EXPECT_EQ(vocabulary.add_space_prefix, false);
  // "▁t" merges before "▁the" (its parts come first), so it scores higher.
  EXPECT_GT(vocabulary.scores[*json.token_to_id("\u2581t")],
            vocabulary.scores[*json.token_to_id("\u2581the")]);
}

TEST(GgufVocabularyFromJson, QwenMergesAreTheJsonsInOrderAndItsAddedTokensControl) {
  const GgufVocabulary& vocabulary = family_tokenizers("qwen3").vocabulary;
  const Tokenizer& json = family_tokenizers("qwen3").from_json;
  nlohmann::json file =
      nlohmann::json::parse(testing::read_test_file(family_directory("qwen3") + "/tokenizer.json"));
  const nlohmann::json& merges = file["model"]["merges"];
  ASSERT_EQ(vocabulary.merges.size(), merges.size());
  for (size_t rank : {size_t{0}, size_t{1}, merges.size() / 2, merges.size() - 1}) {
    std::string expected = merges[rank].is_string() ? merges[rank].get<std::string>()
                                                    : merges[rank][0].get<std::string>() + " " +
                                                          merges[rank][1].get<std::string>();
    EXPECT_EQ(vocabulary.merges[rank], expected) << "rank " << rank;
  }
  // <|fim_prefix|> is not special in tokenizer.json; the converter makes it control all the same.
  uint32_t fim = *json.token_to_id("<|fim_prefix|>");
  EXPECT_EQ(static_cast<GgufTokenType>(vocabulary.token_types[fim]), GgufTokenType::control);
  EXPECT_EQ(vocabulary.eos_token_id, json.token_to_id("<|im_end|>"));
  EXPECT_EQ(vocabulary.add_bos_token, false);
  EXPECT_FALSE(vocabulary.bos_token_id.has_value());
}

TEST(GgufVocabularyFromJson, PadsToTheEmbeddingsRowsWithUnusedTokens) {
  std::string json = testing::read_test_file(family_directory("qwen2_5") + "/tokenizer.json");
  GgufVocabulary vocabulary =
      text::gguf_vocabulary_from_tokenizer_json(json, "", "qwen2_5", 151936);
  ASSERT_EQ(vocabulary.tokens.size(), 151936u);
  EXPECT_EQ(vocabulary.tokens[151935], "[PAD151935]");
  EXPECT_EQ(static_cast<GgufTokenType>(vocabulary.token_types[151935]), GgufTokenType::unused);
  EXPECT_FALSE(vocabulary.chat_template.has_value());  // No tokenizer_config.json given.
  Tokenizer tokenizer = Tokenizer::from_gguf_vocabulary(vocabulary, "padded");
  EXPECT_EQ(tokenizer.vocab_size(), 151936u);
  EXPECT_EQ(tokenizer.encode("Hello world"),
            family_tokenizers("qwen2_5").from_json.encode("Hello world"));
}

TEST(GgufVocabularyFromJson, HasExactlyTheEmbeddingsRows) {
  // Gemma 3's tokenizer.json adds <image_soft_token> past the text models' 262144 embedding rows;
  // llama.cpp refuses a file whose token count is not token_embd's row count.
  const uint32_t rows = 262144;
  const Tokenizer& json_tokenizer = family_tokenizers("gemma3").from_json;
  ASSERT_GE(*json_tokenizer.token_to_id("<image_soft_token>"), rows);
  std::string json = testing::read_test_file(family_directory("gemma3") + "/tokenizer.json");
  GgufVocabulary vocabulary = text::gguf_vocabulary_from_tokenizer_json(json, "", "gemma3", rows);
  EXPECT_EQ(vocabulary.tokens.size(), rows);
  EXPECT_EQ(vocabulary.token_types.size(), rows);
  EXPECT_EQ(vocabulary.scores.size(), rows);
  EXPECT_EQ(std::count(vocabulary.tokens.begin(), vocabulary.tokens.end(), "<image_soft_token>"),
            0);
  Tokenizer tokenizer = Tokenizer::from_gguf_vocabulary(vocabulary, "gemma3 (rows)");
  const std::string text = "<start_of_turn>user\nHello world 123<end_of_turn>";
  EXPECT_EQ(tokenizer.encode(text), json_tokenizer.encode(text));
}

// ---- Hand-made vocabularies ----------------------------------------------------------------

// Model gpt2, pre gpt-2: ids 0-255 are the bytes (GPT-2's alphabet), then th=256, the=257,
// Ġc=258, at=259, Ġcat=260, <|end|>=261 (control), <u>=262 (user-defined).
GgufVocabulary tiny_gpt2() {
  GgufVocabulary vocabulary;
  vocabulary.model = "gpt2";
  vocabulary.pre = "gpt-2";
  for (int byte = 0; byte < 256; ++byte)
    vocabulary.tokens.push_back(testing::byte_level_character(byte));
  for (const char* token : {"th", "the", "\u0120c", "at", "\u0120cat", "<|end|>", "<u>"})
    vocabulary.tokens.push_back(token);
  vocabulary.token_types.assign(vocabulary.tokens.size(), 1);
  vocabulary.token_types[261] = 3;
  vocabulary.token_types[262] = 4;
  vocabulary.merges = {"t h", "th e", "\u0120 c", "a t", "\u0120c at"};
  vocabulary.eos_token_id = 261;
  return vocabulary;
}

TEST(GgufGpt2Vocabulary, MergesByRankAndMatchesControlTokensFirst) {
  Tokenizer tokenizer = Tokenizer::from_gguf_vocabulary(tiny_gpt2(), "tiny");
  // "the": t+h (rank 0), th+e (1). " cat": Ġ+c (2) before a+t (3), then Ġc+at (4).
  EXPECT_EQ(tokenizer.encode("the cat<|end|>"), (std::vector<uint32_t>{257, 260, 261}));
  // Unparsed, <|end|> is text: GPT-2's regex makes "<|", "end", "|>", all single bytes.
  EXPECT_EQ(tokenizer.encode("<|end|>", false),
            (std::vector<uint32_t>{'<', '|', 'e', 'n', 'd', '|', '>'}));
  // A user-defined token is matched either way.
  EXPECT_EQ(tokenizer.encode("<u>the", false), (std::vector<uint32_t>{262, 257}));
  EXPECT_EQ(tokenizer.decode({257, 260, 261}), "the cat<|end|>");
  EXPECT_EQ(tokenizer.decode({257, 260, 261}, true), "the cat");
  EXPECT_TRUE(tokenizer.is_special(261));
  EXPECT_FALSE(tokenizer.is_special(262));
  EXPECT_EQ(tokenizer.eos_token_id(), 261u);
}

TEST(GgufGpt2Vocabulary, AddsTheBosAsTheVocabularyOrLlamaCppSays) {
  GgufVocabulary vocabulary = tiny_gpt2();
  vocabulary.bos_token_id = 261;
  EXPECT_FALSE(Tokenizer::from_gguf_vocabulary(vocabulary, "gpt-2").prefix_token_id());
  vocabulary.pre = "llama-bpe";  // llama.cpp adds the bos by default for it.
  EXPECT_EQ(Tokenizer::from_gguf_vocabulary(vocabulary, "llama-bpe").prefix_token_id(), 261u);
  vocabulary.add_bos_token = false;
  EXPECT_FALSE(Tokenizer::from_gguf_vocabulary(vocabulary, "no bos").prefix_token_id());
}

TEST(GgufGpt2Vocabulary, SmollmSplitsDigitsOneByOne) {
  GgufVocabulary vocabulary = tiny_gpt2();
  vocabulary.tokens.push_back("12");
  vocabulary.token_types.push_back(1);
  vocabulary.merges.push_back("1 2");
  EXPECT_EQ(Tokenizer::from_gguf_vocabulary(vocabulary, "gpt-2").encode("12"),
            (std::vector<uint32_t>{263}));
  vocabulary.pre = "smollm";
  EXPECT_EQ(Tokenizer::from_gguf_vocabulary(vocabulary, "smollm").encode("12"),
            (std::vector<uint32_t>{'1', '2'}));
}

// Model llama: 0 <unk> (unknown), 1 <s>, 2 </s> (control), 3 ▁, 4 a, 5 b, 6 c, 7 ab, 8 bc, 9 ▁a,
// 10 <0xC3>, 11 <0xA9> (bytes), 12 "  " (user-defined). bc scores above ab.
GgufVocabulary tiny_sentencepiece() {
  GgufVocabulary vocabulary;
  vocabulary.model = "llama";
  vocabulary.tokens = {"<unk>", "<s>", "</s>",    "\u2581", "a",      "b", "c",
                       "ab",    "bc",  "\u2581a", "<0xC3>", "<0xA9>", "  "};
  vocabulary.token_types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6, 6, 4};
  vocabulary.scores = {0, 0, 0, -1, -1, -1, -1, -3, -2, -4, 0, 0, 0};
  vocabulary.bos_token_id = 1;
  vocabulary.eos_token_id = 2;
  vocabulary.unknown_token_id = 0;
  vocabulary.add_space_prefix = false;
  return vocabulary;
}

TEST(GgufSentencePieceVocabulary, MergesTheHighestScoreFirstNotTheLeftmost) {
  Tokenizer tokenizer = Tokenizer::from_gguf_vocabulary(tiny_sentencepiece(), "tiny");
  // a+b makes ab (-3), b+c makes bc (-2): bc first, then a and bc make no token.
  EXPECT_EQ(tokenizer.encode("abc"), (std::vector<uint32_t>{4, 8}));
  EXPECT_EQ(tokenizer.decode({4, 8}), "abc");
}

TEST(GgufSentencePieceVocabulary, EqualScoresMergeTheLeftmostPairFirst) {
  GgufVocabulary vocabulary = tiny_sentencepiece();
  vocabulary.scores[7] = vocabulary.scores[8] = -2;
  EXPECT_EQ(Tokenizer::from_gguf_vocabulary(vocabulary, "ties").encode("abc"),
            (std::vector<uint32_t>{7, 6}));
}

TEST(GgufSentencePieceVocabulary, SpacesBecomeTheMarkerWithAPrefixWhenAsked) {
  GgufVocabulary vocabulary = tiny_sentencepiece();
  // "b a": "b▁a", where ▁+a makes ▁a.
  EXPECT_EQ(Tokenizer::from_gguf_vocabulary(vocabulary, "tiny").encode("b a"),
            (std::vector<uint32_t>{5, 9}));
  vocabulary.add_space_prefix.reset();  // llama.cpp's default: a space before the text.
  Tokenizer prefixed = Tokenizer::from_gguf_vocabulary(vocabulary, "prefixed");
  EXPECT_EQ(prefixed.encode("a"), (std::vector<uint32_t>{9}));
  // And after each added token, since each text between them is prefixed.
  EXPECT_EQ(prefixed.encode("a</s>a"), (std::vector<uint32_t>{9, 2, 9}));
  // Decoding drops the prefix's space: "▁a▁b" is ▁a, ▁, b.
  std::vector<uint32_t> ids = prefixed.encode("a b");
  EXPECT_EQ(ids, (std::vector<uint32_t>{9, 3, 5}));
  EXPECT_EQ(prefixed.decode(ids), "a b");
  IncrementalDecoder streamed(prefixed, true);
  std::string text;
  for (uint32_t id : std::vector<uint32_t>{1, 9, 3, 5}) text += streamed.push(id);
  EXPECT_EQ(text + streamed.flush(), "a b");
}

TEST(GgufSentencePieceVocabulary, CharactersWithoutATokenFallBackToBytesOrTheUnknownToken) {
  Tokenizer tokenizer = Tokenizer::from_gguf_vocabulary(tiny_sentencepiece(), "tiny");
  // é is C3 A9, both byte tokens; ü (C3 BC) has no <0xBC>, so it is unknown, as is x after it
  // (fused into one <unk>).
  EXPECT_EQ(tokenizer.encode("a\xC3\xA9"), (std::vector<uint32_t>{4, 10, 11}));
  EXPECT_EQ(tokenizer.decode({4, 10, 11}), "a\xC3\xA9");
  EXPECT_EQ(tokenizer.encode("\xC3\xBCxa"), (std::vector<uint32_t>{0, 4}));
}

TEST(GgufSentencePieceVocabulary, ControlTokensMatchOnlyWhenParsedAndUserDefinedAlways) {
  Tokenizer tokenizer = Tokenizer::from_gguf_vocabulary(tiny_sentencepiece(), "tiny");
  EXPECT_EQ(tokenizer.encode("<s>abc"), (std::vector<uint32_t>{1, 4, 8}));
  // Unparsed, "<s>" is three characters without tokens: one fused <unk>; s has no token either.
  EXPECT_EQ(tokenizer.encode("<s>abc", false), (std::vector<uint32_t>{0, 4, 8}));
  // Two spaces are the user-defined token, in the raw text before any "▁".
  EXPECT_EQ(tokenizer.encode("a  b", false), (std::vector<uint32_t>{4, 12, 5}));
  // Written with "▁" too, as SentencePiece and Hugging Face match it.
  EXPECT_EQ(tokenizer.encode("a\u2581\u2581b", false), (std::vector<uint32_t>{4, 12, 5}));
  EXPECT_EQ(tokenizer.decode({1, 4, 12, 5}), "<s>a  b");
  EXPECT_EQ(tokenizer.decode({1, 4, 12, 5}, true), "a  b");
  // llama.cpp adds the bos for llama by default.
  EXPECT_EQ(tokenizer.prefix_token_id(), 1u);
}

// ---- Bad input -----------------------------------------------------------------------------

// A vocabulary changed to be wrong in one way, and what the Error must name.
struct BadVocabulary {
  GgufVocabulary (*base)();
  std::function<void(GgufVocabulary&)> spoil;
  std::string key, detail;
};

TEST(GgufVocabularyErrors, NameTheKeyAndTheValue) {
  using V = GgufVocabulary&;
  const std::vector<BadVocabulary> cases = {
      {tiny_gpt2, [](V v) { v.model = "bert"; }, "tokenizer.ggml.model", "'bert'"},
      {tiny_gpt2, [](V v) { v.pre = "mystery"; }, "tokenizer.ggml.pre", "'mystery'"},
      {tiny_gpt2, [](V v) { v.pre = "mystery"; }, "tokenizer.ggml.pre", "qwen2, llama-bpe"},
      {tiny_gpt2, [](V v) { v.pre.clear(); }, "tokenizer.ggml.pre", "missing"},
      {tiny_gpt2, [](V v) { v.token_types.pop_back(); }, "tokenizer.ggml.token_type",
       "262 values for 263 tokens"},
      {tiny_gpt2, [](V v) { v.token_types[262] = 9; }, "tokenizer.ggml.token_type[262]", "9"},
      {tiny_gpt2, [](V v) { v.merges.push_back("c x"); }, "tokenizer.ggml.merges[5]", "'cx'"},
      {tiny_gpt2, [](V v) { v.merges.push_back("cat"); }, "tokenizer.ggml.merges[5]", "two tokens"},
      {tiny_gpt2, [](V v) { v.merges.clear(); }, "tokenizer.ggml.merges", "missing"},
      {tiny_gpt2, [](V v) { v.tokens[256] = "the"; }, "tokenizer.ggml.tokens", "'the'"},
      {tiny_gpt2, [](V v) { v.tokens.clear(); }, "tokenizer.ggml.tokens", "missing"},
      {tiny_gpt2,
       [](V v) {
         v.scores = {1, 2};
       },
       "tokenizer.ggml.scores", "2 values for 263 tokens"},
      {tiny_gpt2, [](V v) { v.eos_token_id = 263; }, "tokenizer.ggml.eos_token_id",
       "263 is out of range"},
      {tiny_gpt2, [](V v) { v.bos_token_id = 1000; }, "tokenizer.ggml.bos_token_id", "1000"},
      {tiny_sentencepiece, [](V v) { v.scores.pop_back(); }, "tokenizer.ggml.scores",
       "12 values for 13 tokens"},
      {tiny_sentencepiece, [](V v) { v.scores.clear(); }, "tokenizer.ggml.scores", "missing"},
      {tiny_sentencepiece, [](V v) { v.scores[5] = NAN; }, "tokenizer.ggml.scores[5]", "number"},
      {tiny_sentencepiece, [](V v) { v.token_types[4] = 6; }, "tokenizer.ggml.tokens[4]", "<0xNN>"},
      {tiny_sentencepiece, [](V v) { v.unknown_token_id = 13; }, "tokenizer.ggml.unknown_token_id",
       "13"},
      {tiny_sentencepiece, [](V v) { v.padding_token_id = 99; }, "tokenizer.ggml.padding_token_id",
       "99"},
  };
  for (const BadVocabulary& bad : cases) {
    GgufVocabulary vocabulary = bad.base();
    bad.spoil(vocabulary);
    try {
      Tokenizer::from_gguf_vocabulary(vocabulary, "bad.gguf");
      ADD_FAILURE() << "no error for " << bad.key << " (" << bad.detail << ")";
    } catch (const Error& error) {
      std::string message = error.what();
      EXPECT_TRUE(message.starts_with("bad.gguf: " + bad.key + ": ")) << message;
      EXPECT_NE(message.find(bad.detail), std::string::npos) << message;
    }
  }
}

// ---- tokenizer.json that no GGUF vocabulary expresses ---------------------------------------

// A byte-level tokenizer.json with the given Split regex (bytes only, no merges).
std::string byte_level_json(const std::string& regex) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int byte = 0; byte < 256; ++byte) vocab[testing::byte_level_character(byte)] = byte;
  nlohmann::json file = {
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  return file.dump();
}

// A SentencePiece-style tokenizer.json: a, b, c, ab, bc, abc with the given merges.
std::string sentencepiece_json(const nlohmann::json& merges) {
  nlohmann::json file = {
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}},
      {"pre_tokenizer", nullptr},
      {"decoder", {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}}},
        {"merges", merges}}}};
  return file.dump();
}

void expect_json_error(const std::string& json, const std::string& detail) {
  try {
    text::gguf_vocabulary_from_tokenizer_json(json, "", "bad.json");
    ADD_FAILURE() << "no error for " << detail;
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(detail), std::string::npos) << error.what();
  }
}

TEST(GgufVocabularyFromJson, ScoresReproduceTheMergeRanks) {
  // ab+c (rank 1) and a+bc (rank 2) both make abc, consecutively.
  GgufVocabulary vocabulary = text::gguf_vocabulary_from_tokenizer_json(
      sentencepiece_json({"b c", "ab c", "a bc", "a b"}), "", "tiny.json");
  EXPECT_EQ(vocabulary.model, "llama");
  EXPECT_EQ(vocabulary.scores, (std::vector<float>{-4, -4, -4, -3, 0, -1}));
  EXPECT_EQ(vocabulary.add_space_prefix, false);
}

TEST(GgufVocabularyFromJson, RejectsWhatNoGgufVocabularyExpresses) {
  expect_json_error(byte_level_json(R"(\p{L}+|\s+)"), "pre_tokenizer");
  expect_json_error(byte_level_json(R"(\p{L}+|\s+)"), "qwen2");
  // The merges that make abc are split by another.
  expect_json_error(sentencepiece_json({"a b", "ab c", "b c", "a bc"}),
                    "the merges that make 'abc' are not consecutive");
  // b+c makes a token, but the file lists no such merge.
  expect_json_error(sentencepiece_json({"a b", "ab c"}), "'b' + 'c' makes the token 'bc'");
}

TEST(GgufVocabularyFromJson, RefusesModelTokensPastTheEmbeddingsRows) {
  // abc (id 5) comes from the model's vocab, not added_tokens: dropping it would change encodings.
  try {
    text::gguf_vocabulary_from_tokenizer_json(sentencepiece_json({"a b", "b c", "ab c"}), "",
                                              "tiny.json", 5);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("token 5 'abc' is past the embedding's 5 rows"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace fornace
