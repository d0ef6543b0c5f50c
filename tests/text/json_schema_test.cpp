// The JSON schema compiler and the grammar matcher: texts a schema must accept and reject (read
// off the JSON Schema rules by hand), the errors that name the keyword and where it is, random
// walks whose sentences nlohmann parses, and the token trie's masks against a token-by-token check.
#include "text/json_schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "core/error.h"
#include "text/token_trie.h"
#include "text/tokenizer_fixture.h"

namespace fornace::text {
namespace {

using Json = nlohmann::ordered_json;

Grammar compile(const char* schema) { return compile_json_schema(Json::parse(schema)); }

bool accepts(const Grammar& grammar, const std::string& text) {
  GrammarMatcher matcher(grammar);
  const int32_t state = matcher.next(matcher.initial_state(), text);
  return state != GrammarMatcher::kDead && matcher.accepting(state);
}

std::string compile_error(const char* schema) {
  try {
    compile(schema);
  } catch (const Error& error) {
    return error.what();
  }
  return "(compiled)";
}

// A random sentence: random allowed bytes, then the shortest way to the end once `length` bytes
// are written (the byte whose next state has the smallest min_completion).
std::string random_sentence(const Grammar& grammar, std::mt19937& random, size_t length) {
  GrammarMatcher matcher(grammar);
  int32_t state = matcher.initial_state();
  std::string text;
  while (true) {
    std::vector<uint8_t> allowed;
    int best = -1;
    for (int byte = 0; byte < 256; ++byte) {
      const int32_t next = matcher.next(state, static_cast<uint8_t>(byte));
      if (next == GrammarMatcher::kDead) continue;
      allowed.push_back(static_cast<uint8_t>(byte));
      if (best < 0 || matcher.min_completion(next) <
                          matcher.min_completion(matcher.next(state, static_cast<uint8_t>(best)))) {
        best = byte;
      }
    }
    if (matcher.accepting(state) &&
        (allowed.empty() || text.size() >= length || random() % 8 == 0)) {
      return text;
    }
    EXPECT_FALSE(allowed.empty()) << "a live state allows no byte after " << text;
    if (allowed.empty()) return text;
    const uint8_t byte =
        text.size() < length ? allowed[random() % allowed.size()] : static_cast<uint8_t>(best);
    text += static_cast<char>(byte);
    state = matcher.next(state, byte);
  }
}

TEST(JsonSchema, ObjectTakesRequiredAndOptionalPropertiesInOrderAndNothingElse) {
  Grammar grammar = compile(R"({"type":"object","properties":{"name":{"type":"string"},
      "age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},
      "required":["name"]})");
  EXPECT_TRUE(accepts(grammar, R"({"name":"Ada"})"));
  EXPECT_TRUE(accepts(grammar, R"({"name":"Ada","age":36})"));
  EXPECT_TRUE(accepts(grammar, R"({"name":"Ada","tags":["x","y"]})"));
  EXPECT_TRUE(accepts(grammar, R"({ "name" : "Ada", "age": -7, "tags": [] })"));
  EXPECT_TRUE(accepts(grammar, "{\n  \"name\": \"\\u00e9\\n\"\n}"));
  EXPECT_FALSE(accepts(grammar, R"({})"));  // name is required
  EXPECT_FALSE(accepts(grammar, R"({"age":36})"));
  EXPECT_FALSE(accepts(grammar, R"({"name":"Ada","extra":1})"));   // no additional ones
  EXPECT_FALSE(accepts(grammar, R"({"name":"Ada","age":36.5})"));  // integer
  EXPECT_FALSE(accepts(grammar, R"({"name":"Ada",})"));
  EXPECT_FALSE(accepts(grammar, R"({"name":"Ada"} )"));  // nothing after the value
  EXPECT_FALSE(accepts(grammar, R"({"name":"Ada")"));
  EXPECT_FALSE(accepts(grammar, "{\"name\":\"a\x01\"}"));    // control characters
  EXPECT_FALSE(accepts(grammar, "{\"name\":\"\xc3\"}"));     // broken UTF-8
  EXPECT_FALSE(accepts(grammar, "{\"name\":\"\\ud800\"}"));  // lone surrogate escape
  EXPECT_FALSE(accepts(grammar, "{  \"name\":\"a\"}"));      // at most one space
}

TEST(JsonSchema, ArraysCountTheirItems) {
  Grammar grammar =
      compile(R"({"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3})");
  EXPECT_FALSE(accepts(grammar, "[]"));
  EXPECT_FALSE(accepts(grammar, "[true]"));
  EXPECT_TRUE(accepts(grammar, "[true,false]"));
  EXPECT_TRUE(accepts(grammar, "[true, false, true]"));
  EXPECT_FALSE(accepts(grammar, "[true,false,true,true]"));
  EXPECT_FALSE(accepts(grammar, "[true,1]"));
  Grammar at_least = compile(R"({"type":"array","minItems":1})");
  EXPECT_FALSE(accepts(at_least, "[]"));
  EXPECT_TRUE(accepts(at_least, R"([1,"a",null,{"b":[]},[2.5e-3]])"));
  Grammar none = compile(R"({"type":"array","items":false})");
  EXPECT_TRUE(accepts(none, "[]"));
  EXPECT_FALSE(accepts(none, "[1]"));
}

