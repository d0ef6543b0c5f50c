// Finds added tokens ("<|im_start|>", ...) in text: the leftmost match, longest at that place.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fornace::text {

class AddedTokenMatcher {
 public:
  struct Match {
    size_t start;
    size_t length;
    uint32_t id;
  };

  void add(std::string_view content, uint32_t id, bool special);
  bool empty() const { return tokens_.empty(); }

  // The first added token at or after `from`. Special tokens count only when
  // `include_special` is set; the others always do (as with Hugging Face's
  // split_special_tokens).
  std::optional<Match> find(std::string_view text, size_t from, bool include_special) const;

 private:
  struct Token {
    std::string content;
    uint32_t id;
    bool special;
  };
  std::vector<Token> tokens_;  // Longest first.
  std::array<bool, 256> is_first_byte_{};
};

}  // namespace fornace::text
