// The normalizer steps of tokenizer.json that Fornace supports: NFC and Replace of a literal
// string.
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
  bool empty() const { return steps_.empty(); }

  // `text` (valid UTF-8) after every step, in order: `text` itself when nothing changes it, else
  // a view of `buffer`.
  std::string_view normalize(std::string_view text, std::string& buffer) const;

 private:
  enum class Kind { nfc, replace };
  struct Step {
    Kind kind;
    std::string pattern, content;
  };
  std::vector<Step> steps_;
};

}  // namespace fornace::text
