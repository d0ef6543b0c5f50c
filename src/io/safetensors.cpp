// The safetensors reader (validated header, read-only mapping, zero-copy tensors), sharded
// checkpoint directories, and the atomic writer.
#include "io/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <set>

#include "core/error.h"
#include "io/file_mapping.h"
#include "io/files.h"
#include "io/json_util.h"
#include "ops/copy.h"

namespace fornace {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;
constexpr size_t kLengthPrefixBytes = 8;
const char kMetadataKey[] = "__metadata__";

struct ParsedHeader {
  std::vector<TensorEntry> entries;  // Sorted by byte offset.
  std::map<std::string, std::string> metadata;
  size_t data_start = 0;  // File offset of the data section.
};

// The safetensors dtype names this engine computes with; the others are recognised so that the
// message can say "unsupported" rather than "unknown".
bool dtype_from_safetensors_name(const std::string& name, DType& dtype) {
  if (name == "BF16") {
    dtype = DType::bf16;
  } else if (name == "F16") {
    dtype = DType::f16;
  } else if (name == "F32") {
    dtype = DType::f32;
  } else {
    return false;
  }
  return true;
}

bool is_other_safetensors_dtype(const std::string& name) {
  static const std::set<std::string> others = {
      "BOOL", "U8",      "I8",      "I16",     "U16", "I32",     "U32",     "I64", "U64",
      "F64",  "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};
  return others.count(name) > 0;
}

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    case DType::f32:
      return "F32";
    default:
      return nullptr;
  }
}

uint64_t read_little_endian_u64(const unsigned char* bytes) {
  uint64_t value = 0;
  for (int index = 7; index >= 0; --index) value = (value << 8) | bytes[index];
  return value;
}

// A non-negative integer from a JSON value, or an Error naming the file, tensor and field.
uint64_t entry_integer(const nlohmann::json& value, const std::string& source,
                       const std::string& tensor, const char* field) {
  if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<int64_t>() < 0)) {
    fail(source, ": tensor '", tensor, "': ", field, " must hold non-negative integers, got ",
         io::json_preview(value));
  }
  return value.get<uint64_t>();
}

TensorEntry parse_entry(const std::string& name, const nlohmann::json& value,
                        const std::string& source, size_t data_bytes) {
  if (!value.is_object()) {
    fail(source, ": tensor '", name, "': entry is not an object (", io::json_preview(value), ")");
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(field)) fail(source, ": tensor '", name, "': missing '", field, "'");
  }
  TensorEntry entry;
  entry.name = name;

  const nlohmann::json& dtype = value["dtype"];
  if (!dtype.is_string()) {
    fail(source, ": tensor '", name, "': dtype must be a string, got ", io::json_preview(dtype));
  }
  std::string dtype_name = dtype.get<std::string>();
  if (!dtype_from_safetensors_name(dtype_name, entry.dtype)) {
    if (is_other_safetensors_dtype(dtype_name)) {
      fail(source, ": tensor '", name, "': unsupported dtype ", dtype_name,
           " (supported: BF16, F16, F32)");
    }
    fail(source, ": tensor '", name, "': unknown dtype ", io::json_preview(dtype),
         " (supported: BF16, F16, F32)");
  }

  const nlohmann::json& shape = value["shape"];
  if (!shape.is_array()) {
    fail(source, ": tensor '", name, "': shape must be an array, got ", io::json_preview(shape));
  }
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    fail(source, ": tensor '", name, "': rank ", shape.size(), " exceeds the supported ", kMaxRank);
  }
  uint64_t expected_bytes = dtype_size(entry.dtype);
  for (const nlohmann::json& extent : shape) {
    uint64_t size = entry_integer(extent, source, name, "shape");
    if (size > static_cast<uint64_t>(INT64_MAX) ||
        __builtin_mul_overflow(expected_bytes, size, &expected_bytes)) {
      fail(source, ": tensor '", name, "': shape ", io::json_preview(shape), " is too large");
    }
    entry.shape.push_back(static_cast<int64_t>(size));
  }

  const nlohmann::json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    fail(source, ": tensor '", name, "': data_offsets must be [begin, end], got ",
         io::json_preview(offsets));
  }
  uint64_t begin = entry_integer(offsets[0], source, name, "data_offsets");
  uint64_t end = entry_integer(offsets[1], source, name, "data_offsets");
  if (end < begin) {
    fail(source, ": tensor '", name, "': data_offsets [", begin, ", ", end, "] end before begin");
  }
  if (end > data_bytes) {
    fail(source, ": tensor '", name, "': data_offsets [", begin, ", ", end,
         "] run past the end of the data section (", data_bytes,
         " bytes); the file may be truncated");
  }
  if (end - begin != expected_bytes) {
    fail(source, ": tensor '", name, "': shape ", entry.shape.to_string(), " of ", dtype_name,
         " needs ", expected_bytes, " bytes but data_offsets [", begin, ", ", end, "] hold ",
         end - begin);
  }
  entry.begin = static_cast<size_t>(begin);
  entry.end = static_cast<size_t>(end);
  return entry;
}

