// Tokenizer behaviour on tiny hand-built tokenizer.json files, byte-level and SentencePiece-style
// (expected ids worked out by hand or given by the reference library), their errors for bad
// input and malformed files, the incremental decoder and the ChatML template.
#include "text/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/test_files.h"
#include "tokenizer_fixture.h"

namespace fornace {
namespace {

using Json = nlohmann::json;

using testing::byte_level_character;

// Ids 0-255 are the bytes, then he=256, ll=257, hell=258, Ġw=259; added: <|end|>=260 (special),
// <note>=261 (not special), <x>=262 and <x><y>=263 (special).
Json tiny_tokenizer_json() {
  Json vocab = Json::object();
  for (int byte = 0; byte < 256; ++byte) vocab[byte_level_character(byte)] = byte;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["\u0120w"] = 259;
  const auto added = [](int id, const char* content, bool special) {
    return Json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", special}};
  };
  return Json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {added(260, "<|end|>", true), added(261, "<note>", false), added(262, "<x>", true),
        added(263, "<x><y>", true)}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern",
            {{"Regex",
              "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
              "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"},
           {"add_prefix_space", false},
           {"trim_offsets", false},
           {"use_regex", false}}}}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", Json::array({Json::array({"h", "e"}), Json::array({"l", "l"}),
                                Json::array({"he", "ll"}), Json::array({"\u0120", "w"})})}}}};
}

Tokenizer tiny_tokenizer(const Json& json = tiny_tokenizer_json()) {
  return Tokenizer::from_json(json.dump(), "tiny.json");
}

using test_support::error_message;

std::string load_error(const Json& json) {
  return error_message([&] { tiny_tokenizer(json); });
}

using Ids = std::vector<uint32_t>;