TEST(JsonSchema, EnumConstTypeListsAndAnyOf) {
  Grammar colours = compile(R"({"enum":["red","green",3,null,{"a":[1]}]})");
  for (const char* text : {R"("red")", R"("green")", "3", "null", R"({"a":[1]})"}) {
    EXPECT_TRUE(accepts(colours, text)) << text;
  }
  EXPECT_FALSE(accepts(colours, R"("blue")"));
  EXPECT_FALSE(accepts(colours, R"("re")"));
  EXPECT_FALSE(accepts(colours, "3.0"));
  Grammar constant = compile(R"({"const":"fixed \"one\""})");
  EXPECT_TRUE(accepts(constant, R"("fixed \"one\"")"));
  EXPECT_FALSE(accepts(constant, R"("fixed")"));
  Grammar typed_enum = compile(R"({"type":"string","enum":["a",1]})");
  EXPECT_TRUE(accepts(typed_enum, R"("a")"));
  EXPECT_FALSE(accepts(typed_enum, "1"));
  Grammar nullable = compile(R"({"type":["string","null"]})");
  EXPECT_TRUE(accepts(nullable, R"("x")"));
  EXPECT_TRUE(accepts(nullable, "null"));
  EXPECT_FALSE(accepts(nullable, "0"));
  Grammar any_of = compile(R"({"anyOf":[{"type":"integer"},{"type":"object","properties":
      {"x":{"type":"number"}},"required":["x"]}]})");
  EXPECT_TRUE(accepts(any_of, "-12"));
  EXPECT_TRUE(accepts(any_of, R"({"x":1.5E+2})"));
  EXPECT_FALSE(accepts(any_of, "1.5"));
  EXPECT_FALSE(accepts(any_of, "{}"));
}

TEST(JsonSchema, NumbersAreJsonNumbersOfBoundedLength) {
  Grammar number = compile(R"({"type":"number"})");
  for (const char* text : {"0", "-0", "12", "-3.25", "1e5", "2E-07", "6.02e+23"}) {
    EXPECT_TRUE(accepts(number, text)) << text;
  }
  for (const char* text : {"01", "+1", ".5", "1.", "1e", "--1", "1e123", "12345678901234567"}) {
    EXPECT_FALSE(accepts(number, text)) << text;
  }
  Grammar integer = compile(R"({"type":"integer"})");
  EXPECT_TRUE(accepts(integer, "-1234567890123456"));
  EXPECT_FALSE(accepts(integer, "1.0"));
  EXPECT_FALSE(accepts(integer, "1e3"));
  Grammar boolean = compile(R"({"type":"boolean"})");
  EXPECT_TRUE(accepts(boolean, "true"));
  EXPECT_TRUE(accepts(boolean, "false"));
  EXPECT_FALSE(accepts(boolean, "True"));
}

