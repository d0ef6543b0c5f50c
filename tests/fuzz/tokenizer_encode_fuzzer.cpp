// Fuzzes encoding arbitrary bytes with the Qwen tokenizer. Invalid UTF-8 must give an Error; valid
// text must give ids in range that decode back to the NFC form of the text.
#include <utf8proc.h>

#include <cstdlib>
#include <string_view>

#include "fuzz_support.h"

namespace {

std::string nfc(std::string_view text) {
  std::string input(text);
  utf8proc_uint8_t* composed =
      utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(input.c_str()));
  if (!composed) fornace::fuzz::invariant_failed("utf8proc_NFC failed on valid UTF-8");
  std::string result(reinterpret_cast<const char*>(composed));
  std::free(composed);
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fornace;
  const Tokenizer& tokenizer = fuzz::qwen_tokenizer();
  if (size == 0) return 0;
  // The first byte picks whether added tokens are parsed; the rest is the text.
  bool parse_special = data[0] & 1;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  bool valid = fuzz::is_valid_utf8(text);
  bool encoded = false;
  fuzz::expect_only_fornace_errors([&] {
    std::vector<uint32_t> ids = tokenizer.encode(text, parse_special);
    encoded = true;
    for (uint32_t id : ids) fuzz::check(id < tokenizer.vocab_size(), "encoded ids are in range");
    // NUL ends the C string that utf8proc_NFC reads, so the round trip skips text holding one.
    if (text.find('\0') == std::string_view::npos) {
      fuzz::check(tokenizer.decode(ids) == nfc(text), "decode(encode(text)) == NFC(text)");
    }
  });
  fuzz::check(encoded == valid, "encode accepts exactly the valid UTF-8");
  return 0;
}
