// The byte-level alphabet tables, built once: printable Latin-1 bytes stand for themselves and
// the other bytes take code points from 256 up, in byte order.
#include "text/byte_level.h"

#include <array>

#include "text/utf8.h"

namespace fornace::text {
namespace {

struct ByteLevelTables {
  std::array<uint32_t, 256> code_point_of_byte{};
  std::array<int16_t, 512> byte_of_code_point{};  // -1 for code points outside the alphabet.

  ByteLevelTables() {
    byte_of_code_point.fill(-1);
    uint32_t next_extra = 256;
    for (uint32_t byte = 0; byte < 256; ++byte) {
      bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                       (byte >= 0xAE && byte <= 0xFF);
      uint32_t code_point = printable ? byte : next_extra++;
      code_point_of_byte[byte] = code_point;
      byte_of_code_point[code_point] = static_cast<int16_t>(byte);
    }
  }
};

const ByteLevelTables& tables() {
  static const ByteLevelTables instance;
  return instance;
}

// Decodes the code point at `text[position]` and advances `position`; -1 for invalid UTF-8.
int64_t next_code_point(std::string_view text, size_t& position) {
  size_t length = 0;
  if (classify_utf8(text, position, length) != Utf8Status::complete) return -1;
  uint8_t lead = static_cast<uint8_t>(text[position]);
  int64_t code_point = length == 1   ? lead
                       : length == 2 ? lead & 0x1F
                       : length == 3 ? lead & 0x0F
                                     : lead & 0x07;
  for (size_t index = 1; index < length; ++index) {
    code_point = (code_point << 6) | (static_cast<uint8_t>(text[position + index]) & 0x3F);
  }
  position += length;
  return code_point;
}

}  // namespace

std::string to_byte_level(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (char byte : bytes)
    append_code_point(tables().code_point_of_byte[static_cast<uint8_t>(byte)], text);
  return text;
}

void append_from_byte_level(std::string_view text, std::string& out) {
  const ByteLevelTables& table = tables();
  size_t start = out.size();
  size_t position = 0;
  while (position < text.size()) {
    int64_t code_point = next_code_point(text, position);
    int byte = code_point >= 0 && code_point < static_cast<int64_t>(table.byte_of_code_point.size())
                   ? table.byte_of_code_point[code_point]
                   : -1;
    if (byte < 0) {
      out.resize(start);
      out.append(text);
      return;
    }
    out.push_back(static_cast<char>(byte));
  }
}

}  // namespace fornace::text
