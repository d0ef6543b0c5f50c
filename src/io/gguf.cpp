// The GGUF reader: metadata values, header and tensor-info validation, the read-only mapping.
#include "io/gguf.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <numeric>

#include "core/error.h"
#include "io/file_mapping.h"
#include "io/files.h"

namespace fornace {

static_assert(std::endian::native == std::endian::little,
              "GGUF numbers are used as stored, which needs a little-endian host");

namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr size_t kHeaderBytes = 4 + 4 + 8 + 8;  // Magic, version, tensor count, key count.
// The fewest bytes a key-value pair and a tensor info take, to bound counts by the file size.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
constexpr uint32_t kLastValueType = static_cast<uint32_t>(GgufType::f64);
const char kAlignmentKey[] = "general.alignment";

// ggml's names of the tensor types Fornace does not support, for clearer messages.
const char* unsupported_ggml_type_name(uint32_t id) {
  static const char* const names[] = {
      nullptr, nullptr,      nullptr,      nullptr,      "Q4_2",     "Q4_3",     nullptr,
      nullptr, nullptr,      "Q8_1",       "Q2_K",       "Q3_K",     nullptr,    nullptr,
      nullptr, nullptr,      "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
      "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
      "F64",   "IQ1_M",      nullptr,      "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
      "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  return id < std::size(names) ? names[id] : nullptr;
}

// Bytes of one element of a numeric or boolean type; 0 for strings and arrays.
size_t scalar_bytes(GgufType type) {
  switch (type) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean:
      return 1;
    case GgufType::u16:
    case GgufType::i16:
      return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32:
      return 4;
    case GgufType::u64:
    case GgufType::i64:
    case GgufType::f64:
      return 8;
    default:
      return 0;
  }
}

template <typename T>
T load(const std::string& bytes, size_t index) {
  T value;
  std::memcpy(&value, bytes.data() + index * sizeof(T), sizeof(T));
  return value;
}

// A string for messages: quoted, control and non-ASCII bytes escaped, cut after `limit` bytes.
std::string quoted(const std::string& text, size_t limit = 64) {
  static const char hex[] = "0123456789abcdef";
  std::string result = "\"";
  for (size_t index = 0; index < std::min(text.size(), limit); ++index) {
    unsigned char byte = static_cast<unsigned char>(text[index]);
    if (byte == '"' || byte == '\\') {
      result += '\\';
      result += static_cast<char>(byte);
    } else if (byte < 0x20 || byte >= 0x7f) {
      result += "\\x";
      result += hex[byte >> 4];
      result += hex[byte & 15];
    } else {
      result += static_cast<char>(byte);
    }
  }
  result += '"';
  if (text.size() > limit) result += concat("... (", text.size(), " bytes)");
  return result;
}

template <typename Float>
std::string shortest(Float value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// Reads the file front to back; every read is checked against the end, and errors name the
// source, what is being read (a key or tensor) and the byte offset.
class Cursor {
 public:
  Cursor(const unsigned char* bytes, size_t size, const std::string& source)
      : bytes_(bytes), size_(size), source_(source) {}

  size_t offset() const { return offset_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - offset_; }
  // What the following reads belong to, e.g. "key 'general.name'"; empty for the header.
  void set_subject(std::string subject) { subject_ = std::move(subject); }
  std::string where() const { return subject_.empty() ? source_ : source_ + ": " + subject_; }

  template <typename... Parts>
  [[noreturn]] void fail_here(Parts&&... parts) const {
    fail(where(), ": ", std::forward<Parts>(parts)...);
  }

  // `count` bytes, or an error saying that `what` runs past the end of the file.
  const unsigned char* take(uint64_t count, const std::string& what) {
    if (count > remaining()) {
      fail_here(what, " at byte ", offset_, " runs past the end of the file (", size_,
                " bytes); the file is truncated or corrupt");
    }
    const unsigned char* start = bytes_ + offset_;
    offset_ += static_cast<size_t>(count);
    return start;
  }

  template <typename T>
  T read(const char* what) {
    T value;
    std::memcpy(&value, take(sizeof(T), what), sizeof(T));
    return value;
  }

  std::string read_string(const char* what, uint64_t max_bytes = UINT64_MAX) {
    size_t start = offset_;
    uint64_t length = read<uint64_t>(what);
    if (length > max_bytes) {
      fail_here(what, " at byte ", start, " is ", length, " bytes, over the limit of ", max_bytes);
    }
    // Checked here rather than by take(), so that no message is built for each good string.
    if (length > remaining()) {
      fail_here(what, " of ", length, " bytes at byte ", offset_, " runs past the end of the file (",
                size_, " bytes); the file is truncated or corrupt");
    }
    const unsigned char* text = bytes_ + offset_;
    offset_ += static_cast<size_t>(length);
    return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(length));
  }

 private:
  const unsigned char* bytes_;
  size_t size_;
  size_t offset_ = 0;
  const std::string& source_;
  std::string subject_;
};

GgufType read_value_type(Cursor& cursor, const char* what) {
  size_t at = cursor.offset();
  uint32_t id = cursor.read<uint32_t>(what);
  if (id > kLastValueType) cursor.fail_here("unknown ", what, " ", id, " at byte ", at);
  return static_cast<GgufType>(id);
}

// `count` elements of a scalar type (one for a scalar value).
GgufValue read_elements(Cursor& cursor, GgufType type, GgufType element_type, uint64_t count) {
  std::string what = type == GgufType::array
                         ? concat("array of ", count, " ", gguf_type_name(element_type))
                         : gguf_type_name(element_type) + " value";
  if (element_type == GgufType::string) {
    // Each string takes at least its 8-byte length, which bounds the count before allocating.
    if (count > cursor.remaining() / 8) {
      cursor.fail_here(what, " at byte ", cursor.offset(), " runs past the end of the file");
    }
    // No reserve: the count is not trusted yet, and memory grows only with strings read.
    std::vector<std::string> strings;
    for (uint64_t index = 0; index < count; ++index)
      strings.push_back(cursor.read_string("string"));
    return GgufValue::from_raw(type, element_type, static_cast<size_t>(count), {},
                               std::move(strings));
  }
  size_t element_bytes = scalar_bytes(element_type);
  if (count > cursor.remaining() / element_bytes) {
    cursor.fail_here(what, " at byte ", cursor.offset(), " runs past the end of the file");
  }
  size_t start = cursor.offset();
  const unsigned char* data = cursor.take(count * element_bytes, what);
  if (element_type == GgufType::boolean) {
    for (uint64_t index = 0; index < count; ++index) {
      if (data[index] > 1) {
        cursor.fail_here("bool ", static_cast<int>(data[index]), " at byte ", start + index,
                         " is neither 0 nor 1");
      }
    }
  }
  return GgufValue::from_raw(
      type, element_type, static_cast<size_t>(count),
      std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(count * element_bytes)),
      {});
}

