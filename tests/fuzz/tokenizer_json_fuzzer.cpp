// Fuzzes tokenizer.json loading (Tokenizer::from_json); a tokenizer that loads then encodes and
// decodes a fixed text, which must give ids in range and valid UTF-8.
#include <string_view>

#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fornace;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_only_fornace_errors([&] {
    Tokenizer tokenizer = Tokenizer::from_json(text, "tokenizer.json");
    std::vector<uint32_t> ids =
        tokenizer.encode("Hello world, <|im_end|> 123 caf\u00e9 \u4f60\u597d!");
    for (uint32_t id : ids) fuzz::check(id < tokenizer.vocab_size(), "encoded ids are in range");
    fuzz::check(fuzz::is_valid_utf8(tokenizer.decode(ids)), "decode gives valid UTF-8");
  });
  return 0;
}