std::map<std::string, std::string> parse_metadata(const nlohmann::json& value,
                                                  const std::string& source) {
  if (!value.is_object()) {
    fail(source, ": __metadata__ must be an object of strings, got ", io::json_preview(value));
  }
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      fail(source, ": __metadata__ key '", key, "' must be a string, got ", io::json_preview(item));
    }
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

ParsedHeader parse_header_and_metadata(const void* bytes, size_t size, const std::string& source) {
  if (size < kLengthPrefixBytes) {
    fail(source, ": file is ", size, " bytes, too short for the 8-byte header length (truncated?)");
  }
  uint64_t header_bytes = read_little_endian_u64(static_cast<const unsigned char*>(bytes));
  if (header_bytes > size - kLengthPrefixBytes) {
    fail(source, ": header length ", header_bytes, " runs past the end of the file (", size,
         " bytes); the file is truncated or not safetensors");
  }
  if (header_bytes > kMaxHeaderBytes) {
    fail(source, ": header length ", header_bytes, " exceeds the limit of ", kMaxHeaderBytes,
         " bytes");
  }
  ParsedHeader parsed;
  parsed.data_start = kLengthPrefixBytes + static_cast<size_t>(header_bytes);
  size_t data_bytes = size - parsed.data_start;
  std::string_view text(static_cast<const char*>(bytes) + kLengthPrefixBytes,
                        static_cast<size_t>(header_bytes));
  nlohmann::json header = io::parse_json_object(text, source, "safetensors header");

  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      parsed.metadata = parse_metadata(value, source);
    } else {
      parsed.entries.push_back(parse_entry(name, value, source, data_bytes));
    }
  }
  // Non-empty ranges must not overlap; empty ones occupy no bytes.
  std::sort(parsed.entries.begin(), parsed.entries.end(),
            [](const TensorEntry& left, const TensorEntry& right) {
              return left.begin != right.begin ? left.begin < right.begin : left.name < right.name;
            });
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& entry : parsed.entries) {
    if (entry.begin == entry.end) continue;
    if (previous && entry.begin < previous->end) {
      fail(source, ": tensor '", entry.name, "': data_offsets [", entry.begin, ", ", entry.end,
           "] overlap tensor '", previous->name, "' [", previous->begin, ", ", previous->end, "]");
    }
    previous = &entry;
  }
  return parsed;
}

}  // namespace