GgufValue read_value(Cursor& cursor) {
  GgufType type = read_value_type(cursor, "value type");
  if (type != GgufType::array) return read_elements(cursor, type, type, 1);
  size_t at = cursor.offset();
  GgufType element_type = read_value_type(cursor, "array element type");
  if (element_type == GgufType::array) {
    cursor.fail_here("array of arrays at byte ", at, " is not supported");
  }
  uint64_t count = cursor.read<uint64_t>("array length");
  return read_elements(cursor, type, element_type, count);
}

void check_header(const unsigned char* bytes, size_t size, const std::string& source) {
  if (size >= 4 && std::memcmp(bytes, kMagic, 4) != 0) {
    fail(source, ": not a GGUF file (it starts with ",
         quoted(std::string(reinterpret_cast<const char*>(bytes), 4)), ", not \"GGUF\")");
  }
  if (size < kHeaderBytes) {
    fail(source, ": file is ", size, " bytes, too short for the ", kHeaderBytes,
         "-byte GGUF header (truncated?)");
  }
  uint32_t version = 0;
  std::memcpy(&version, bytes + 4, 4);
  if (version == 2 || version == 3) return;
  uint32_t swapped = __builtin_bswap32(version);
  if (swapped >= 1 && swapped <= 3) {
    fail(source, ": big-endian GGUF (version ", swapped,
         ") is not supported; convert the file to little-endian");
  }
  fail(source, ": unsupported GGUF version ", version, " (supported: 2 and 3)");
}