TEST(Tokenizer, MergesByRankWithinAPiece) {
  Tokenizer tokenizer = tiny_tokenizer();
  EXPECT_EQ(tokenizer.encode("hello"), (Ids{258, 'o'}));
  EXPECT_EQ(tokenizer.encode("hello world"), (Ids{258, 'o', 259, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(tokenizer.encode("hehe"), (Ids{256, 256}));
}

TEST(Tokenizer, StringAndPairMergeFormsGiveTheSameIds) {
  Json json = tiny_tokenizer_json();
  json["model"]["merges"] = {"h e", "l l", "he ll", "\u0120 w"};
  EXPECT_EQ(tiny_tokenizer(json).encode("hello world"), (Ids{258, 'o', 259, 'o', 'r', 'l', 'd'}));
}

TEST(Tokenizer, IgnoreMergesTakesAWholeTokenAsItIs) {
  Json json = tiny_tokenizer_json();
  json["model"]["vocab"]["hel"] = 264;  // Reachable by no merge.
  EXPECT_EQ(tiny_tokenizer(json).encode("hel"), (Ids{256, 'l'}));
  json["model"]["ignore_merges"] = true;
  EXPECT_EQ(tiny_tokenizer(json).encode("hel"), (Ids{264}));
}

TEST(Tokenizer, AddedTokensSplitTheTextLongestFirst) {
  Tokenizer tokenizer = tiny_tokenizer();
  EXPECT_EQ(tokenizer.encode("a<|end|>b"), (Ids{'a', 260, 'b'}));
  EXPECT_EQ(tokenizer.encode("<x><y>"), (Ids{263}));
  EXPECT_EQ(tokenizer.encode("<x><z>"), (Ids{262, '<', 'z', '>'}));
  EXPECT_EQ(tokenizer.encode("<note>"), (Ids{261}));
}

TEST(Tokenizer, WithoutParseSpecialOnlyNonSpecialAddedTokensMatch) {
  Tokenizer tokenizer = tiny_tokenizer();
  Ids ids = tokenizer.encode("a<|end|><note>", false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 260u), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 261u), 1);
  EXPECT_EQ(tokenizer.decode(ids), "a<|end|><note>");
}

TEST(Tokenizer, QwenSpecialTokensAreTextWithoutParseSpecial) {
  const Tokenizer& tokenizer = testing::qwen_tokenizer();
  Ids ids = tokenizer.encode("<|im_start|>user", false);
  for (uint32_t id : ids) EXPECT_FALSE(tokenizer.is_special(id));
  EXPECT_EQ(tokenizer.decode(ids), "<|im_start|>user");
}

TEST(Tokenizer, NormalizesToNfcBeforeMerging) {
  Tokenizer tokenizer = tiny_tokenizer();
  // U+00E9 is the bytes C3 A9 (ids 195, 169); "e" + U+0301 composes to it.
  EXPECT_EQ(tokenizer.encode("e\xCC\x81"), (Ids{195, 169}));
}

TEST(Tokenizer, DecodeSkipsOnlySpecialTokensWhenAsked) {
  Tokenizer tokenizer = tiny_tokenizer();
  Ids ids{'h', 260, 261, 'i'};
  EXPECT_EQ(tokenizer.decode(ids), "h<|end|><note>i");
  EXPECT_EQ(tokenizer.decode(ids, true), "h<note>i");
  EXPECT_TRUE(tokenizer.is_special(260));
  EXPECT_FALSE(tokenizer.is_special(261));
  EXPECT_FALSE(tokenizer.is_special(100000));
}

TEST(Tokenizer, DecodeReplacesBrokenUtf8WithReplacementCharacters) {
  Tokenizer tokenizer = tiny_tokenizer();
  EXPECT_EQ(tokenizer.decode({0xC3}), "\xEF\xBF\xBD");
  EXPECT_EQ(tokenizer.decode({0xC3, 'a'}),
            "\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(tokenizer.decode({0xFF, 0xC3, 0xA9}), "\xEF\xBF\xBD\xC3\xA9");
  // E2 82 is the start of a three-byte character cut short: one replacement, as in Rust.
  EXPECT_EQ(tokenizer.decode({0xE2, 0x82, 'x'}),
            "\xEF\xBF\xBD"
            "x");
}

TEST(Tokenizer, VocabularyQueries) {
  Tokenizer tokenizer = tiny_tokenizer();
  EXPECT_EQ(tokenizer.vocab_size(), 264u);
  EXPECT_EQ(tokenizer.token_to_id("hell"), 258u);
  EXPECT_EQ(tokenizer.token_to_id("<|end|>"), 260u);
  EXPECT_FALSE(tokenizer.token_to_id("nothing").has_value());
  EXPECT_EQ(tokenizer.token_bytes(259), " w");
  EXPECT_EQ(tokenizer.token_bytes(260), "<|end|>");
  EXPECT_FALSE(tokenizer.eos_token_id().has_value());
}

TEST(Tokenizer, QwenVocabularyAndEos) {
  const Tokenizer& tokenizer = testing::qwen_tokenizer();
  EXPECT_EQ(tokenizer.vocab_size(), 151669u);
  EXPECT_EQ(tokenizer.eos_token_id(), 151645u);  // <|im_end|> in tokenizer_config.json.
  EXPECT_EQ(tokenizer.token_to_id("<|im_start|>"), 151644u);
  EXPECT_EQ(tokenizer.token_bytes(*tokenizer.token_to_id("\u0120world")), " world");
}

TEST(TokenizerErrors, InvalidUtf8NamesTheByteOffset) {
  Tokenizer tokenizer = tiny_tokenizer();
  EXPECT_NE(error_message([&] {
              tokenizer.encode(
                  "ab\xFF"
                  "cd");
            }).find("byte offset 2"),
            std::string::npos);
  EXPECT_NE(error_message([&] { tokenizer.encode("hello \xC3"); }).find("byte offset 6"),
            std::string::npos);
  EXPECT_NE(error_message([&] { tokenizer.encode("\xC0\xAF"); }).find("byte offset 0"),
            std::string::npos);  // Overlong form.
  EXPECT_NE(error_message([&] { tokenizer.encode("x\xED\xA0\x80"); }).find("byte offset 1"),
            std::string::npos);  // A UTF-16 surrogate.
}

TEST(TokenizerErrors, DecodeRejectsIdsOutOfRange) {
  Tokenizer tokenizer = tiny_tokenizer();
  std::string message = error_message([&] { tokenizer.decode({'a', 264}); });
  EXPECT_NE(message.find("264"), std::string::npos) << message;
  EXPECT_NE(message.find("out of range"), std::string::npos) << message;
  EXPECT_THROW(tokenizer.token_bytes(UINT32_MAX), Error);
}

TEST(IncrementalDecoder, GivesNoTextForIdsTheTokenizerLacks) {
  Tokenizer tokenizer = tiny_tokenizer();
  IncrementalDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push('h'), "h");
  EXPECT_EQ(decoder.push(100000), "");
  EXPECT_EQ(decoder.push(UINT32_MAX), "");
  EXPECT_EQ(decoder.push('i'), "i");
}

TEST(TokenizerErrors, UnsupportedSettingsNameTheirField) {
  const auto with = [](auto&& change) {
    Json json = tiny_tokenizer_json();
    change(json);
    return load_error(json);
  };
  const auto expect_field = [](const std::string& message, const std::string& field) {
    EXPECT_NE(message.find("tiny.json"), std::string::npos) << message;
    EXPECT_NE(message.find(field), std::string::npos) << message;
  };
  expect_field(with([](Json& json) { json["model"]["type"] = "WordPiece"; }), "model.type");
  expect_field(with([](Json& json) { json["normalizer"]["type"] = "NFKC"; }), "normalizer.type");
  expect_field(with([](Json& json) { json["decoder"]["type"] = "Metaspace"; }), "decoder.type");
  expect_field(
      with([](Json& json) { json["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }),
      "pre_tokenizer.pretokenizers[0].behavior");
  expect_field(with([](Json& json) {
                 json["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
               }),
               "pre_tokenizer.pretokenizers[0].pattern");
  expect_field(with([](Json& json) {
                 json["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true;
               }),
               "pre_tokenizer.pretokenizers[1].add_prefix_space");
  expect_field(with([](Json& json) { json["added_tokens"][1]["lstrip"] = true; }),
               "added_tokens[1].lstrip");
  expect_field(with([](Json& json) { json["model"]["byte_fallback"] = true; }),
               "model.byte_fallback");
  expect_field(with([](Json& json) { json["model"]["dropout"] = 0.1; }), "model.dropout");
  expect_field(with([](Json& json) { json["truncation"] = Json::object(); }), "truncation");
}

// A SentencePiece-style tokenizer as Gemma 3's: spaces become U+2581, each U+2581 joins the text
// before it (Split, MergedWithPrevious), unknown characters take their <0xNN> tokens or <unk>.
// Ids 1 and 2 are the bytes of "é", 3 is U+2581, 11 "b▁", 12 the added token <s>.
Json tiny_sentencepiece_json(bool fuse_unknown) {
  const std::string lower_block = "\u2581";
  Json vocab = {{"<unk>", 0},
                {"<0xC3>", 1},
                {"<0xA9>", 2},
                {lower_block, 3},
                {"a", 4},
                {"b", 5},
                {"c", 6},
                {"ab", 7},
                {lower_block + "a", 8},
                {"abc", 9},
                {lower_block + lower_block, 10},
                {"b" + lower_block, 11}};
  return Json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", 12},
         {"content", "<s>"},
         {"single_word", false},
         {"lstrip", false},
         {"rstrip", false},
         {"normalized", false},
         {"special", true}}}},
      {"normalizer",
       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", lower_block}}},
      {"pre_tokenizer",
       {{"type", "Split"},
        {"pattern", {{"String", lower_block}}},
        {"behavior", "MergedWithPrevious"},
        {"invert", false}}},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", lower_block}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}}}}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", fuse_unknown},
        {"byte_fallback", true},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", Json::array({Json::array({"a", "b"}), Json::array({lower_block, "a"}),
                                Json::array({"ab", "c"}), Json::array({lower_block, lower_block}),
                                Json::array({"b", lower_block})})}}}};
}

