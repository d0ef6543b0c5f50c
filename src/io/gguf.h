// GGUF files (llama.cpp's format): metadata values, and a validated, memory-mapped reader.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/block_type.h"
#include "core/layout.h"
#include "io/file_mapping.h"

namespace fornace {

class ReadOnlyFile;  // io/files.h

// The value types of GGUF metadata, with their ids in the file.
enum class GgufType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

// "uint8", "string", "array", ...; "type <id>" for an id that is not a GGUF type.
std::string gguf_type_name(GgufType type);
bool is_gguf_integer(GgufType type);
bool is_gguf_float(GgufType type);

// The C++ types that hold GGUF's numeric and boolean scalars (exactly these, no conversions).
template <typename T>
concept GgufScalar = std::same_as<T, uint8_t> || std::same_as<T, int8_t> ||
    std::same_as<T, uint16_t> || std::same_as<T, int16_t> || std::same_as<T, uint32_t> ||
    std::same_as<T, int32_t> || std::same_as<T, uint64_t> || std::same_as<T, int64_t> ||
    std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, bool>;

template <GgufScalar T>
constexpr GgufType gguf_type_of() {
  if constexpr (std::same_as<T, uint8_t>) return GgufType::u8;
  if constexpr (std::same_as<T, int8_t>) return GgufType::i8;
  if constexpr (std::same_as<T, uint16_t>) return GgufType::u16;
  if constexpr (std::same_as<T, int16_t>) return GgufType::i16;
  if constexpr (std::same_as<T, uint32_t>) return GgufType::u32;
  if constexpr (std::same_as<T, int32_t>) return GgufType::i32;
  if constexpr (std::same_as<T, uint64_t>) return GgufType::u64;
  if constexpr (std::same_as<T, int64_t>) return GgufType::i64;
  if constexpr (std::same_as<T, float>) return GgufType::f32;
  if constexpr (std::same_as<T, double>) return GgufType::f64;
  if constexpr (std::same_as<T, bool>) return GgufType::boolean;
}

// One metadata value: a scalar, or an array of scalars of one type (arrays of arrays are not
// supported). Built from C++ values of the exact type: GgufValue(uint32_t{24}) is a uint32,
// GgufValue(std::vector<float>{...}) an array of float32, GgufValue("qwen2") a string.
class GgufValue {
 public:
  template <GgufScalar T>
  GgufValue(T value) : type_(gguf_type_of<T>()), element_type_(type_), count_(1) {
    append(value);
  }
  template <GgufScalar T>
  GgufValue(const std::vector<T>& values)
      : type_(GgufType::array), element_type_(gguf_type_of<T>()), count_(values.size()) {
    for (T value : values) append(value);
  }
  GgufValue(std::string value);
  GgufValue(const char* value) : GgufValue(std::string(value)) {}
  GgufValue(std::vector<std::string> values);

  // GgufType::array for arrays, else the scalar's type.
  GgufType type() const { return type_; }
  // The scalar's type, or the type of an array's elements.
  GgufType element_type() const { return element_type_; }
  bool is_array() const { return type_ == GgufType::array; }
  // Elements of an array; 1 for a scalar.
  size_t size() const { return count_; }

  // Element `index` (0 for a scalar) as these types; nothing when it is of another kind or does
  // not fit (a negative integer as u64, a uint64 over INT64_MAX as i64). Floats are not integers.
  std::optional<uint64_t> to_u64(size_t index = 0) const;
  std::optional<int64_t> to_i64(size_t index = 0) const;
  // Any integer or float element.
  std::optional<double> to_f64(size_t index = 0) const;
  std::optional<bool> to_bool(size_t index = 0) const;
  // The strings of a string value (one) or a string array; empty for other types.
  const std::vector<std::string>& strings() const { return strings_; }

  // "uint32 24", "string \"qwen2\"", "array[3] of float32 [1, 2.5, 3]"; long arrays and
  // strings are cut, with their full length said.
  std::string describe(size_t max_elements = 8) const;

  // The element bytes as stored in the file (little-endian numbers; empty for strings).
  const std::string& raw_bytes() const { return bytes_; }
  // A value from validated element bytes (for the reader).
  static GgufValue from_raw(GgufType type, GgufType element_type, size_t count, std::string bytes,
                            std::vector<std::string> strings);

 private:
  GgufValue() = default;
  template <GgufScalar T>
  void append(T value) {
    if constexpr (std::same_as<T, bool>) {
      bytes_.push_back(value ? 1 : 0);
    } else {
      bytes_.append(reinterpret_cast<const char*>(&value), sizeof(T));
    }
  }