uint64_t read_count(Cursor& cursor, const char* what, uint64_t min_entry_bytes) {
  size_t at = cursor.offset();
  uint64_t count = cursor.read<uint64_t>(what);
  // The entries follow the header, so they must fit in the rest of the file.
  uint64_t room = cursor.size() - kHeaderBytes;
  if (count > room / min_entry_bytes) {
    cursor.fail_here(what, " ", count, " at byte ", at, " cannot fit in a file of ", cursor.size(),
                     " bytes");
  }
  return count;
}

}  // namespace

std::string gguf_type_name(GgufType type) {
  static const char* const names[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                      "int32",  "float32", "bool",   "string", "array",
                                      "uint64", "int64",   "float64"};
  uint32_t id = static_cast<uint32_t>(type);
  return id <= kLastValueType ? names[id] : concat("type ", id);
}

bool is_gguf_integer(GgufType type) {
  switch (type) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::u16:
    case GgufType::i16:
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::u64:
    case GgufType::i64:
      return true;
    default:
      return false;
  }
}

bool is_gguf_float(GgufType type) { return type == GgufType::f32 || type == GgufType::f64; }

GgufValue::GgufValue(std::string value)
    : type_(GgufType::string), element_type_(GgufType::string), count_(1) {
  strings_.push_back(std::move(value));
}

GgufValue::GgufValue(std::vector<std::string> values)
    : type_(GgufType::array),
      element_type_(GgufType::string),
      count_(values.size()),
      strings_(std::move(values)) {}

GgufValue GgufValue::from_raw(GgufType type, GgufType element_type, size_t count, std::string bytes,
                              std::vector<std::string> strings) {
  GgufValue value;
  value.type_ = type;
  value.element_type_ = element_type;
  value.count_ = count;
  value.bytes_ = std::move(bytes);
  value.strings_ = std::move(strings);
  return value;
}

std::optional<int64_t> GgufValue::to_i64(size_t index) const {
  if (index >= count_) return std::nullopt;
  switch (element_type_) {
    case GgufType::u8:
      return load<uint8_t>(bytes_, index);
    case GgufType::i8:
      return load<int8_t>(bytes_, index);
    case GgufType::u16:
      return load<uint16_t>(bytes_, index);
    case GgufType::i16:
      return load<int16_t>(bytes_, index);
    case GgufType::u32:
      return load<uint32_t>(bytes_, index);
    case GgufType::i32:
      return load<int32_t>(bytes_, index);
    case GgufType::i64:
      return load<int64_t>(bytes_, index);
    case GgufType::u64: {
      uint64_t value = load<uint64_t>(bytes_, index);
      if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(value);
    }
    default:
      return std::nullopt;
  }
}

std::optional<uint64_t> GgufValue::to_u64(size_t index) const {
  if (index < count_ && element_type_ == GgufType::u64) return load<uint64_t>(bytes_, index);
  std::optional<int64_t> value = to_i64(index);
  if (!value || *value < 0) return std::nullopt;
  return static_cast<uint64_t>(*value);
}

std::optional<double> GgufValue::to_f64(size_t index) const {
  if (index >= count_) return std::nullopt;
  if (element_type_ == GgufType::f32) return load<float>(bytes_, index);
  if (element_type_ == GgufType::f64) return load<double>(bytes_, index);
  if (element_type_ == GgufType::u64) return static_cast<double>(load<uint64_t>(bytes_, index));
  std::optional<int64_t> value = to_i64(index);
  if (!value) return std::nullopt;
  return static_cast<double>(*value);
}

std::optional<bool> GgufValue::to_bool(size_t index) const {
  if (index >= count_ || element_type_ != GgufType::boolean) return std::nullopt;
  return bytes_[index] != 0;
}

