// The GPT-2 byte-level alphabet: each byte is shown as a printable code point in vocab entries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fornace::text {

// The byte-level text of raw bytes (" world" becomes "Ġworld").
std::string to_byte_level(std::string_view bytes);

// Appends the raw bytes of a token's byte-level text to `out`. A token with any character outside
// the alphabet (an added token such as "<|im_start|>" is inside it) keeps its own UTF-8 bytes, as
// the Hugging Face ByteLevel decoder does (so does text that is not valid UTF-8).
void append_from_byte_level(std::string_view text, std::string& out);

}  // namespace fornace::text
