// UTF-8 validation, lossy decoding and NFC (through utf8proc) for the tokenizer.
#include "text/utf8.h"

#include <utf8proc.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/error.h"

namespace fornace::text {

Utf8Status classify_utf8(std::string_view bytes, size_t position, size_t& length) {
  const auto byte_at = [&](size_t index) { return static_cast<uint8_t>(bytes[index]); };
  uint8_t lead = byte_at(position);
  if (lead < 0x80) {
    length = 1;
    return Utf8Status::complete;
  }
  size_t expected = 0;
  uint8_t second_low = 0x80, second_high = 0xBF;  // Range allowed for the second byte.
  if (lead >= 0xC2 && lead <= 0xDF) {
    expected = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    expected = 3;
    if (lead == 0xE0) second_low = 0xA0;   // No overlong forms.
    if (lead == 0xED) second_high = 0x9F;  // No surrogates.
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    expected = 4;
    if (lead == 0xF0) second_low = 0x90;   // No overlong forms.
    if (lead == 0xF4) second_high = 0x8F;  // Nothing above U+10FFFF.
  } else {
    length = 1;
    return Utf8Status::invalid;
  }
  size_t present = 1;
  while (present < expected) {
    if (position + present >= bytes.size()) {
      length = present;
      return Utf8Status::incomplete;
    }
    uint8_t next = byte_at(position + present);
    uint8_t low = present == 1 ? second_low : 0x80;
    uint8_t high = present == 1 ? second_high : 0xBF;
    if (next < low || next > high) {
      length = present;
      return Utf8Status::invalid;
    }
    ++present;
  }
  length = expected;
  return Utf8Status::complete;
}

bool is_ascii(std::string_view bytes) {
  size_t index = 0;
  for (; index + 8 <= bytes.size(); index += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + index, 8);
    if (word & 0x8080808080808080ull) return false;
  }
  for (; index < bytes.size(); ++index) {
    if (static_cast<uint8_t>(bytes[index]) >= 0x80) return false;
  }
  return true;
}

size_t first_invalid_utf8(std::string_view bytes) {
  size_t position = 0;
  while (position < bytes.size()) {
    if (position + 8 <= bytes.size()) {
      uint64_t word;
      std::memcpy(&word, bytes.data() + position, 8);
      if (!(word & 0x8080808080808080ull)) {
        position += 8;
        continue;
      }
    }
    size_t length = 0;
    if (classify_utf8(bytes, position, length) != Utf8Status::complete) return position;
    position += length;
  }
  return std::string_view::npos;
}

void append_utf8_lossy(std::string_view bytes, std::string& out) {
  static constexpr std::string_view replacement = "\xEF\xBF\xBD";
  size_t position = 0;
  size_t clean_start = 0;  // Start of the run of valid bytes not yet copied.
  while (position < bytes.size()) {
    size_t length = 0;
    if (classify_utf8(bytes, position, length) == Utf8Status::complete) {
      position += length;
      continue;
    }
    out.append(bytes.substr(clean_start, position - clean_start));
    out.append(replacement);
    position += length;
    clean_start = position;
  }
  out.append(bytes.substr(clean_start));
}

void append_code_point(uint32_t code_point, std::string& out) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

std::string to_nfc(std::string_view text) {
  if (is_ascii(text)) return std::string(text);
  utf8proc_uint8_t* normalized = nullptr;
  // An explicit length (no NULLTERM) keeps U+0000 characters in the text.
  utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &normalized,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (length < 0) fail("NFC normalization failed: ", utf8proc_errmsg(length));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(normalized, &std::free);
  return std::string(reinterpret_cast<const char*>(normalized), static_cast<size_t>(length));
}

}  // namespace fornace::text
