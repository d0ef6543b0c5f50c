// The normalizer steps of tokenizer.json that Fornace supports (NFC and Replace of a literal
// string), and SentencePiece's prefix "▁" for GGUF vocabularies (Hugging Face's Prepend).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fornace::text {

// Appends `text` to `out` with every occurrence of `pattern` (non-empty), left to right, replaced
// by `content`.
void append_replaced(std::string_view text, std::string_view pattern, std::string_view content,
                     std::string& out);

class Normalizer {
 public:
  void add_nfc() { steps_.push_back({Kind::nfc, {}, {}}); }
  // Replaces every occurrence of `pattern` (non-empty, literal), left to right, with `content`.
  void add_replace(std::string pattern, std::string content) {
    steps_.push_back({Kind::replace, std::move(pattern), std::move(content)});
  }
  // Puts `prefix` before a text that is not empty.
  void add_prepend(std::string prefix) { steps_.push_back({Kind::prepend, std::move(prefix), {}}); }
  bool empty() const { return steps_.empty(); }
  bool operator==(const Normalizer&) const = default;

  // `text` (valid UTF-8) after every step, in order: `text` itself when nothing changes it, else
  // a view of `buffer`.
  std::string_view normalize(std::string_view text, std::string& buffer) const;

 private:
  enum class Kind { nfc, replace, prepend };
  struct Step {
    Kind kind;
    std::string pattern, content;  // Prepend's prefix is its pattern.
    bool operator==(const Step&) const = default;
  };
  std::vector<Step> steps_;
};

}  // namespace fornace::text
