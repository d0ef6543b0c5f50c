// Shared helpers for the tokenizer tests: the Qwen tokenizer (loaded once), test data files, and
// the golden cases of the Hugging Face tokenizers library with the checks every tokenizer shares.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/source_paths.h"
#include "text/tokenizer.h"

namespace fornace::testing {

inline std::string read_test_file(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) ADD_FAILURE() << "cannot open " << path;
  std::stringstream contents;
  contents << stream.rdbuf();
  return contents.str();
}

inline std::string source_path(const std::string& relative) {
  return fornace::test_paths::source(relative);
}

// The Qwen tokenizer from models/ (scripts/get-tokenizer.sh puts it there).
inline const Tokenizer& qwen_tokenizer() {
  static const Tokenizer tokenizer = [] {
    std::string directory = source_path("models");
    if (!std::ifstream(directory + "/tokenizer.json")) {
      ADD_FAILURE() << directory << "/tokenizer.json is missing: run scripts/get-tokenizer.sh";
    }
    return Tokenizer::load(directory);
  }();
  return tokenizer;
}

// The GPT-2 byte-level alphabet, written out from its definition: printable Latin-1 bytes stand
// for themselves, the rest take U+0100 onwards in byte order.
inline std::string byte_level_character(int byte) {
  static const std::vector<std::string> alphabet = [] {
    std::vector<std::string> characters(256);
    int next = 256;
    for (int value = 0; value < 256; ++value) {
      bool printable = (value >= 33 && value <= 126) || (value >= 161 && value <= 172) ||
                       (value >= 174 && value <= 255);
      int code_point = printable ? value : next++;
      std::string utf8;
      if (code_point < 0x80) {
        utf8 += static_cast<char>(code_point);
      } else {
        utf8 += static_cast<char>(0xC0 | (code_point >> 6));
        utf8 += static_cast<char>(0x80 | (code_point & 0x3F));
      }
      characters[value] = utf8;
    }
    return characters;
  }();
  return alphabet[byte];
}

// One line of a tests/data/tokenizer-golden*.jsonl file.
struct GoldenCase {
  std::string name;
  std::string text;  // From `text`, or read from the file `text_file` names.
  std::vector<uint32_t> ids;
  std::string nfc;  // Only in Qwen's file.
  std::string decoded;
  std::string decoded_skip_special;
  std::vector<std::string> decoded_each;  // Empty for long cases.
};

// The cases of a golden file (a path relative to the source tree). A case with a `text_file`
// (the corpus) decodes to its text, with or without special tokens.
inline std::vector<GoldenCase> read_golden_cases(const std::string& relative_path) {
  std::vector<GoldenCase> cases;
  std::istringstream lines(read_test_file(source_path(relative_path)));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    nlohmann::json record = nlohmann::json::parse(line);
    GoldenCase golden;
    golden.name = record["name"];
    golden.ids = record["ids"].get<std::vector<uint32_t>>();
    if (record.contains("text_file")) {
      golden.text = read_test_file(source_path(record["text_file"]));
      golden.decoded = golden.decoded_skip_special = golden.text;
    } else {
      golden.text = record["text"];
      golden.decoded = record["decoded"];
      golden.decoded_skip_special = record["decoded_skip_special"];
    }
    if (record.contains("nfc")) golden.nfc = record["nfc"];
    if (record.contains("decoded_each")) {
      golden.decoded_each = record["decoded_each"].get<std::vector<std::string>>();
    }
    cases.push_back(std::move(golden));
  }
  return cases;
}

// The same, read once per process.
inline const std::vector<GoldenCase>& cached_golden_cases(const std::string& relative_path) {
  static std::map<std::string, std::vector<GoldenCase>> by_path;
  auto found = by_path.find(relative_path);
  if (found == by_path.end())
    found = by_path.emplace(relative_path, read_golden_cases(relative_path)).first;
  return found->second;
}

// decode() of the reference ids gives the reference text, with and without special tokens.
inline void expect_reference_decodes(const Tokenizer& tokenizer,
                                     const std::vector<GoldenCase>& cases) {
  for (const GoldenCase& golden : cases) {
    EXPECT_EQ(tokenizer.decode(golden.ids), golden.decoded) << "case: " << golden.name;
    EXPECT_EQ(tokenizer.decode(golden.ids, true), golden.decoded_skip_special)
        << "case: " << golden.name;
  }
}

// Each id decoded alone gives the reference's text for it (U+FFFD for partial characters);
// returns how many ids were checked.
inline size_t expect_reference_decodes_of_each_id(const Tokenizer& tokenizer,
                                                  const std::vector<GoldenCase>& cases) {
  size_t checked = 0;
  for (const GoldenCase& golden : cases) {
    for (size_t index = 0; index < golden.decoded_each.size(); ++index) {
      EXPECT_EQ(tokenizer.decode({golden.ids[index]}), golden.decoded_each[index])
          << "case: " << golden.name << ", token " << index;
      ++checked;
    }
  }
  return checked;
}

// The incremental decoder's pieces concatenate to the reference text.
inline void expect_incremental_decodes(const Tokenizer& tokenizer,
                                       const std::vector<GoldenCase>& cases) {
  for (const GoldenCase& golden : cases) {
    for (bool skip_special : {false, true}) {
      IncrementalDecoder decoder(tokenizer, skip_special);
      std::string streamed;
      for (uint32_t id : golden.ids) streamed += decoder.push(id);
      streamed += decoder.flush();
      EXPECT_EQ(streamed, skip_special ? golden.decoded_skip_special : golden.decoded)
          << "case: " << golden.name;
    }
  }
}

}  // namespace fornace::testing