std::string GgufValue::describe(size_t max_elements) const {
  auto element = [&](size_t index) -> std::string {
    switch (element_type_) {
      case GgufType::string:
        return quoted(strings_[index]);
      case GgufType::boolean:
        return *to_bool(index) ? "true" : "false";
      case GgufType::f32:
        return shortest(load<float>(bytes_, index));
      case GgufType::f64:
        return shortest(load<double>(bytes_, index));
      case GgufType::u64:
        return std::to_string(load<uint64_t>(bytes_, index));
      default:
        return std::to_string(*to_i64(index));
    }
  };
  if (!is_array()) return gguf_type_name(element_type_) + " " + element(0);
  std::string text = concat("array[", count_, "] of ", gguf_type_name(element_type_), " [");
  for (size_t index = 0; index < std::min(count_, max_elements); ++index) {
    text += (index ? ", " : "") + element(index);
  }
  return text + (count_ > max_elements ? ", ...]" : "]");
}

uint64_t gguf_tensor_bytes(BlockType type, const std::vector<int64_t>& dims,
                           const std::string& where) {
  if (dims.empty() || dims.size() > static_cast<size_t>(kGgufMaxDims)) {
    fail(where, ": ", dims.size(), " dims (a GGUF tensor has 1 to ", kGgufMaxDims, ")");
  }
  for (size_t index = 0; index < dims.size(); ++index) {
    if (dims[index] <= 0) {
      fail(where, ": dim ", index, " is ", dims[index], " (dims must be positive)");
    }
  }
  const BlockFormat& format = block_format(type);
  if (dims[0] % format.block_elements != 0) {
    fail(where, ": row length ", dims[0], " is not a multiple of the ", format.name, " block of ",
         format.block_elements, " elements");
  }
  uint64_t elements = 1;
  uint64_t bytes = static_cast<uint64_t>(dims[0] / format.block_elements);
  bool overflow = __builtin_mul_overflow(bytes, format.block_bytes, &bytes);
  for (size_t index = 0; index < dims.size(); ++index) {
    uint64_t dim = static_cast<uint64_t>(dims[index]);
    overflow = overflow || __builtin_mul_overflow(elements, dim, &elements);
    if (index > 0) overflow = overflow || __builtin_mul_overflow(bytes, dim, &bytes);
  }
  if (overflow || elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    std::string text;
    for (int64_t dim : dims) text += (text.empty() ? "" : ", ") + std::to_string(dim);
    fail(where, ": dims [", text, "] are too large");
  }
  return bytes;
}

uint64_t gguf_alignment(const GgufValue& value, const std::string& where) {
  std::optional<uint64_t> alignment = value.is_array() ? std::nullopt : value.to_u64();
  if (!alignment || *alignment == 0 || *alignment > UINT32_MAX ||
      !std::has_single_bit(*alignment)) {
    fail(where, ": the alignment must be an integer power of two, got ", value.describe());
  }
  return *alignment;
}

int64_t GgufTensorInfo::rows() const {
  return std::accumulate(dims.begin() + 1, dims.end(), int64_t{1}, std::multiplies<>());
}

Dims GgufTensorInfo::shape() const {
  return Dims(std::vector<int64_t>(dims.rbegin(), dims.rend()));
}

