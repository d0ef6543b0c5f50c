// The tokenizer.json decoder: how the texts of tokens become text, one token at a time.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fornace::text {

// Either ByteLevel (token texts in the GPT-2 byte alphabet) or the SentencePiece-style sequence:
// Replace steps on each token's text, then ByteFallback ("<0xNN>" tokens are bytes; a run of
// them is its UTF-8 text, or one U+FFFD per byte when it is not valid), then Fuse.
class TokenDecoder {
 public:
  bool byte_level = true;
  std::vector<std::pair<std::string, std::string>> replacements;  // Pattern, content; in order.
  bool byte_fallback = false;
  // Drop one space at the start of the text: the one SentencePiece's prefix "▁" stands for.
  bool strip_leading_space = false;

  // Appends to `text` what the token with text `token` adds once it is final; `pending` holds
  // what is not (bytes of an unfinished character, or a run of byte tokens) between calls.
  void push(std::string_view token, std::string& pending, std::string& text) const;
  // Appends what `pending` still holds, as decode() at the end of the ids would.
  void finish(std::string& pending, std::string& text) const;
  // Applies strip_leading_space to the first text that comes out (non-empty `text` while
  // `at_start`, which then turns false).
  void strip_start(std::string& text, bool& at_start) const {
    if (!at_start || text.empty()) return;
    at_start = false;
    if (strip_leading_space && text[0] == ' ') text.erase(0, 1);
  }
  // The raw bytes a token stands for.
  void append_bytes(std::string_view token, std::string& bytes) const;
};

// The byte of a "<0xNN>" token, or -1 for any other text.
int byte_fallback_value(std::string_view token);

}  // namespace fornace::text