TEST(JsonSchema, ReferencesResolveIntoDefsAndRecurse) {
  Grammar tree = compile(R"({"$defs":{"node":{"type":"object","properties":{
      "value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["value"]}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(accepts(tree, R"({"value":1})"));
  EXPECT_TRUE(accepts(tree, R"({"value":1,"children":[{"value":2,"children":[{"value":3}]}]})"));
  EXPECT_FALSE(accepts(tree, R"({"value":1,"children":[{}]})"));
  Grammar root = compile(R"({"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},
      {"type":"null"}]}},"required":["next"]})");
  EXPECT_TRUE(accepts(root, R"({"next":{"next":null}})"));
  EXPECT_FALSE(accepts(root, R"({"next":{}})"));
  Grammar definitions = compile(R"({"definitions":{"a~b/c":{"const":1}},
      "$ref":"#/definitions/a~0b~1c"})");
  EXPECT_TRUE(accepts(definitions, "1"));
  EXPECT_FALSE(accepts(definitions, "2"));
}

TEST(JsonSchema, JsonObjectTakesAnyObjectOnly) {
  Grammar grammar = json_object_grammar();
  EXPECT_TRUE(accepts(grammar, "{}"));
  EXPECT_TRUE(accepts(grammar, R"({"a":[1,{"b":null}],"c":"d"})"));
  EXPECT_FALSE(accepts(grammar, "[]"));
  EXPECT_FALSE(accepts(grammar, "1"));
  EXPECT_FALSE(accepts(grammar, R"({"a"})"));
}

TEST(JsonSchema, RefusesWhatItCannotGenerateNamingTheKeywordAndWhere) {
  EXPECT_EQ(compile_error(R"({"type":"object","properties":{"name":{"type":"string",
      "pattern":"^a"}}})"),
            "'pattern' is not supported (at #/properties/name)");
  EXPECT_EQ(compile_error(R"({"type":"string","format":"date"})"),
            "'format' is not supported (at #)");
  EXPECT_EQ(compile_error(R"({"$ref":"#/$defs/missing"})"),
            "'$ref' '#/$defs/missing' does not resolve (references must be JSON pointers into "
            "this schema, such as '#/$defs/name') (at #)");
  EXPECT_EQ(compile_error(R"({"$ref":"https://example.com/schema"})").substr(0, 43),
            "'$ref' 'https://example.com/schema' does no");
  EXPECT_EQ(compile_error(R"({"type":"strin"})"),
            "'type' 'strin' is not one of object, array, string, number, integer, boolean, null "
            "(at #)");
  EXPECT_EQ(compile_error(R"({"type":3})"),
            "'type' must be a name or a non-empty list of names (at #)");
  EXPECT_EQ(compile_error(R"({"type":"object","properties":[]})"),
            "'properties' must be an object (at #)");
  EXPECT_EQ(compile_error(R"({"type":"object","properties":{"a":{}},"required":["b"]})"),
            "required property 'b' is not in 'properties' (additional properties are not "
            "generated) (at #)");
  EXPECT_EQ(compile_error(R"({"type":"array","minItems":3,"maxItems":2})"),
            "'minItems' is greater than 'maxItems' (at #)");
  EXPECT_EQ(compile_error(R"({"type":"array","maxItems":-1})"),
            "'maxItems' must be a non-negative integer (at #)");
  EXPECT_EQ(compile_error(R"({"type":"array","maxItems":5000})"),
            "'maxItems' above 1024 is not supported (at #)");
  EXPECT_EQ(compile_error(R"({"type":"object","properties":{"a":"string"}})"),
            "expected a schema (an object), but got string (at #/properties/a)");
  EXPECT_EQ(compile_error(R"({"enum":[]})"), "'enum' must be a non-empty array (at #)");
  EXPECT_EQ(compile_error(R"({"type":"integer","enum":["a"]})"),
            "no value of 'enum' or 'const' fits the schema (at #)");
  EXPECT_EQ(compile_error(R"({"anyOf":[{"type":"null"}],"type":"object"})"),
            "'anyOf' beside 'type' is not supported (at #)");
  EXPECT_EQ(compile_error(R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})"),
            "the schema's references loop without a value between them (at #)");
  EXPECT_EQ(compile_error(R"({"$ref":"#"})"),
            "the schema has no JSON instance of bounded size (a required property or item "
            "recurses without end) (at #)");
  EXPECT_EQ(compile_error(R"({"type":"object","properties":{"self":{"$ref":"#"}},
      "required":["self"]})"),
            "the schema has no JSON instance of bounded size (a required property or item "
            "recurses without end) (at #)");
  EXPECT_EQ(compile_error("false"), "the schema false matches nothing (at #)");
}