std::shared_ptr<GgufFile> GgufFile::parse(const void* bytes, size_t size,
                                          const std::string& source_name) {
  const auto* data = static_cast<const unsigned char*>(bytes);
  check_header(data, size, source_name);
  std::shared_ptr<GgufFile> file(new GgufFile());
  file->path_ = source_name;
  std::memcpy(&file->version_, data + 4, 4);

  Cursor cursor(data, size, source_name);
  cursor.take(8, "header");
  uint64_t tensor_count = read_count(cursor, "tensor count", kMinTensorInfoBytes);
  uint64_t key_count = read_count(cursor, "metadata key count", kMinKeyValueBytes);

  for (uint64_t index = 0; index < key_count; ++index) {
    cursor.set_subject(concat("metadata entry ", index));
    std::string key = cursor.read_string("key", kGgufMaxNameBytes);
    cursor.set_subject("key '" + key + "'");
    if (file->key_index_.count(key)) cursor.fail_here("the key appears twice");
    GgufValue value = read_value(cursor);
    file->key_index_.emplace(key, file->metadata_.size());
    file->metadata_.push_back({std::move(key), std::move(value)});
  }
  if (const GgufValue* alignment = file->find(kAlignmentKey)) {
    file->alignment_ =
        gguf_alignment(*alignment, concat(source_name, ": key '", kAlignmentKey, "'"));
  }

  for (uint64_t index = 0; index < tensor_count; ++index) {
    cursor.set_subject(concat("tensor info ", index));
    GgufTensorInfo info;
    info.name = cursor.read_string("tensor name", kGgufMaxNameBytes);
    cursor.set_subject("tensor '" + info.name + "'");
    if (file->tensor_index_.count(info.name)) cursor.fail_here("the tensor name appears twice");
    size_t at = cursor.offset();
    uint32_t dim_count = cursor.read<uint32_t>("n_dims");
    if (dim_count < 1 || dim_count > static_cast<uint32_t>(kGgufMaxDims)) {
      cursor.fail_here("n_dims ", dim_count, " at byte ", at, " is not 1 to ", kGgufMaxDims);
    }
    for (uint32_t dim = 0; dim < dim_count; ++dim) {
      at = cursor.offset();
      uint64_t extent = cursor.read<uint64_t>("dim");
      if (extent == 0 || extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        cursor.fail_here("dim ", dim, " at byte ", at, " is ", extent,
                         " (dims must be positive and fit int64)");
      }
      info.dims.push_back(static_cast<int64_t>(extent));
    }
    at = cursor.offset();
    uint32_t type_id = cursor.read<uint32_t>("tensor type");
    std::optional<BlockType> type = block_type_from_ggml(type_id);
    if (!type) {
      const char* known = unsupported_ggml_type_name(type_id);
      if (known) cursor.fail_here("tensor type ", known, " (id ", type_id, ") is not supported");
      cursor.fail_here("unknown tensor type id ", type_id, " at byte ", at);
    }
    info.type = *type;
    info.bytes = gguf_tensor_bytes(info.type, info.dims, cursor.where());
    info.offset = cursor.read<uint64_t>("tensor data offset");
    if (info.offset % file->alignment_ != 0) {
      cursor.fail_here("data offset ", info.offset, " is not a multiple of the alignment ",
                       file->alignment_);
    }
    file->tensor_index_.emplace(info.name, file->tensors_.size());
    file->tensors_.push_back(std::move(info));
  }

  uint64_t infos_end = cursor.offset();
  file->data_offset_ = (infos_end + file->alignment_ - 1) / file->alignment_ * file->alignment_;
  for (GgufTensorInfo& info : file->tensors_) {
    uint64_t room = size > file->data_offset_ ? size - file->data_offset_ : 0;
    if (info.offset > room || info.bytes > room - info.offset) {
      fail(source_name, ": tensor '", info.name, "': ", info.bytes, " bytes at data offset ",
           info.offset, " (the data section starts at byte ", file->data_offset_,
           ") run past the end of the file (", size, " bytes); the file may be truncated");
    }
    info.data = data + file->data_offset_ + info.offset;
  }
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& info : file->tensors_) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* left, const GgufTensorInfo* right) {
              return left->offset < right->offset;
            });
  for (size_t index = 1; index < by_offset.size(); ++index) {
    const GgufTensorInfo& previous = *by_offset[index - 1];
    const GgufTensorInfo& current = *by_offset[index];
    if (current.offset < previous.offset + previous.bytes) {
      fail(source_name, ": tensor '", current.name, "': data [", current.offset, ", ",
           current.offset + current.bytes, ") overlaps tensor '", previous.name, "' [",
           previous.offset, ", ", previous.offset + previous.bytes, ")");
    }
  }
  return file;
}

bool is_gguf_path(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error);
}

