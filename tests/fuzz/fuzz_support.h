// Helpers shared by the libFuzzer targets: the expected-error guard, UTF-8 checks, the Qwen
// tokenizer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "text/tokenizer.h"

namespace fornace::fuzz {

// Runs `body`; a fornace::Error is the expected answer to bad input and is swallowed. Any other
// exception escapes, and libFuzzer reports it as a crash.
template <typename Body>
void expect_only_fornace_errors(Body&& body) {
  try {
    body();
  } catch (const Error&) {
  }
}

// Stops the run with a message: a broken invariant is a finding, like a crash.
[[noreturn]] inline void invariant_failed(const char* what) {
  std::fprintf(stderr, "fuzz invariant failed: %s\n", what);
  std::abort();
}

inline void check(bool condition, const char* what) {
  if (!condition) invariant_failed(what);
}

// True when `text` is well-formed UTF-8 (shortest forms, no surrogates, at most U+10FFFF).
inline bool is_valid_utf8(std::string_view text) {
  size_t index = 0;
  while (index < text.size()) {
    unsigned char lead = static_cast<unsigned char>(text[index]);
    size_t length = 0;
    uint32_t minimum = 0;
    uint32_t code_point = 0;
    if (lead < 0x80) {
      ++index;
      continue;
    } else if ((lead & 0xe0) == 0xc0) {
      length = 2, minimum = 0x80, code_point = lead & 0x1f;
    } else if ((lead & 0xf0) == 0xe0) {
      length = 3, minimum = 0x800, code_point = lead & 0x0f;
    } else if ((lead & 0xf8) == 0xf0) {
      length = 4, minimum = 0x10000, code_point = lead & 0x07;
    } else {
      return false;
    }
    if (index + length > text.size()) return false;
    for (size_t offset = 1; offset < length; ++offset) {
      unsigned char next = static_cast<unsigned char>(text[index + offset]);
      if ((next & 0xc0) != 0x80) return false;
      code_point = (code_point << 6) | (next & 0x3f);
    }
    if (code_point < minimum || code_point > 0x10ffff) return false;
    if (code_point >= 0xd800 && code_point <= 0xdfff) return false;
    index += length;
  }
  return true;
}

// The Qwen tokenizer, loaded once: from $FORNACE_TOKENIZER_DIR, else <source>/models (where
// scripts/get-tokenizer.sh puts tokenizer.json).
inline const Tokenizer& qwen_tokenizer() {
  static const Tokenizer tokenizer = [] {
    const char* directory = std::getenv("FORNACE_TOKENIZER_DIR");
    std::string path = directory ? directory : FORNACE_SOURCE_DIR "/models";
    try {
      return Tokenizer::load(path);
    } catch (const Error& error) {
      std::fprintf(stderr, "cannot load the tokenizer (set FORNACE_TOKENIZER_DIR): %s\n",
                   error.what());
      std::exit(1);
    }
  }();
  return tokenizer;
}

}  // namespace fornace::fuzz
