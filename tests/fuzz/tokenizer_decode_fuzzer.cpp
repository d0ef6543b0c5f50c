// Fuzzes decoding id sequences with the Qwen tokenizer, whole and through the incremental decoder:
// decode rejects ids out of range, the incremental decoder skips them, and all text is valid UTF-8.
#include <vector>

#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fornace;
  const Tokenizer& tokenizer = fuzz::qwen_tokenizer();
  if (size == 0) return 0;
  // The first byte picks skip_special; then each 3 bytes are one id, taken modulo a little more
  // than the vocabulary so that a few ids are out of range.
  bool skip_special = data[0] & 1;
  uint32_t id_limit = static_cast<uint32_t>(tokenizer.vocab_size()) + 64;
  std::vector<uint32_t> ids;
  for (size_t offset = 1; offset + 3 <= size; offset += 3) {
    uint32_t value = data[offset] | (data[offset + 1] << 8) | (data[offset + 2] << 16);
    ids.push_back(value % id_limit);
  }
  bool in_range = true;
  for (uint32_t id : ids) in_range = in_range && id < tokenizer.vocab_size();

  bool decoded = false;
  fuzz::expect_only_fornace_errors([&] {
    std::string text = tokenizer.decode(ids, skip_special);
    decoded = true;
    fuzz::check(fuzz::is_valid_utf8(text), "decode gives valid UTF-8");
  });
  fuzz::check(decoded == in_range, "decode rejects exactly the ids out of range");

  // Streaming a model's output never fails: an id the tokenizer lacks is a piece of no text.
  IncrementalDecoder decoder(tokenizer, skip_special);
  for (uint32_t id : ids) {
    fuzz::check(fuzz::is_valid_utf8(decoder.push(id)), "incremental pieces are valid UTF-8");
  }
  fuzz::check(fuzz::is_valid_utf8(decoder.flush()), "the flushed rest is valid UTF-8");
  return 0;
}