  GgufType type_ = GgufType::u8;
  GgufType element_type_ = GgufType::u8;
  size_t count_ = 0;
  std::string bytes_;                 // Numbers and booleans, little-endian, packed.
  std::vector<std::string> strings_;  // Strings.
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

// The alignment a GGUF file uses when it has no general.alignment.
constexpr uint64_t kGgufDefaultAlignment = 32;
constexpr int kGgufMaxDims = 4;
// The longest key or tensor name, in bytes (the specification's limit for keys).
constexpr uint64_t kGgufMaxNameBytes = 65535;

// The bytes of a tensor of `type` and GGUF `dims` (dims[0] is the row length). Throws Error
// starting with `where` (e.g. "model.gguf: tensor 'x'") when there are not 1 to 4 dims, a dim is
// not positive, the row is not whole blocks, or the size overflows.
uint64_t gguf_tensor_bytes(BlockType type, const std::vector<int64_t>& dims,
                           const std::string& where);
// The alignment that a general.alignment value asks for; throws Error starting with `where`
// when it is not an integer power of two that fits uint32.
uint64_t gguf_alignment(const GgufValue& value, const std::string& where);

struct GgufTensorInfo {
  std::string name;
  BlockType type = BlockType::f32;
  // In GGUF order: dims[0] is the innermost (row length), the last dim the outermost.
  std::vector<int64_t> dims;
  uint64_t offset = 0;  // From the start of the data section (a multiple of the alignment).
  uint64_t bytes = 0;
  const void* data = nullptr;  // The bytes in the mapping (or in the buffer given to parse).

  // Elements per row (dims[0]) and rows (the product of the other dims): a 2-D tensor is a
  // [rows, columns] matrix with rows = dims[1], columns = dims[0].
  int64_t columns() const { return dims[0]; }
  int64_t rows() const;
  // The dims outermost first (row-major, as Dims and safetensors order them).
  Dims shape() const;
};

// Whether `path` names a file (a GGUF model) rather than a checkpoint directory.
bool is_gguf_path(const std::string& path);

// Fails (Error naming `path`) unless it is a checkpoint directory or a file; what is inside is
// checked when the model loads.
void require_model_path(const std::string& path);

// One GGUF file (version 2 or 3, little-endian), mapped read-only. Everything is validated when
// it is opened: the header, counts bounded by the file size, value types (no nested arrays),
// strings and arrays inside the file, unique keys and tensor names, 1 to 4 positive dims, known
// tensor types with whole blocks per row, general.alignment a power of two, aligned offsets, and
// every tensor inside the file without overlaps. Each error names the file and the key or tensor.
class GgufFile {
 public:
  static std::shared_ptr<GgufFile> open(
      const std::string& path,
      const FileMappingOptions& mapping = FileMappingOptions::for_mode(HugePages::on));
  // Parses and validates a whole file held in memory (for fuzzing and tests); tensor data
  // pointers point into `bytes`, which must outlive their use.
  static std::shared_ptr<GgufFile> parse(const void* bytes, size_t size,
                                         const std::string& source_name);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // The file offset where tensor data starts.
  uint64_t data_offset() const { return data_offset_; }

  // Metadata, in file order.
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  bool has(const std::string& key) const { return find(key) != nullptr; }
  const GgufValue* find(const std::string& key) const;
  // Throws Error naming the file and key when the key is missing.
  const GgufValue& value(const std::string& key) const;
  // Typed getters. Each throws Error naming the file and key when the key is missing or its
  // value is of another type or does not fit.
  const std::string& get_string(const std::string& key) const;
  uint64_t get_u64(const std::string& key) const;  // Any integer type, non-negative.
  int64_t get_i64(const std::string& key) const;   // Any integer type that fits int64.
  double get_f64(const std::string& key) const;    // Any float or integer type.
  bool get_bool(const std::string& key) const;
  const std::vector<std::string>& get_string_array(const std::string& key) const;
  std::vector<float> get_f32_array(const std::string& key) const;    // float32 arrays.
  std::vector<int32_t> get_i32_array(const std::string& key) const;  // Integers that fit int32.
  // general.architecture.
  const std::string& architecture() const { return get_string("general.architecture"); }

  // Tensor infos, in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // Throws Error naming the file and tensor when there is none of that name.
  const GgufTensorInfo& tensor(const std::string& name) const;

  // Keeps the mapping alive (for Storage::borrow of tensor data); null after parse().
  const std::shared_ptr<const void>& mapping() const { return mapping_; }
  // The mapping itself, whose pages views may release (Storage::borrow).
  const std::shared_ptr<const FileMapping>& file_mapping() const { return file_mapping_; }
  // The bytes of the whole file (mapped from mapping().get()).
  size_t mapped_size() const { return file_size_; }
  // Throws Error naming the file when its size changed since it was opened (the mapping would
  // then run past the end of the file). Does nothing after parse().
  void check_unchanged() const;

 private:
  GgufFile() = default;
  [[noreturn]] void fail_key(const std::string& key, const std::string& expected,
                             const GgufValue& value) const;
  // convert(value) of a scalar key, or an Error saying what was `expected`.
  template <typename Convert>
  auto scalar(const std::string& key, const char* expected, Convert convert) const;

  std::string path_;
  std::shared_ptr<const ReadOnlyFile> file_;
  std::shared_ptr<const void> mapping_;
  std::shared_ptr<const FileMapping> file_mapping_;
  size_t file_size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::map<std::string, size_t, std::less<>> key_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace fornace
