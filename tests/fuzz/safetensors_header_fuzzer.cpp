// Fuzzes the safetensors header parser and validator (SafetensorsFile::parse_header).
//
// Input: a little-endian uint32 `data_bytes`, then the start of a file (the 8-byte header length,
// the JSON header, maybe some data). The file the parser sees is that start followed by zero
// bytes up to `data_bytes` more, so real headers of large checkpoints work as seeds without
// megabytes of data. The file is placed at the end of a mapping that a no-access guard page
// follows, so any read past the end of the file faults.
#include "fuzz_support.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fornace;
  fuzz::GuardedFile guarded(data, size);
  if (!guarded.data()) return 0;
  const char* file = guarded.data();
  size_t file_bytes = guarded.size();

  fuzz::expect_only_fornace_errors([&] {
    std::vector<TensorEntry> entries = SafetensorsFile::parse_header(file, file_bytes, "fuzz");
    // What the validator promises: each range holds shape x dtype size bytes inside the data
    // section, and the non-empty ranges are sorted and do not overlap.
    uint64_t header_bytes = 0;
    for (int index = 7; index >= 0; --index) {
      header_bytes = (header_bytes << 8) | static_cast<unsigned char>(file[index]);
    }
    size_t data_bytes = file_bytes - 8 - header_bytes;
    size_t previous_end = 0;
    for (const TensorEntry& entry : entries) {
      fuzz::check(entry.begin <= entry.end && entry.end <= data_bytes, "range inside the data");
      uint64_t bytes = dtype_size(entry.dtype);
      for (int64_t extent : entry.shape) bytes *= static_cast<uint64_t>(extent);
      fuzz::check(bytes == entry.end - entry.begin, "range size equals shape x dtype size");
      if (entry.begin == entry.end) continue;
      fuzz::check(entry.begin >= previous_end, "ranges do not overlap");
      previous_end = entry.end;
    }
  });
  return 0;
}