// The expected ids and texts below are what the Hugging Face tokenizers library (node binding)
// gives for the same tokenizer.json.
TEST(SentencePieceTokenizer, SpacesBecomeLowerBlocksJoinedToTheTextBeforeThem) {
  Tokenizer tokenizer = Tokenizer::from_json(tiny_sentencepiece_json(true).dump(), "sp.json");
  EXPECT_EQ(tokenizer.encode("b b"), (Ids{11, 5}));        // "b▁" | "b": not "b", "▁", "b".
  EXPECT_EQ(tokenizer.encode("a  b"), (Ids{4, 3, 3, 5}));  // "a▁" | "▁" | "b": no "▁▁".
  EXPECT_EQ(tokenizer.encode("abc ab"), (Ids{9, 3, 7}));
  EXPECT_EQ(tokenizer.encode(" a  abc"), (Ids{3, 4, 3, 3, 9}));
  EXPECT_EQ(tokenizer.encode("a<s>b"), (Ids{4, 12, 5}));
  EXPECT_EQ(tokenizer.decode({3, 4, 3, 3, 9}), " a  abc");
}

TEST(SentencePieceTokenizer, UnknownCharactersTakeByteTokensOrTheUnknownToken) {
  Tokenizer fused = Tokenizer::from_json(tiny_sentencepiece_json(true).dump(), "sp.json");
  Tokenizer unfused = Tokenizer::from_json(tiny_sentencepiece_json(false).dump(), "sp.json");
  EXPECT_EQ(fused.encode("\u00e9"), (Ids{1, 2}));
  EXPECT_EQ(fused.encode("xyz"), (Ids{0}));
  EXPECT_EQ(unfused.encode("xyz"), (Ids{0, 0, 0}));
  // The byte tokens of "é" go out before the pending unknown token of "x", as in the reference.
  EXPECT_EQ(fused.encode("x\u00e9yz a"), (Ids{1, 2, 0, 3, 4}));
  EXPECT_EQ(unfused.encode("x\u00e9yz a"), (Ids{1, 2, 0, 0, 0, 3, 4}));
}

