// Helpers shared by the libFuzzer targets: the expected-error guard, guarded file bytes, UTF-8
// checks, the Qwen tokenizer.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/source_paths.h"
#include "core/error.h"
#include "text/tokenizer.h"

namespace fornace::fuzz {

// Runs `body`; a fornace::Error is the expected answer to bad input and is swallowed. Any other
// exception escapes, and libFuzzer reports it as a crash.
template <typename Body>
void expect_only_fornace_errors(Body&& body) {
  try {
    body();
  } catch (const Error&) {
  }
}

// Stops the run with a message: a broken invariant is a finding, like a crash.
[[noreturn]] inline void invariant_failed(const char* what) {
  std::fprintf(stderr, "fuzz invariant failed: %s\n", what);
  std::abort();
}

inline void check(bool condition, const char* what) {
  if (!condition) invariant_failed(what);
}

// The file that a file-format target parses. The input is a little-endian uint32 `extra`, then
// the start of a file; the file is that start followed by `extra` zero bytes (so headers of
// large files work as seeds without their data), placed at the end of a 64 MiB region that a
// no-access guard page follows, so any read past the end of the file faults. The bytes are
// zeroed again when this goes out of scope.
class GuardedFile {
 public:
  GuardedFile(const uint8_t* data, size_t size) {
    if (size < 4 || size - 4 > kRegionBytes) return;
    uint32_t extra = 0;
    for (int index = 3; index >= 0; --index) extra = (extra << 8) | data[index];
    prefix_bytes_ = size - 4;
    size_ = prefix_bytes_ + std::min<size_t>(extra, kRegionBytes - prefix_bytes_);
    data_ = region_end() - size_;
    std::memcpy(data_, data + 4, prefix_bytes_);
  }
  ~GuardedFile() {
    if (data_) std::memset(data_, 0, prefix_bytes_);
  }
  GuardedFile(const GuardedFile&) = delete;
  GuardedFile& operator=(const GuardedFile&) = delete;

  // Null when the input is shorter than the 4-byte `extra` or longer than the region.
  const char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kRegionBytes = size_t{64} << 20;

  // A zero-filled region followed by a guard page; pages never written cost no memory.
  static char* region_end() {
    static char* end = [] {
      size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
      void* base = ::mmap(nullptr, kRegionBytes + page, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (base == MAP_FAILED) invariant_failed("mmap of the file region failed");
      char* guard = static_cast<char*>(base) + kRegionBytes;
      ::mprotect(guard, page, PROT_NONE);
      return guard;
    }();
    return end;
  }

  char* data_ = nullptr;
  size_t size_ = 0;
  size_t prefix_bytes_ = 0;
};

// True when `text` is well-formed UTF-8 (shortest forms, no surrogates, at most U+10FFFF).
inline bool is_valid_utf8(std::string_view text) {
  size_t index = 0;
  while (index < text.size()) {
    unsigned char lead = static_cast<unsigned char>(text[index]);
    size_t length = 0;
    uint32_t minimum = 0;
    uint32_t code_point = 0;
    if (lead < 0x80) {
      ++index;
      continue;
    } else if ((lead & 0xe0) == 0xc0) {
      length = 2, minimum = 0x80, code_point = lead & 0x1f;
    } else if ((lead & 0xf0) == 0xe0) {
      length = 3, minimum = 0x800, code_point = lead & 0x0f;
    } else if ((lead & 0xf8) == 0xf0) {
      length = 4, minimum = 0x10000, code_point = lead & 0x07;
    } else {
      return false;
    }
    if (index + length > text.size()) return false;
    for (size_t offset = 1; offset < length; ++offset) {
      unsigned char next = static_cast<unsigned char>(text[index + offset]);
      if ((next & 0xc0) != 0x80) return false;
      code_point = (code_point << 6) | (next & 0x3f);
    }
    if (code_point < minimum || code_point > 0x10ffff) return false;
    if (code_point >= 0xd800 && code_point <= 0xdfff) return false;
    index += length;
  }
  return true;
}

// The Qwen tokenizer, loaded once: from $FORNACE_TOKENIZER_DIR, else <source>/models (where
// scripts/get-tokenizer.sh puts tokenizer.json).
inline const Tokenizer& qwen_tokenizer() {
  static const Tokenizer tokenizer = [] {
    const char* directory = std::getenv("FORNACE_TOKENIZER_DIR");
    std::string path = directory ? directory : fornace::test_paths::source("models");
    try {
      return Tokenizer::load(path);
    } catch (const Error& error) {
      std::fprintf(stderr, "cannot load the tokenizer (set FORNACE_TOKENIZER_DIR): %s\n",
                   error.what());
      std::exit(1);
    }
  }();
  return tokenizer;
}

}  // namespace fornace::fuzz
