// Shared helpers for the tokenizer tests: the Qwen tokenizer (loaded once) and test data files.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

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
  return std::string(FORNACE_SOURCE_DIR) + "/" + relative;
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

}  // namespace fornace::testing