TEST(SentencePieceTokenizer, ByteTokenRunsDecodeAsUtf8OrOneReplacementPerByte) {
  Tokenizer tokenizer = Tokenizer::from_json(tiny_sentencepiece_json(true).dump(), "sp.json");
  const std::string replacement = "\uFFFD";
  EXPECT_EQ(tokenizer.decode({1, 2, 4}), "\u00e9a");
  EXPECT_EQ(tokenizer.decode({1, 4, 2}), replacement + "a" + replacement);
  EXPECT_EQ(tokenizer.decode({3, 8, 12, 1}), "  a<s>" + replacement);
  EXPECT_EQ(tokenizer.decode({3, 8, 12, 1}, true), "  a" + replacement);
  EXPECT_EQ(tokenizer.token_bytes(8), " a");
  EXPECT_EQ(tokenizer.token_bytes(1), "\xC3");
  IncrementalDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push(4), "a");
  EXPECT_EQ(decoder.push(1), "");  // A run of byte tokens is held until it ends.
  EXPECT_EQ(decoder.push(2), "");
  EXPECT_EQ(decoder.push(3), "\u00e9 ");
  EXPECT_EQ(decoder.push(1), "");
  EXPECT_EQ(decoder.flush(), replacement);
}

TEST(SentencePieceTokenizer, UnsupportedOrInconsistentSettingsNameTheirField) {
  const auto with = [](auto&& change) {
    Json json = tiny_sentencepiece_json(true);
    change(json);
    return error_message([&] { Tokenizer::from_json(json.dump(), "sp.json"); });
  };
  const auto expect_field = [](const std::string& message, const std::string& field) {
    EXPECT_EQ(message.rfind("sp.json: " + field + ":", 0), 0u) << message;
  };
  expect_field(with([](Json& json) { json["decoder"] = {{"type", "ByteLevel"}}; }), "decoder.type");
  expect_field(with([](Json& json) { json["model"]["byte_fallback"] = false; }), "decoder");
  expect_field(with([](Json& json) { json["model"]["unk_token"] = "<missing>"; }),
               "model.unk_token");
  expect_field(with([](Json& json) {
                 json["normalizer"]["pattern"] = {{"Regex", " +"}};
               }),
               "normalizer.pattern");
  expect_field(with([](Json& json) { json["normalizer"]["type"] = "Prepend"; }), "normalizer.type");
  expect_field(with([](Json& json) { json["decoder"]["decoders"][0]["pattern"]["String"] = "_"; }),
               "decoder.decoders[0].pattern.String");
  expect_field(with([](Json& json) {
                 std::swap(json["decoder"]["decoders"][0], json["decoder"]["decoders"][1]);
               }),
               "decoder.decoders[1].type");
  expect_field(with([](Json& json) { json["decoder"]["decoders"][2]["type"] = "Strip"; }),
               "decoder.decoders[2].type");
  expect_field(with([](Json& json) { json["pre_tokenizer"]["type"] = "Metaspace"; }),
               "pre_tokenizer.type");
}