TEST(JsonSchema, RandomSentencesParseAsJsonOfTheRightShape) {
  Grammar grammar = compile(R"({"type":"object","properties":{"id":{"type":"integer"},
      "score":{"type":["number","null"]},"name":{"type":"string"},"ok":{"type":"boolean"},
      "items":{"type":"array","items":{"enum":["a","b"]},"maxItems":4},"any":{}},
      "required":["id","name"]})");
  std::mt19937 random(5);
  for (int round = 0; round < 300; ++round) {
    const std::string text = random_sentence(grammar, random, random() % 200);
    ASSERT_TRUE(accepts(grammar, text));
    nlohmann::json parsed;
    ASSERT_NO_THROW(parsed = nlohmann::json::parse(text)) << text;
    ASSERT_TRUE(parsed.is_object()) << text;
    EXPECT_TRUE(parsed["id"].is_number_integer()) << text;
    EXPECT_TRUE(parsed["name"].is_string()) << text;
    if (parsed.contains("items")) EXPECT_LE(parsed["items"].size(), 4u) << text;
    for (const auto& [key, value] : parsed.items()) {
      EXPECT_TRUE(key == "id" || key == "score" || key == "name" || key == "ok" || key == "items" ||
                  key == "any")
          << text;
    }
  }
}

TEST(TokenTrie, MaskEqualsTheTokenByTokenCheckOnQwen) {
  const Tokenizer& tokenizer = testing::qwen_tokenizer();
  const TokenTrie trie = TokenTrie::from_tokenizer(tokenizer);
  Grammar grammar = compile(R"({"type":"object","properties":{"name":{"type":"string"},
      "n":{"type":"integer"}},"required":["name","n"]})");
  GrammarMatcher matcher(grammar);
  // States along a sentence: the start, inside a key, inside a string value, before a number.
  for (const char* prefix : {"", "{\"na", "{\"name\": \"x", "{\"name\":\"\",\"n\":"}) {
    const int32_t state = matcher.next(matcher.initial_state(), std::string(prefix));
    ASSERT_NE(state, GrammarMatcher::kDead) << prefix;
    std::vector<uint64_t> mask;
    trie.allowed(matcher, state, Grammar::kUnbounded, mask);
    size_t allowed = 0;
    for (uint32_t id = 0; id < tokenizer.vocab_size(); ++id) {
      const bool expected = !tokenizer.is_special(id) && !tokenizer.token_bytes(id).empty() &&
                            matcher.next(state, tokenizer.token_bytes(id)) != GrammarMatcher::kDead;
      const bool got = (mask[id >> 6] >> (id & 63)) & 1;
      ASSERT_EQ(got, expected) << "prefix " << prefix << " token " << id;
      allowed += got;
    }
    EXPECT_GT(allowed, 0u) << prefix;
  }
}

}  // namespace
}  // namespace fornace::text
