// The GGUF writer: serializes metadata and tensor infos, lays tensors out at aligned offsets and
// streams their bytes into a temporary file that is renamed over the target at the end.
#include "io/gguf_writer.h"

#include <set>

#include "core/error.h"
#include "io/files.h"

namespace fornace {
namespace {

constexpr uint32_t kWrittenVersion = 3;
const char kAlignmentKey[] = "general.alignment";

void put_u32(std::string& out, uint32_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void put_u64(std::string& out, uint64_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void put_string(std::string& out, const std::string& text) {
  put_u64(out, text.size());
  out += text;
}

void put_value(std::string& out, const GgufValue& value) {
  put_u32(out, static_cast<uint32_t>(value.type()));
  if (value.is_array()) {
    put_u32(out, static_cast<uint32_t>(value.element_type()));
    put_u64(out, value.size());
  }
  if (value.element_type() == GgufType::string) {
    for (const std::string& text : value.strings()) put_string(out, text);
  } else {
    out += value.raw_bytes();
  }
}

void check_name_length(const std::string& path, const char* what, const std::string& name) {
  if (name.size() > kGgufMaxNameBytes) {
    fail(path, ": ", what, " '", name.substr(0, 64), "...' is longer than ", kGgufMaxNameBytes,
         " bytes");
  }
}

uint64_t align_up(uint64_t offset, uint64_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (GgufKeyValue& entry : metadata_) {
    if (entry.key == key) {
      entry.value = std::move(value);
      return;
    }
  }
  metadata_.push_back({key, std::move(value)});
}

void GgufWriter::add_tensor(const std::string& name, BlockType type, std::vector<int64_t> dims) {
  tensors_.push_back({name, type, std::move(dims)});
}

void GgufWriter::write(const std::string& path, const Producer& produce) const {
  uint64_t alignment = kGgufDefaultAlignment;
  std::string head;
  head.append("GGUF", 4);
  put_u32(head, kWrittenVersion);
  put_u64(head, tensors_.size());
  put_u64(head, metadata_.size());
  for (const GgufKeyValue& entry : metadata_) {
    check_name_length(path, "key", entry.key);
    if (entry.key == kAlignmentKey) {
      alignment = gguf_alignment(entry.value, concat(path, ": key '", kAlignmentKey, "'"));
    }
    put_string(head, entry.key);
    put_value(head, entry.value);
  }

  std::vector<uint64_t> sizes;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const GgufTensorSpec& spec : tensors_) {
    std::string where = concat(path, ": tensor '", spec.name, "'");
    if (!names.insert(spec.name).second) fail(where, ": the name appears twice");
    check_name_length(path, "tensor name", spec.name);
    uint64_t bytes = gguf_tensor_bytes(spec.type, spec.dims, where);
    sizes.push_back(bytes);
    put_string(head, spec.name);
    put_u32(head, static_cast<uint32_t>(spec.dims.size()));
    for (int64_t dim : spec.dims) put_u64(head, static_cast<uint64_t>(dim));
    put_u32(head, block_format(spec.type).ggml_type);
    put_u64(head, offset);
    offset = align_up(offset + bytes, alignment);
  }
  head.resize(align_up(head.size(), alignment), '\0');
  if (!produce && !tensors_.empty()) fail(path, ": no producer for the tensor data");

  write_file_atomically(path, [&](std::ostream& stream) {
    stream.write(head.data(), static_cast<std::streamsize>(head.size()));
    const std::string padding(alignment, '\0');
    for (size_t index = 0; index < tensors_.size(); ++index) {
      std::vector<std::byte> data(sizes[index]);
      produce(index, data);
      stream.write(reinterpret_cast<const char*>(data.data()),
                   static_cast<std::streamsize>(data.size()));
      stream.write(padding.data(),
                   static_cast<std::streamsize>(align_up(data.size(), alignment) - data.size()));
    }
  });
}

}  // namespace fornace