TEST(TokenizerErrors, MalformedFilesNameTheField) {
  const auto with = [](auto&& change) {
    Json json = tiny_tokenizer_json();
    change(json);
    return load_error(json);
  };
  std::string message = with([](Json& json) {
    json["model"]["merges"].push_back(Json::array({"q", "zz"}));
  });
  EXPECT_NE(message.find("model.merges[4]"), std::string::npos) << message;
  EXPECT_NE(message.find("'zz' is not in the vocab"), std::string::npos) << message;
  message = with([](Json& json) { json["model"]["merges"] = {"h e", "l l l"}; });
  EXPECT_NE(message.find("model.merges[1]"), std::string::npos) << message;
  message = with([](Json& json) { json["model"]["vocab"]["extra"] = "seven"; });
  EXPECT_NE(message.find("model.vocab"), std::string::npos) << message;
  message = with([](Json& json) { json["model"]["vocab"]["twin"] = 258; });
  EXPECT_NE(message.find("model.vocab"), std::string::npos) << message;
  message = with([](Json& json) { json["model"]["vocab"].erase("A"); });
  EXPECT_NE(message.find("byte 65"), std::string::npos) << message;
  message = with([](Json& json) { json.erase("model"); });
  EXPECT_NE(message.find("model: missing"), std::string::npos) << message;
  message = with([](Json& json) { json["added_tokens"][0]["id"] = 'h'; });
  EXPECT_NE(message.find("added_tokens[0].id"), std::string::npos) << message;
  message = with([](Json& json) { json["added_tokens"][0].erase("content"); });
  EXPECT_NE(message.find("added_tokens[0].content"), std::string::npos) << message;
}

TEST(TokenizerErrors, BrokenJsonNamesTheFieldAndOffset) {
  std::string text = tiny_tokenizer_json().dump();
  std::string truncated = text.substr(0, text.find("\"merges\"") + 15);
  std::string message = error_message([&] { Tokenizer::from_json(truncated, "cut.json"); });
  EXPECT_NE(message.find("cut.json: model.merges"), std::string::npos) << message;
  EXPECT_NE(message.find("at byte"), std::string::npos) << message;
  message = error_message([&] { Tokenizer::from_json("[1, 2]", "array.json"); });
  EXPECT_NE(message.find("expected an object"), std::string::npos) << message;
  message = error_message([&] { Tokenizer::from_json("", "empty.json"); });
  EXPECT_NE(message.find("empty.json"), std::string::npos) << message;
  message = error_message([&] { Tokenizer::from_json(text + "x", "trailing.json"); });
  EXPECT_NE(message.find("after the top-level value"), std::string::npos) << message;
}