void require_model_path(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error) || is_gguf_path(path)) return;
  fail("model ", path,
       std::filesystem::exists(path, error)
           ? " is neither a checkpoint directory nor a GGUF file"
           : " does not exist (give a checkpoint directory or a GGUF file)");
}

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path,
                                         const FileMappingOptions& mapping) {
  auto file = std::make_shared<ReadOnlyFile>(path);
  size_t size = file->size();
  if (size < kHeaderBytes) {
    std::string bytes = read_file(path);
    parse(bytes.data(), bytes.size(), path);  // Throws the message for a short file.
  }
  auto file_mapping =
      std::make_shared<const FileMapping>(file->descriptor(), size, path.c_str(), mapping);
  const char* address = file_mapping->data();
  // The file may have shrunk between fstat and mmap; validate against a size seen after mapping.
  if (file->current_size() != size) fail(path, ": file changed size while being opened");
  std::shared_ptr<GgufFile> result = parse(address, size, path);
  result->file_ = std::move(file);
  result->mapping_ = std::shared_ptr<const void>(file_mapping, address);
  result->file_mapping_ = file_mapping;
  result->file_size_ = size;
  return result;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto found = key_index_.find(key);
  return found == key_index_.end() ? nullptr : &metadata_[found->second].value;
}

const GgufValue& GgufFile::value(const std::string& key) const {
  const GgufValue* found = find(key);
  if (!found) fail(path_, ": key '", key, "' is missing");
  return *found;
}

void GgufFile::fail_key(const std::string& key, const std::string& expected,
                        const GgufValue& value) const {
  fail(path_, ": key '", key, "': expected ", expected, ", got ", value.describe(4));
}

template <typename Convert>
auto GgufFile::scalar(const std::string& key, const char* expected, Convert convert) const {
  const GgufValue& found = value(key);
  decltype(convert(found)) result;
  if (!found.is_array()) result = convert(found);
  if (!result) fail_key(key, expected, found);
  return *result;
}

const std::string& GgufFile::get_string(const std::string& key) const {
  const GgufValue& found = value(key);
  if (found.type() != GgufType::string) fail_key(key, "a string", found);
  return found.strings()[0];
}

uint64_t GgufFile::get_u64(const std::string& key) const {
  return scalar(key, "a non-negative integer",
                [](const GgufValue& found) { return found.to_u64(); });
}

int64_t GgufFile::get_i64(const std::string& key) const {
  return scalar(key, "an integer that fits int64",
                [](const GgufValue& found) { return found.to_i64(); });
}

double GgufFile::get_f64(const std::string& key) const {
  return scalar(key, "a number", [](const GgufValue& found) { return found.to_f64(); });
}

bool GgufFile::get_bool(const std::string& key) const {
  return scalar(key, "a bool", [](const GgufValue& found) { return found.to_bool(); });
}

const std::vector<std::string>& GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& found = value(key);
  if (!found.is_array() || found.element_type() != GgufType::string) {
    fail_key(key, "an array of strings", found);
  }
  return found.strings();
}

std::vector<float> GgufFile::get_f32_array(const std::string& key) const {
  const GgufValue& found = value(key);
  if (!found.is_array() || found.element_type() != GgufType::f32) {
    fail_key(key, "an array of float32", found);
  }
  std::vector<float> result(found.size());
  if (!result.empty()) std::memcpy(result.data(), found.raw_bytes().data(), result.size() * 4);
  return result;
}

std::vector<int32_t> GgufFile::get_i32_array(const std::string& key) const {
  const GgufValue& found = value(key);
  if (!found.is_array() || !is_gguf_integer(found.element_type())) {
    fail_key(key, "an array of integers", found);
  }
  std::vector<int32_t> result(found.size());
  for (size_t index = 0; index < found.size(); ++index) {
    std::optional<int64_t> element = found.to_i64(index);
    if (!element || *element < std::numeric_limits<int32_t>::min() ||
        *element > std::numeric_limits<int32_t>::max()) {
      fail(path_, ": key '", key, "': element ", index, " does not fit int32");
    }
    result[index] = static_cast<int32_t>(*element);
  }
  return result;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto found = tensor_index_.find(name);
  return found == tensor_index_.end() ? nullptr : &tensors_[found->second];
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo* found = find_tensor(name);
  if (!found) fail(path_, ": no tensor '", name, "'");
  return *found;
}

void GgufFile::check_unchanged() const {
  if (!file_) return;
  size_t size = file_->current_size();
  if (size != file_size_) {
    fail(path_, ": file changed size from ", file_size_, " to ", size,
         " bytes since it was opened; reload the model");
  }
}

}  // namespace fornace
