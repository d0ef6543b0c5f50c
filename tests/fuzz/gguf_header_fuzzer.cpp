// Fuzzes the GGUF parser and validator (GgufFile::parse) and the metadata getters.
//
// Input: a little-endian uint32 `extra`, then the start of a file (header, metadata, tensor
// infos, maybe some data), as fuzz::GuardedFile takes it: tensor infos of large models work as
// seeds without their data, and any read past the end of the file faults.
#include <algorithm>

#include "fuzz_support.h"
#include "io/gguf.h"

namespace {

// Calls every getter on every key; each either answers or throws fornace::Error.
void read_every_key(const fornace::GgufFile& file) {
  using namespace fornace;
  for (const GgufKeyValue& entry : file.metadata()) {
    fuzz::check(file.find(entry.key) == &entry.value, "find returns the listed value");
    fuzz::check(!entry.value.describe().empty(), "describe says something");
    const std::string& key = entry.key;
    fuzz::expect_only_fornace_errors([&] { file.get_string(key); });
    fuzz::expect_only_fornace_errors([&] { file.get_u64(key); });
    fuzz::expect_only_fornace_errors([&] { file.get_i64(key); });
    fuzz::expect_only_fornace_errors([&] { file.get_f64(key); });
    fuzz::expect_only_fornace_errors([&] { file.get_bool(key); });
    fuzz::expect_only_fornace_errors([&] { file.get_string_array(key); });
    fuzz::expect_only_fornace_errors([&] { file.get_f32_array(key); });
    fuzz::expect_only_fornace_errors([&] { file.get_i32_array(key); });
  }
}

// What the validator promises about tensors: known geometry, aligned offsets, data inside the
// file, and no two tensors sharing a byte.
void check_tensors(const fornace::GgufFile& file, const char* begin, size_t size) {
  using namespace fornace;
  fuzz::check(file.data_offset() % file.alignment() == 0, "data section aligned");
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& info : file.tensors()) {
    fuzz::check(file.find_tensor(info.name) == &info, "find_tensor returns the listed tensor");
    fuzz::check(!info.dims.empty() && info.dims.size() <= 4, "1 to 4 dims");
    fuzz::check(info.offset % file.alignment() == 0, "offset aligned");
    fuzz::check(info.bytes == gguf_tensor_bytes(info.type, info.dims, "fuzz"), "bytes match dims");
    fuzz::check(info.rows() > 0 && info.columns() > 0, "positive rows and columns");
    const char* data = static_cast<const char*>(info.data);
    fuzz::check(data >= begin + file.data_offset() && data + info.bytes <= begin + size,
                "data inside the file");
    by_offset.push_back(&info);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* left, const GgufTensorInfo* right) {
              return left->offset < right->offset;
            });
  for (size_t index = 1; index < by_offset.size(); ++index) {
    fuzz::check(
        by_offset[index - 1]->offset + by_offset[index - 1]->bytes <= by_offset[index]->offset,
        "tensors do not overlap");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fornace;
  fuzz::GuardedFile file(data, size);
  if (!file.data()) return 0;
  fuzz::expect_only_fornace_errors([&] {
    std::shared_ptr<GgufFile> parsed = GgufFile::parse(file.data(), file.size(), "fuzz");
    read_every_key(*parsed);
    check_tensors(*parsed, file.data(), file.size());
  });
  return 0;
}
