// The decoder's two kinds, byte-level and SentencePiece-style, with streaming of partial text.
#include "text/decoder.h"

#include "text/byte_level.h"
#include "text/normalizer.h"
#include "text/utf8.h"

namespace fornace::text {
namespace {

constexpr std::string_view replacement_character = "\xEF\xBF\xBD";

int hex_digit(char digit) {
  if (digit >= '0' && digit <= '9') return digit - '0';
  if (digit >= 'a' && digit <= 'f') return digit - 'a' + 10;
  if (digit >= 'A' && digit <= 'F') return digit - 'A' + 10;
  return -1;
}

// The token's text after every Replace step, appended to `out`.
void append_replacing_all(std::string_view token,
                          const std::vector<std::pair<std::string, std::string>>& replacements,
                          std::string& out) {
  if (replacements.empty()) {
    out.append(token);
    return;
  }
  std::string current(token), next;
  for (const auto& [pattern, content] : replacements) {
    next.clear();
    append_replaced(current, pattern, content, next);
    current.swap(next);
  }
  out.append(current);
}

// A finished run of byte tokens, as Hugging Face's ByteFallback turns it into text.
void flush_byte_run(std::string& run, std::string& text) {
  if (first_invalid_utf8(run) == std::string::npos) {
    text.append(run);
  } else {
    for (size_t index = 0; index < run.size(); ++index) text.append(replacement_character);
  }
  run.clear();
}

}  // namespace

int byte_fallback_value(std::string_view token) {
  // Rust's u8::from_str_radix, which the reference uses, also takes a leading '+'.
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return -1;
  if (token[3] == '+') return hex_digit(token[4]);
  int high = hex_digit(token[3]), low = hex_digit(token[4]);
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

void TokenDecoder::push(std::string_view token, std::string& pending, std::string& text) const {
  if (byte_level) {
    append_from_byte_level(token, pending);
    // Emit everything up to an unfinished sequence at the end; invalid bytes become U+FFFD now,
    // exactly as decoding all of it at once would replace them.
    size_t position = 0, keep_from = pending.size();
    while (position < pending.size()) {
      size_t length = 0;
      if (classify_utf8(pending, position, length) == Utf8Status::incomplete) {
        keep_from = position;
        break;
      }
      position += length;
    }
    append_utf8_lossy(std::string_view(pending).substr(0, keep_from), text);
    pending.erase(0, keep_from);
    return;
  }
  if (byte_fallback) {
    int byte = byte_fallback_value(token);
    if (byte >= 0) {
      pending.push_back(static_cast<char>(byte));
      return;
    }
    if (!pending.empty()) flush_byte_run(pending, text);
  }
  append_replacing_all(token, replacements, text);
}

void TokenDecoder::finish(std::string& pending, std::string& text) const {
  if (byte_level) {
    append_utf8_lossy(pending, text);
    pending.clear();
  } else if (!pending.empty()) {
    flush_byte_run(pending, text);
  }
}

void TokenDecoder::append_bytes(std::string_view token, std::string& bytes) const {
  if (byte_level) {
    append_from_byte_level(token, bytes);
    return;
  }
  int byte = byte_fallback ? byte_fallback_value(token) : -1;
  if (byte >= 0)
    bytes.push_back(static_cast<char>(byte));
  else
    append_replacing_all(token, replacements, bytes);
}

}  // namespace fornace::text