std::vector<TensorEntry> SafetensorsFile::parse_header(const void* bytes, size_t size,
                                                       const std::string& source_name) {
  return parse_header_and_metadata(bytes, size, source_name).entries;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path,
                                                       const FileMappingOptions& mapping_options) {
  auto file = std::make_shared<ReadOnlyFile>(path);
  size_t size = file->size();
  if (size < kLengthPrefixBytes) {
    fail(path, ": file is ", size, " bytes, too short for the 8-byte header length (truncated?)");
  }
  auto file_mapping =
      std::make_shared<const FileMapping>(file->descriptor(), size, path.c_str(), mapping_options);
  const char* address = file_mapping->data();
  std::shared_ptr<const void> mapping(file_mapping, address);
  // The file may have shrunk between fstat and mmap; validate against a size seen after mapping.
  if (file->current_size() != size) fail(path, ": file changed size while being opened");

  ParsedHeader parsed = parse_header_and_metadata(address, size, path);
  std::shared_ptr<SafetensorsFile> result(new SafetensorsFile());
  result->path_ = path;
  result->file_ = std::move(file);
  result->mapping_ = std::move(mapping);
  result->file_mapping_ = file_mapping;
  result->data_ = static_cast<const char*>(address) + parsed.data_start;
  result->file_size_ = size;
  result->entries_ = std::move(parsed.entries);
  result->metadata_ = std::move(parsed.metadata);
  for (size_t index = 0; index < result->entries_.size(); ++index) {
    result->index_[result->entries_[index].name] = index;
  }
  return result;
}

bool SafetensorsFile::contains(const std::string& name) const { return index_.count(name) > 0; }

const TensorEntry& SafetensorsFile::entry(const std::string& name) const {
  auto found = index_.find(name);
  if (found == index_.end()) fail(path_, ": no tensor '", name, "'");
  return entries_[found->second];
}

void SafetensorsFile::check_unchanged() const {
  size_t size = file_->current_size();
  if (size != file_size_) {
    fail(path_, ": file changed size from ", file_size_, " to ", size,
         " bytes since it was opened; reload the model");
  }
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const TensorEntry& found = entry(name);
  check_unchanged();
  const char* data = data_ + found.begin;
  size_t bytes = found.end - found.begin;
  Layout layout = Layout::contiguous(found.shape);
  if (reinterpret_cast<uintptr_t>(data) % dtype_size(found.dtype) == 0) {
    return Tensor(Storage::borrow(file_mapping_, data, bytes, FileMapping::release_pages), layout,
                  found.dtype);
  }
  // A header whose length is not a multiple of the element size leaves the data misaligned;
  // such a tensor is copied rather than read through a misaligned pointer.
  Tensor copy = Tensor::empty(found.shape, found.dtype);
  std::memcpy(copy.raw(), data, bytes);
  return copy;
}

Checkpoint Checkpoint::open_directory(const std::string& directory,
                                      const FileMappingOptions& mapping) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::file_status status = fs::status(directory, error);
  if (error && error != std::errc::no_such_file_or_directory) {
    fail(directory, ": cannot access the model directory: ", error.message());
  }
  if (!fs::exists(status)) fail(directory, ": model directory does not exist");
  if (!fs::is_directory(status))
    fail(directory, ": is not a directory (expected a model directory)");

  Checkpoint checkpoint;
  checkpoint.directory_ = directory;
  std::string index_path = (fs::path(directory) / "model.safetensors.index.json").string();
  std::string single_path = (fs::path(directory) / "model.safetensors").string();

  if (fs::exists(fs::symlink_status(index_path, error))) {
    nlohmann::json index = io::parse_json_object(read_file(index_path), index_path, "index");
    if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
      fail(index_path, ": missing 'weight_map' object");
    }
    std::map<std::string, size_t> file_of_shard;
    for (const auto& [name, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) {
        fail(index_path, ": tensor '", name, "': shard must be a file name, got ",
             io::json_preview(shard));
      }
      std::string shard_name = shard.get<std::string>();
      if (shard_name.empty() || shard_name.find('/') != std::string::npos || shard_name == "." ||
          shard_name == "..") {
        fail(index_path, ": tensor '", name, "': shard '", shard_name,
             "' is not a file name in the model directory");
      }
      auto found = file_of_shard.find(shard_name);
      if (found == file_of_shard.end()) {
        std::string shard_path = (fs::path(directory) / shard_name).string();
        checkpoint.files_.push_back(SafetensorsFile::open(shard_path, mapping));
        found = file_of_shard.emplace(shard_name, checkpoint.files_.size() - 1).first;
      }
      if (!checkpoint.files_[found->second]->contains(name)) {
        fail(index_path, ": tensor '", name, "' is listed in shard ", shard_name,
             " but that file does not contain it");
      }
      checkpoint.file_of_[name] = found->second;
    }
    return checkpoint;
  }
  if (fs::exists(fs::symlink_status(single_path, error))) {
    checkpoint.files_.push_back(SafetensorsFile::open(single_path, mapping));
    for (const TensorEntry& entry : checkpoint.files_[0]->entries()) {
      checkpoint.file_of_[entry.name] = 0;
    }
    return checkpoint;
  }
  fail(directory, ": no model.safetensors or model.safetensors.index.json in the model directory");
}

