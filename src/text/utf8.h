// UTF-8 helpers for the tokenizer: validation with byte offsets, lossy decoding, NFC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fornace::text {

// What a run of bytes starting at some position holds.
enum class Utf8Status { complete, incomplete, invalid };

// Classifies the sequence at `bytes[position]`: a whole character (its length in `length`), the
// start of one cut short by the end of `bytes` (length = the bytes present), or an invalid
// maximal subpart (length = the bytes to replace with one U+FFFD, as the Unicode standard and
// Rust's from_utf8_lossy count them).
Utf8Status classify_utf8(std::string_view bytes, size_t position, size_t& length);

// The offset of the first byte that is not part of valid UTF-8, or npos when all of it is.
size_t first_invalid_utf8(std::string_view bytes);

// Appends `bytes` to `out`, replacing each invalid maximal subpart (and an incomplete sequence
// at the end) with U+FFFD.
void append_utf8_lossy(std::string_view bytes, std::string& out);

// True when every byte is below 0x80.
bool is_ascii(std::string_view bytes);

// Appends one code point as UTF-8.
void append_code_point(uint32_t code_point, std::string& out);

// `text` (valid UTF-8) in Normalization Form C. ASCII text is returned as it is.
std::string to_nfc(std::string_view text);

}  // namespace fornace::text