// Hostile tokenizer.json text: each message names the file, the field and the exact byte.
TEST(TokenizerErrors, HostileJsonNamesTheFileFieldAndByte) {
  const std::string text = tiny_tokenizer_json().dump();
  const auto error_for = [](const std::string& json) {
    return error_message([&] { Tokenizer::from_json(json, "tiny.json"); });
  };
  const auto at = [](size_t offset) { return " (at byte " + std::to_string(offset) + ")"; };
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string json = text;
    size_t position = json.find(from);
    EXPECT_NE(position, std::string::npos) << from;
    return json.replace(position, from.size(), to);
  };
  const size_t hell = text.find("\"hell\":");  // The vocab key "hell", at its opening quote.
  ASSERT_NE(hell, std::string::npos);

  EXPECT_EQ(error_for(replaced("\"hell\":258", "\"hell\":99999999999999999999")),
            "tiny.json: model.vocab: integer too large" + at(hell + 7 + 19));
  EXPECT_EQ(error_for(replaced("\"hell\":", "\"he\xFFl\":")),
            "tiny.json: model.vocab: not valid UTF-8" + at(hell + 3));
  // An id that would size the vocabulary's table far beyond the file (2^31 here).
  EXPECT_EQ(error_for(replaced("\"hell\":258", "\"hell\":2147483648")),
            "tiny.json: model.vocab: id 2147483648 too large (ids here are below 1048576)" +
                at(hell + 7 + 10));
  EXPECT_EQ(error_for(replaced("\"id\":260", "\"id\":2000000")),
            "tiny.json: added_tokens[0].id: expected a non-negative integer below 1048576");
  EXPECT_EQ(error_for(text.substr(0, hell + 4)),
            "tiny.json: model.vocab: unterminated string" + at(hell + 1));

  std::string bad_content = replaced("\"<note>\"", "\"<no\xFFte>\"");
  EXPECT_EQ(error_for(bad_content),
            "tiny.json: added_tokens: not valid UTF-8" + at(bad_content.find('\xFF')));
  // The small parts go to nlohmann::json, whose errors point where it stopped: at the ',' where
  // a digit should follow "1.".
  const size_t id = text.find("\"id\":260");
  EXPECT_EQ(error_for(replaced("\"id\":260", "\"id\":1.")),
            "tiny.json: added_tokens: not valid JSON" + at(id + 7));
  std::string huge_id = replaced("\"id\":260", "\"id\":1e400");
  std::string message = error_for(huge_id);
  EXPECT_EQ(message.rfind("tiny.json: added_tokens: not valid JSON: ", 0), 0u) << message;
  EXPECT_TRUE(message.ends_with(at(huge_id.find("\"added_tokens\":") + 15))) << message;

  Json deep = Json::array();
  for (int depth = 0; depth < 300; ++depth) deep = Json::array({deep});
  Json with_deep = tiny_tokenizer_json();
  with_deep["extra"] = deep;
  std::string deep_text = with_deep.dump();
  EXPECT_EQ(error_for(deep_text),
            "tiny.json: extra: nesting too deep" + at(deep_text.find("\"extra\":") + 8 + 257));
}

TEST(TokenizerErrors, LoadNamesAMissingFile) {
  std::string message = error_message([] { Tokenizer::load("/nonexistent-fornace-dir"); });
  EXPECT_NE(message.find("/nonexistent-fornace-dir/tokenizer.json"), std::string::npos) << message;
}

class TokenizerDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("fornace-tokenizer-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(directory_);
    std::ofstream(directory_ / "tokenizer.json") << tiny_tokenizer_json().dump();
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  void write_config(const std::string& text) {
    std::ofstream(directory_ / "tokenizer_config.json") << text;
  }
  std::filesystem::path directory_;
};

TEST_F(TokenizerDirectory, EosComesFromTheConfigInEitherForm) {
  write_config(R"({"eos_token": "<|end|>"})");
  EXPECT_EQ(Tokenizer::load(directory_).eos_token_id(), 260u);
  write_config(R"({"eos_token": {"content": "<|end|>", "special": true}})");
  EXPECT_EQ(Tokenizer::load(directory_).eos_token_id(), 260u);
}

TEST_F(TokenizerDirectory, EosThatIsNotATokenNamesTheField) {
  write_config(R"({"eos_token": "<|nope|>"})");
  std::string message = error_message([&] { Tokenizer::load(directory_); });
  EXPECT_NE(message.find("tokenizer_config.json: eos_token"), std::string::npos) << message;
  write_config("{not json");
  message = error_message([&] { Tokenizer::load(directory_); });
  EXPECT_NE(message.find("tokenizer_config.json"), std::string::npos) << message;
}

TEST(IncrementalDecoder, HoldsAPartialCharacterUntilItCompletes) {
  Tokenizer tokenizer = tiny_tokenizer();
  IncrementalDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push('a'), "a");
  EXPECT_EQ(decoder.push(0xE4), "");  // 中 is E4 B8 AD.
  EXPECT_EQ(decoder.push(0xB8), "");
  EXPECT_EQ(decoder.push(0xAD), "\xE4\xB8\xAD");
  EXPECT_EQ(decoder.flush(), "");
}

TEST(IncrementalDecoder, EmitsInvalidBytesAsReplacementAtOnce) {
  Tokenizer tokenizer = tiny_tokenizer();
  IncrementalDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push(0xFF), "\xEF\xBF\xBD");
  EXPECT_EQ(decoder.push(0xE4), "");
  EXPECT_EQ(decoder.push('x'),
            "\xEF\xBF\xBD"
            "x");  // The held start can no longer complete.
  EXPECT_EQ(decoder.push(0xF0), "");
  EXPECT_EQ(decoder.flush(), "\xEF\xBF\xBD");
}

TEST(IncrementalDecoder, SkipsSpecialTokensWhenAsked) {
  Tokenizer tokenizer = tiny_tokenizer();
  IncrementalDecoder decoder(tokenizer, true);
  EXPECT_EQ(decoder.push(260), "");
  EXPECT_EQ(decoder.push(261), "<note>");
}

// models/ holds Qwen3's tokenizer_config.json: its template writes ChatML turns, and an assistant
// turn after the last user turn gets an (empty) think block.
TEST(ChatTemplate, WritesChatMlTurnsAndTheGenerationPrompt) {
  const Tokenizer& tokenizer = testing::qwen_tokenizer();
  std::vector<ChatMessage> messages{
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}};
  EXPECT_EQ(tokenizer.apply_chat_template(messages, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nHello.<|im_end|>\n");
  EXPECT_EQ(tokenizer.apply_chat_template({{"user", "Hi"}}, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // Hugging Face ids of "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n".
  EXPECT_EQ(tokenizer.encode(tokenizer.apply_chat_template({{"user", "Hi"}}, true)),
            (Ids{151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198}));
}

TEST(ChatTemplate, RejectsUnknownRolesAndNonChatMlTokenizers) {
  EXPECT_THROW(testing::qwen_tokenizer().apply_chat_template({{"narrator", "x"}}, false), Error);
  EXPECT_THROW(tiny_tokenizer().apply_chat_template({{"user", "x"}}, true), Error);
}

}  // namespace
}  // namespace fornace