bool Checkpoint::contains(const std::string& name) const { return file_of_.count(name) > 0; }

Tensor Checkpoint::tensor(const std::string& name) const {
  auto found = file_of_.find(name);
  if (found == file_of_.end()) {
    std::string where =
        files_.size() == 1
            ? files_[0]->path()
            : (std::filesystem::path(directory_) / "model.safetensors.index.json").string();
    fail(where, ": tensor '", name, "' not found in the checkpoint");
  }
  return files_[found->second]->tensor(name);
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> result;
  for (const auto& item : file_of_) result.push_back(item.first);
  return result;
}

void Checkpoint::check_unchanged() const {
  for (const auto& file : files_) file->check_unchanged();
}

void write_safetensors_streamed(const std::string& path, const std::vector<TensorSpec>& specs,
                                const std::function<Tensor(size_t index)>& produce,
                                const std::map<std::string, std::string>& metadata) {
  // Largest elements first keeps every tensor aligned to its element size without gaps.
  std::vector<size_t> order(specs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t left, size_t right) {
    return dtype_size(specs[left].dtype) > dtype_size(specs[right].dtype);
  });

  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  size_t offset = 0;
  for (size_t index : order) {
    const TensorSpec& spec = specs[index];
    const char* dtype_name = safetensors_dtype_name(spec.dtype);
    if (!dtype_name) {
      fail(path, ": tensor '", spec.name, "': cannot write dtype ", fornace::dtype_name(spec.dtype),
           " (supported: bf16, f16, f32)");
    }
    if (spec.name == kMetadataKey || header.contains(spec.name)) {
      fail(path, ": tensor name '", spec.name, "' is reserved or repeated");
    }
    size_t bytes = static_cast<size_t>(spec.shape.product()) * dtype_size(spec.dtype);
    header[spec.name] = {{"dtype", dtype_name},
                         {"shape", spec.shape.to_vector()},
                         {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header_text = header.dump();
  // Spaces after the JSON make the data section start on an 8-byte boundary.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  write_file_atomically(path, [&](std::ostream& stream) {
    uint64_t length = header_text.size();
    char length_bytes[8];
    for (int index = 0; index < 8; ++index) {
      length_bytes[index] = static_cast<char>((length >> (8 * index)) & 0xff);
    }
    stream.write(length_bytes, 8);
    stream.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
    for (size_t index : order) {
      const TensorSpec& spec = specs[index];
      Tensor tensor = produce(index);
      if (!tensor.defined() || tensor.dtype() != spec.dtype || !(tensor.shape() == spec.shape)) {
        fail(path, ": tensor '", spec.name, "': expected ", fornace::dtype_name(spec.dtype),
             spec.shape.to_string(), ", got ",
             tensor.defined() ? tensor.describe() : std::string("nothing"));
      }
      Tensor dense = contiguous(tensor);
      stream.write(static_cast<const char*>(dense.raw()),
                   static_cast<std::streamsize>(dense.numel() * dense.element_size()));
    }
  });
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) fail(path, ": tensor '", name, "' is undefined");
    specs.push_back({name, tensor.dtype(), tensor.shape()});
  }
  write_safetensors_streamed(
      path, specs, [&](size_t index) { return tensors[index].second; }, metadata);
}

}  // namespace fornace
