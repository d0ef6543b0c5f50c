// Tests of the GGUF reader and writer: round trips, files built byte by byte, and bad input.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "io/gguf_writer.h"
#include "io/test_files.h"

namespace fornace {
namespace {

using test_support::error_message;
using test_support::expect_message_names;
using test_support::read_bytes;
using test_support::TemporaryDirectory;
using test_support::write_bytes;

// GGUF bytes built field by field as the specification lays them out, independent of the writer.
class GgufBytes {
 public:
  GgufBytes& raw(const std::string& bytes) {
    bytes_ += bytes;
    return *this;
  }
  GgufBytes& u8(uint8_t value) { return little_endian(value, 1); }
  GgufBytes& u32(uint32_t value) { return little_endian(value, 4); }
  GgufBytes& u64(uint64_t value) { return little_endian(value, 8); }
  GgufBytes& str(const std::string& text) { return u64(text.size()).raw(text); }
  GgufBytes& header(uint64_t tensors, uint64_t keys, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(tensors).u64(keys);
  }
  // A key with a uint32 value (value type 4).
  GgufBytes& key_u32(const std::string& key, uint32_t value) { return str(key).u32(4).u32(value); }
  GgufBytes& key_string(const std::string& key, const std::string& value) {
    return str(key).u32(8).str(value);
  }
  GgufBytes& tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                    uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t dim : dims) u64(dim);
    return u32(type).u64(offset);
  }
  GgufBytes& pad_to(size_t alignment) {
    bytes_.resize((bytes_.size() + alignment - 1) / alignment * alignment, '\0');
    return *this;
  }
  GgufBytes& zeros(size_t count) { return raw(std::string(count, '\0')); }
  const std::string& bytes() const { return bytes_; }
  size_t size() const { return bytes_.size(); }

 private:
  GgufBytes& little_endian(uint64_t value, int bytes) {
    for (int index = 0; index < bytes; ++index) {
      bytes_ += static_cast<char>((value >> (8 * index)) & 0xff);
    }
    return *this;
  }
  std::string bytes_;
};

constexpr uint32_t kF32 = 0;  // ggml type ids, from the specification.
constexpr uint32_t kQ8_0 = 8;

// A valid file: key general.architecture = "qwen2", an f32 tensor "a" [4] at 0 and a Q8_0
// tensor "b" [32 x 2] (68 bytes) at 32.
GgufBytes valid_file() {
  GgufBytes file;
  file.header(2, 1).key_string("general.architecture", "qwen2");
  file.tensor("a", {4}, kF32, 0).tensor("b", {32, 2}, kQ8_0, 32).pad_to(32);
  return file.zeros(32 + 68);
}

// Opens a file holding `bytes` and returns the error message (a test failure when none).
std::string open_error(const TemporaryDirectory& directory, const std::string& bytes) {
  std::string path = directory.file("model.gguf");
  write_bytes(path, bytes);
  return error_message([&] { GgufFile::open(path); });
}

// Expects opening a file holding `bytes` to fail with a message naming the file and `parts`.
void expect_open_error(const std::string& bytes, std::vector<std::string> parts) {
  TemporaryDirectory directory;
  parts.push_back(directory.file("model.gguf"));
  expect_message_names(open_error(directory, bytes), parts);
}

std::shared_ptr<GgufFile> open_bytes(const TemporaryDirectory& directory,
                                     const std::string& bytes) {
  std::string path = directory.file("model.gguf");
  write_bytes(path, bytes);
  return GgufFile::open(path);
}

// Bytes 0, 1, 2, ... from a start that differs per tensor, so misplaced data shows.
void fill_pattern(std::span<std::byte> data, size_t start) {
  for (size_t index = 0; index < data.size(); ++index) {
    data[index] = static_cast<std::byte>((start + index * 7) & 0xff);
  }
}

// --- Round trips -------------------------------------------------------------------------------

TEST(GgufRoundTrip, EveryValueTypeReadsBackExactly) {
  TemporaryDirectory directory;
  GgufWriter writer;
  writer.set("u8", uint8_t{255});
  writer.set("i8", int8_t{-128});
  writer.set("u16", uint16_t{65535});
  writer.set("i16", int16_t{-32768});
  writer.set("u32", uint32_t{4294967295u});
  writer.set("i32", int32_t{-2147483647 - 1});
  writer.set("u64", uint64_t{18446744073709551615ull});
  writer.set("i64", int64_t{-9223372036854775807ll - 1});
  writer.set("f32", 0.1f);
  writer.set("f64", 1e-300);
  writer.set("true", true);
  writer.set("false", false);
  writer.set("string", "Grüße, 世界");
  writer.set("empty_string", "");
  writer.set("u8s", std::vector<uint8_t>{0, 1, 255});
  writer.set("i8s", std::vector<int8_t>{-128, 0, 127});
  writer.set("u16s", std::vector<uint16_t>{1, 65535});
  writer.set("i16s", std::vector<int16_t>{-32768, 32767});
  writer.set("u32s", std::vector<uint32_t>{7, 4294967295u});
  writer.set("i32s", std::vector<int32_t>{-5, 0, 151643});
  writer.set("u64s", std::vector<uint64_t>{0, 18446744073709551615ull});
  writer.set("i64s", std::vector<int64_t>{-1, 9223372036854775807ll});
  writer.set("f32s", std::vector<float>{-0.0f, 1.5f, 3.4e38f, 1e-45f});
  writer.set("f64s", std::vector<double>{-2.5, 1e300});
  writer.set("bools", std::vector<bool>{true, false, true});
  writer.set("strings", std::vector<std::string>{"a", "", "<|im_start|>", "\xe2\x96\x81the"});
  writer.set("empty_array", std::vector<int32_t>{});
  std::string path = directory.file("values.gguf");
  writer.write(path, [](size_t, std::span<std::byte>) {});

  auto file = GgufFile::open(path);
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->metadata().size(), writer.metadata().size());
  for (size_t index = 0; index < writer.metadata().size(); ++index) {
    EXPECT_EQ(file->metadata()[index].key, writer.metadata()[index].key);
  }
  EXPECT_EQ(file->get_u64("u8"), 255u);
  EXPECT_EQ(file->get_i64("i8"), -128);
  EXPECT_EQ(file->get_u64("u16"), 65535u);
  EXPECT_EQ(file->get_i64("i16"), -32768);
  EXPECT_EQ(file->get_u64("u32"), 4294967295u);
  EXPECT_EQ(file->get_i64("i32"), -2147483648ll);
  EXPECT_EQ(file->get_u64("u64"), 18446744073709551615ull);
  EXPECT_EQ(file->get_i64("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(file->get_f64("f32"), static_cast<double>(0.1f));
  EXPECT_EQ(file->get_f64("f64"), 1e-300);
  EXPECT_TRUE(file->get_bool("true"));
  EXPECT_FALSE(file->get_bool("false"));
  EXPECT_EQ(file->get_string("string"), "Grüße, 世界");
  EXPECT_EQ(file->get_string("empty_string"), "");
  EXPECT_EQ(file->get_i32_array("u8s"), (std::vector<int32_t>{0, 1, 255}));
  EXPECT_EQ(file->get_i32_array("i8s"), (std::vector<int32_t>{-128, 0, 127}));
  EXPECT_EQ(file->get_i32_array("u16s"), (std::vector<int32_t>{1, 65535}));
  EXPECT_EQ(file->get_i32_array("i16s"), (std::vector<int32_t>{-32768, 32767}));
  EXPECT_EQ(file->get_i32_array("i32s"), (std::vector<int32_t>{-5, 0, 151643}));
  const GgufValue& u32s = file->value("u32s");
  EXPECT_EQ(u32s.element_type(), GgufType::u32);
  EXPECT_EQ(u32s.to_u64(1), 4294967295u);
  const GgufValue& u64s = file->value("u64s");
  EXPECT_EQ(u64s.to_u64(1), 18446744073709551615ull);
  EXPECT_EQ(u64s.to_i64(1), std::nullopt);
  const GgufValue& i64s = file->value("i64s");
  EXPECT_EQ(i64s.to_i64(0), -1);
  EXPECT_EQ(i64s.to_i64(1), 9223372036854775807ll);
  std::vector<float> f32s = file->get_f32_array("f32s");
  ASSERT_EQ(f32s.size(), 4u);
  EXPECT_TRUE(std::signbit(f32s[0]));
  EXPECT_EQ(f32s[1], 1.5f);
  EXPECT_EQ(f32s[2], 3.4e38f);
  EXPECT_EQ(f32s[3], 1e-45f);
  EXPECT_EQ(file->value("f64s").to_f64(1), 1e300);
  EXPECT_EQ(file->value("bools").to_bool(0), true);
  EXPECT_EQ(file->value("bools").to_bool(1), false);
  EXPECT_EQ(file->get_string_array("strings"),
            (std::vector<std::string>{"a", "", "<|im_start|>", "\xe2\x96\x81the"}));
  EXPECT_TRUE(file->get_i32_array("empty_array").empty());
  EXPECT_EQ(file->value("empty_array").element_type(), GgufType::i32);
  // Each value keeps its type, and arrays their element type.
  for (const GgufKeyValue& written : writer.metadata()) {
    const GgufValue& read = file->value(written.key);
    EXPECT_EQ(read.type(), written.value.type()) << written.key;
    EXPECT_EQ(read.element_type(), written.value.element_type()) << written.key;
    EXPECT_EQ(read.size(), written.value.size()) << written.key;
  }
}

struct TensorCase {
  std::string name;
  BlockType type;
  std::vector<int64_t> dims;
  uint64_t bytes;  // From the block sizes in the specification.
};

std::vector<TensorCase> tensor_cases() {
  return {
      {"f32.vector", BlockType::f32, {5}, 20},
      {"f16.matrix", BlockType::f16, {3, 2}, 12},
      {"bf16.cube", BlockType::bf16, {2, 3, 4}, 48},
      {"q8_0.matrix", BlockType::q8_0, {64, 3}, 2 * 34 * 3},
      {"q4_0.matrix", BlockType::q4_0, {32, 2}, 18 * 2},
      {"q4_k.matrix", BlockType::q4_k, {512, 2}, 2 * 144 * 2},
      {"q6_k.rank4", BlockType::q6_k, {256, 1, 2, 3}, 210 * 6},
      {"q5_k.vector", BlockType::q5_k, {256}, 176},
  };
}

TEST(GgufRoundTrip, TensorsOfSeveralTypesKeepTypeDimsDataAndAlignment) {
  TemporaryDirectory directory;
  GgufWriter writer;
  writer.set("general.architecture", "qwen2");
  std::vector<TensorCase> cases = tensor_cases();
  for (const TensorCase& tensor : cases) writer.add_tensor(tensor.name, tensor.type, tensor.dims);
  std::string path = directory.file("tensors.gguf");
  std::vector<size_t> produced;
  writer.write(path, [&](size_t index, std::span<std::byte> data) {
    EXPECT_EQ(data.size(), cases[index].bytes) << cases[index].name;
    produced.push_back(index);
    fill_pattern(data, index * 31);
  });
  EXPECT_EQ(produced, (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7}));

  auto file = GgufFile::open(path);
  EXPECT_EQ(file->architecture(), "qwen2");
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->data_offset() % 32, 0u);
  std::string bytes = read_bytes(path);
  const char* mapping_begin = static_cast<const char*>(file->tensors()[0].data) -
                              file->data_offset() - file->tensors()[0].offset;
  uint64_t expected_offset = 0;
  ASSERT_EQ(file->tensors().size(), cases.size());
  for (size_t index = 0; index < cases.size(); ++index) {
    const TensorCase& expected = cases[index];
    const GgufTensorInfo& info = file->tensors()[index];
    EXPECT_EQ(info.name, expected.name);
    EXPECT_EQ(info.type, expected.type) << expected.name;
    EXPECT_EQ(info.dims, expected.dims) << expected.name;
    EXPECT_EQ(info.bytes, expected.bytes) << expected.name;
    EXPECT_EQ(info.offset, expected_offset) << expected.name;
    expected_offset = (expected_offset + expected.bytes + 31) / 32 * 32;
    std::vector<std::byte> pattern(expected.bytes);
    fill_pattern(pattern, index * 31);
    ASSERT_LE(file->data_offset() + info.offset + info.bytes, bytes.size());
    EXPECT_EQ(std::memcmp(bytes.data() + file->data_offset() + info.offset, pattern.data(),
                          pattern.size()),
              0)
        << expected.name;
    EXPECT_EQ(std::memcmp(info.data, pattern.data(), pattern.size()), 0) << expected.name;
    EXPECT_EQ(static_cast<const char*>(info.data) - mapping_begin,
              static_cast<ptrdiff_t>(file->data_offset() + info.offset))
        << expected.name;
    EXPECT_EQ(&file->tensor(expected.name), &info);
  }
  EXPECT_EQ(bytes.size(), file->data_offset() + expected_offset);
  EXPECT_NE(file->mapping(), nullptr);
}

TEST(GgufRoundTrip, MatrixHelpersGiveRowsAndColumns) {
  GgufTensorInfo matrix;
  matrix.dims = {896, 151936};
  EXPECT_EQ(matrix.columns(), 896);
  EXPECT_EQ(matrix.rows(), 151936);
  EXPECT_EQ(matrix.shape(), (Dims{151936, 896}));
  GgufTensorInfo cube;
  cube.dims = {4, 3, 2};
  EXPECT_EQ(cube.columns(), 4);
  EXPECT_EQ(cube.rows(), 6);
  EXPECT_EQ(cube.shape(), (Dims{2, 3, 4}));
}

TEST(GgufRoundTrip, ConfiguredAlignmentPlacesDataAndEveryTensor) {
  TemporaryDirectory directory;
  GgufWriter writer;
  writer.set("general.alignment", uint32_t{256});
  writer.add_tensor("a", BlockType::f32, {3});
  writer.add_tensor("b", BlockType::f16, {5});
  writer.add_tensor("c", BlockType::q8_0, {32});
  std::string path = directory.file("aligned.gguf");
  writer.write(path, [](size_t index, std::span<std::byte> data) { fill_pattern(data, index); });
  auto file = GgufFile::open(path);
  EXPECT_EQ(file->alignment(), 256u);
  EXPECT_EQ(file->data_offset() % 256, 0u);
  EXPECT_EQ(file->tensor("a").offset, 0u);
  EXPECT_EQ(file->tensor("b").offset, 256u);
  EXPECT_EQ(file->tensor("c").offset, 512u);
}

TEST(GgufRoundTrip, ReadsAVersion2FileBuiltByHand) {
  TemporaryDirectory directory;
  GgufBytes bytes;
  bytes.header(1, 2, 2)
      .key_string("general.architecture", "llama")
      .key_u32("llama.block_count", 16);
  bytes.tensor("token_embd.weight", {4, 2}, kF32, 0).pad_to(32);
  float values[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  bytes.raw(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  auto file = open_bytes(directory, bytes.bytes());
  EXPECT_EQ(file->version(), 2u);
  EXPECT_EQ(file->architecture(), "llama");
  EXPECT_EQ(file->get_u64("llama.block_count"), 16u);
  const GgufTensorInfo& embedding = file->tensor("token_embd.weight");
  EXPECT_EQ(embedding.rows(), 2);
  EXPECT_EQ(embedding.columns(), 4);
  ASSERT_EQ(embedding.bytes, sizeof(values));
  EXPECT_EQ(std::memcmp(embedding.data, values, sizeof(values)), 0);
  EXPECT_EQ(file->data_offset(), bytes.size() - sizeof(values));
}

TEST(GgufRoundTrip, ParseReadsBytesInMemory) {
  GgufBytes bytes = valid_file();
  auto file = GgufFile::parse(bytes.bytes().data(), bytes.size(), "in-memory");
  EXPECT_EQ(file->path(), "in-memory");
  EXPECT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensor("b").data, bytes.bytes().data() + file->data_offset() + 32);
  EXPECT_EQ(file->mapping(), nullptr);
  file->check_unchanged();
}

// --- The writer --------------------------------------------------------------------------------

TEST(GgufWriterFile, SettingAKeyAgainReplacesItsValueInPlace) {
  GgufWriter writer;
  writer.set("first", uint32_t{1});
  writer.set("second", "two");
  writer.set("first", "one");
  ASSERT_EQ(writer.metadata().size(), 2u);
  EXPECT_EQ(writer.metadata()[0].key, "first");
  EXPECT_EQ(writer.metadata()[0].value.type(), GgufType::string);
  EXPECT_EQ(writer.metadata()[1].key, "second");
}

TEST(GgufWriterFile, LeavesNoTemporaryFiles) {
  TemporaryDirectory directory;
  GgufWriter writer;
  writer.add_tensor("x", BlockType::f32, {4});
  writer.write(directory.file("model.gguf"), [](size_t, std::span<std::byte>) {});
  EXPECT_EQ(test_support::list_directory(directory.path()),
            (std::vector<std::string>{"model.gguf"}));
}

TEST(GgufWriterFile, AFailingProducerLeavesTheOldFileAndNoTemporary) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.gguf");
  write_bytes(path, "old contents");
  GgufWriter writer;
  writer.add_tensor("x", BlockType::f32, {4});
  writer.add_tensor("y", BlockType::f32, {4});
  std::string message = error_message([&] {
    writer.write(path, [](size_t index, std::span<std::byte>) {
      if (index == 1) fail("producer failed on tensor 'y'");
    });
  });
  EXPECT_NE(message.find("producer failed"), std::string::npos) << message;
  EXPECT_EQ(read_bytes(path), "old contents");
  EXPECT_EQ(test_support::list_directory(directory.path()),
            (std::vector<std::string>{"model.gguf"}));
}

TEST(GgufWriterFile, RejectsRepeatedTensorNamesBeforeWriting) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.gguf");
  GgufWriter writer;
  writer.add_tensor("x", BlockType::f32, {4});
  writer.add_tensor("x", BlockType::f32, {2});
  expect_message_names(error_message([&] { writer.write(path, {}); }), {path, "'x'", "twice"});
  EXPECT_TRUE(test_support::list_directory(directory.path()).empty());
}

TEST(GgufWriterFile, RejectsDimsThatAreNotWholeBlocksOrOutOfRange) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.gguf");
  struct Bad {
    BlockType type;
    std::vector<int64_t> dims;
    const char* says;
  };
  for (const Bad& bad : std::vector<Bad>{{BlockType::q8_0, {48}, "multiple"},
                                         {BlockType::f32, {}, "0 dims"},
                                         {BlockType::f32, {1, 1, 1, 1, 1}, "5 dims"},
                                         {BlockType::f16, {4, 0}, "dim 1 is 0"},
                                         {BlockType::f32, {1ll << 40, 1ll << 40}, "too large"}}) {
    GgufWriter writer;
    writer.add_tensor("w", bad.type, bad.dims);
    expect_message_names(error_message([&] { writer.write(path, {}); }),
                         {path, "tensor 'w'", bad.says});
  }
  EXPECT_TRUE(test_support::list_directory(directory.path()).empty());
}

TEST(GgufWriterFile, RejectsOverlongNamesAndAMissingProducer) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.gguf");
  GgufWriter long_key;
  long_key.set(std::string(70000, 'k'), uint8_t{1});
  expect_message_names(error_message([&] { long_key.write(path, {}); }), {path, "key", "65535"});
  GgufWriter long_name;
  long_name.add_tensor(std::string(70000, 't'), BlockType::f32, {1});
  expect_message_names(error_message([&] { long_name.write(path, {}); }),
                       {path, "tensor name", "65535"});
  GgufWriter no_producer;
  no_producer.add_tensor("w", BlockType::f32, {1});
  expect_message_names(error_message([&] { no_producer.write(path, {}); }), {path, "producer"});
  EXPECT_TRUE(test_support::list_directory(directory.path()).empty());
}

TEST(GgufWriterFile, RejectsAnAlignmentThatIsNotAPowerOfTwo) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.gguf");
  GgufWriter writer;
  writer.set("general.alignment", uint32_t{48});
  expect_message_names(error_message([&] { writer.write(path, {}); }),
                       {path, "general.alignment", "power of two", "48"});
}

// --- Lookups and typed getters -----------------------------------------------------------------

TEST(GgufGetters, MissingKeyNamesFileAndKey) {
  TemporaryDirectory directory;
  auto file = open_bytes(directory, valid_file().bytes());
  for (auto get : std::vector<std::function<void()>>{
           [&] { file->get_string("llama.missing"); }, [&] { file->get_u64("llama.missing"); },
           [&] { file->get_f64("llama.missing"); }, [&] { file->get_bool("llama.missing"); },
           [&] { file->get_string_array("llama.missing"); },
           [&] { file->get_f32_array("llama.missing"); },
           [&] { file->get_i32_array("llama.missing"); }}) {
    expect_message_names(error_message(get), {file->path(), "'llama.missing'", "missing"});
  }
  EXPECT_FALSE(file->has("llama.missing"));
  EXPECT_TRUE(file->has("general.architecture"));
  EXPECT_EQ(file->find("llama.missing"), nullptr);
}

TEST(GgufGetters, WrongTypeNamesFileKeyAndTheTypeFound) {
  TemporaryDirectory directory;
  GgufWriter writer;
  writer.set("text", "qwen2");
  writer.set("count", uint32_t{24});
  writer.set("scale", 0.5f);
  writer.set("flag", true);
  writer.set("ids", std::vector<int32_t>{1, 2});
  writer.set("names", std::vector<std::string>{"a"});
  std::string path = directory.file("model.gguf");
  writer.write(path, {});
  auto file = GgufFile::open(path);
  struct Case {
    std::function<void()> get;
    const char* key;
    const char* found;
  };
  for (const Case& wrong :
       std::vector<Case>{{[&] { file->get_string("count"); }, "'count'", "uint32 24"},
                         {[&] { file->get_u64("text"); }, "'text'", "string"},
                         {[&] { file->get_u64("scale"); }, "'scale'", "float32"},
                         {[&] { file->get_i64("ids"); }, "'ids'", "array"},
                         {[&] { file->get_f64("flag"); }, "'flag'", "bool"},
                         {[&] { file->get_bool("count"); }, "'count'", "uint32"},
                         {[&] { file->get_string_array("ids"); }, "'ids'", "int32"},
                         {[&] { file->get_f32_array("names"); }, "'names'", "string"},
                         {[&] { file->get_f32_array("scale"); }, "'scale'", "float32 0.5"},
                         {[&] { file->get_i32_array("names"); }, "'names'", "string"},
                         {[&] { file->get_string("names"); }, "'names'", "array"}}) {
    expect_message_names(error_message(wrong.get), {path, wrong.key, "expected", wrong.found});
  }
}

TEST(GgufGetters, IntegerGettersAcceptAnyIntegerTypeThatFits) {
  TemporaryDirectory directory;
  GgufWriter writer;
  writer.set("u8", uint8_t{200});
  writer.set("i16", int16_t{300});
  writer.set("negative", int32_t{-3});
  writer.set("big", uint64_t{1} << 40);
  writer.set("wide", std::vector<int64_t>{1, int64_t{1} << 33});
  std::string path = directory.file("model.gguf");
  writer.write(path, {});
  auto file = GgufFile::open(path);
  EXPECT_EQ(file->get_u64("u8"), 200u);
  EXPECT_EQ(file->get_u64("i16"), 300u);
  EXPECT_EQ(file->get_u64("big"), uint64_t{1} << 40);
  EXPECT_EQ(file->get_i64("negative"), -3);
  EXPECT_EQ(file->get_f64("negative"), -3.0);
  EXPECT_EQ(file->get_f64("big"), 1099511627776.0);
  expect_message_names(error_message([&] { file->get_u64("negative"); }),
                       {path, "'negative'", "-3"});
  expect_message_names(error_message([&] { file->get_i32_array("wide"); }),
                       {path, "'wide'", "element 1", "int32"});
}

TEST(GgufGetters, TensorLookupNamesFileAndTensor) {
  TemporaryDirectory directory;
  auto file = open_bytes(directory, valid_file().bytes());
  EXPECT_EQ(file->find_tensor("output.weight"), nullptr);
  EXPECT_NE(file->find_tensor("a"), nullptr);
  expect_message_names(error_message([&] { file->tensor("output.weight"); }),
                       {file->path(), "'output.weight'"});
}

TEST(GgufGetters, CheckUnchangedNoticesATruncatedFile) {
  TemporaryDirectory directory;
  auto file = open_bytes(directory, valid_file().bytes());
  file->check_unchanged();
  std::filesystem::resize_file(file->path(), 40);
  expect_message_names(error_message([&] { file->check_unchanged(); }),
                       {file->path(), "changed size"});
}

TEST(GgufGetters, DescribeShowsTypeAndValues) {
  EXPECT_EQ(GgufValue(uint32_t{24}).describe(), "uint32 24");
  EXPECT_EQ(GgufValue("qwen2").describe(), "string \"qwen2\"");
  EXPECT_EQ(GgufValue(std::vector<float>{1, 2.5f, 3}).describe(2),
            "array[3] of float32 [1, 2.5, ...]");
}

// --- Bad input: each names the file and what is wrong ------------------------------------------

TEST(GgufBadInput, TruncatedHeader) {
  expect_open_error(valid_file().bytes().substr(0, 20), {"20 bytes", "too short"});
}

TEST(GgufBadInput, EveryTruncationOfAValidFileIsAnError) {
  std::string bytes = valid_file().bytes();
  for (size_t size = 0; size < bytes.size(); ++size) {
    std::string prefix = bytes.substr(0, size);
    std::string message = error_message([&] { GgufFile::parse(prefix.data(), size, "cut.gguf"); });
    expect_message_names(message, {"cut.gguf"});
  }
}

TEST(GgufBadInput, WrongMagic) {
  std::string bytes = valid_file().bytes();
  bytes[3] = 'X';
  expect_open_error(bytes, {"not a GGUF file", "GGUX"});
}

TEST(GgufBadInput, UnsupportedVersion) {
  for (uint32_t version : {1u, 4u, 0u}) {
    GgufBytes bytes;
    bytes.header(0, 0, version);
    expect_open_error(bytes.bytes(), {"version " + std::to_string(version)});
  }
}

TEST(GgufBadInput, BigEndianFile) {
  GgufBytes bytes;
  bytes.raw("GGUF").raw(std::string("\0\0\0\3", 4)).zeros(16);
  expect_open_error(bytes.bytes(), {"big-endian"});
}

TEST(GgufBadInput, HugeTensorCount) {
  GgufBytes bytes;
  bytes.header(uint64_t{1} << 60, 0).zeros(64);
  expect_open_error(bytes.bytes(), {"tensor count 1152921504606846976", "cannot fit"});
}

TEST(GgufBadInput, HugeKeyCount) {
  GgufBytes bytes;
  bytes.header(0, ~uint64_t{0}).zeros(64);
  expect_open_error(bytes.bytes(), {"key count 18446744073709551615", "cannot fit"});
}

TEST(GgufBadInput, KeyPastTheEnd) {
  GgufBytes bytes;
  bytes.header(0, 1).u64(1000).raw("general.name");
  expect_open_error(bytes.bytes(), {"metadata entry 0", "1000 bytes", "past the end"});
}

TEST(GgufBadInput, StringValuePastTheEnd) {
  GgufBytes bytes;
  bytes.header(0, 1).str("general.name").u32(8).u64(1ull << 40).raw("qwen");
  expect_open_error(bytes.bytes(), {"key 'general.name'", "byte 56", "past the end"});
}

TEST(GgufBadInput, ArrayPastTheEnd) {
  GgufBytes bytes;
  bytes.header(0, 1).str("tokenizer.ggml.scores").u32(9).u32(6).u64(1000).zeros(40);
  expect_open_error(bytes.bytes(),
                    {"key 'tokenizer.ggml.scores'", "array of 1000 float32", "past the end"});
}

TEST(GgufBadInput, StringArrayPastTheEnd) {
  GgufBytes bytes;
  bytes.header(0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64(~uint64_t{0} / 2).str("a");
  expect_open_error(bytes.bytes(), {"key 'tokenizer.ggml.tokens'",
                                    "array of 9223372036854775807 string", "past the end"});
}

TEST(GgufBadInput, UnknownValueType) {
  GgufBytes bytes;
  bytes.header(0, 1).str("general.name").u32(13).zeros(8);
  expect_open_error(bytes.bytes(), {"key 'general.name'", "unknown value type 13"});
}

TEST(GgufBadInput, UnknownArrayElementType) {
  GgufBytes bytes;
  bytes.header(0, 1).str("list").u32(9).u32(99).u64(1).zeros(8);
  expect_open_error(bytes.bytes(), {"key 'list'", "array element type 99"});
}

TEST(GgufBadInput, NestedArray) {
  GgufBytes bytes;
  bytes.header(0, 1).str("nested").u32(9).u32(9).u64(1).u32(4).u64(1).u32(7);
  expect_open_error(bytes.bytes(), {"key 'nested'", "array of arrays"});
}

TEST(GgufBadInput, BoolThatIsNeitherZeroNorOne) {
  GgufBytes bytes;
  bytes.header(0, 1).str("flag").u32(7).u8(2);
  expect_open_error(bytes.bytes(), {"key 'flag'", "bool 2"});
}

TEST(GgufBadInput, DuplicateKey) {
  GgufBytes bytes;
  bytes.header(0, 2).key_u32("llama.block_count", 1).key_u32("llama.block_count", 2);
  expect_open_error(bytes.bytes(), {"key 'llama.block_count'", "twice"});
}

TEST(GgufBadInput, UnknownTensorType) {
  GgufBytes bytes;
  bytes.header(1, 0).tensor("blk.0.attn_q.weight", {32}, 99, 0).pad_to(32).zeros(128);
  expect_open_error(bytes.bytes(), {"tensor 'blk.0.attn_q.weight'", "unknown tensor type id 99"});
}

TEST(GgufBadInput, UnsupportedGgmlTensorTypeIsNamed) {
  GgufBytes bytes;
  bytes.header(1, 0).tensor("w", {256}, 10, 0).pad_to(32).zeros(128);
  expect_open_error(bytes.bytes(), {"tensor 'w'", "Q2_K", "id 10", "not supported"});
}

TEST(GgufBadInput, ZeroDims) {
  GgufBytes bytes;
  bytes.header(1, 0).tensor("w", {}, kF32, 0).zeros(64);
  expect_open_error(bytes.bytes(), {"tensor 'w'", "n_dims 0"});
}

TEST(GgufBadInput, FiveDims) {
  GgufBytes bytes;
  bytes.header(1, 0).tensor("w", {1, 1, 1, 1, 1}, kF32, 0).pad_to(32).zeros(32);
  expect_open_error(bytes.bytes(), {"tensor 'w'", "n_dims 5"});
}

TEST(GgufBadInput, DimOfZero) {
  GgufBytes bytes;
  bytes.header(1, 0).tensor("w", {4, 0}, kF32, 0).pad_to(32).zeros(32);
  expect_open_error(bytes.bytes(), {"tensor 'w'", "dim 1", "is 0"});
}

TEST(GgufBadInput, DimsWhoseProductOverflows) {
  GgufBytes bytes;
  bytes.header(1, 0).tensor("w", {1ull << 32, 1ull << 32}, kF32, 0).pad_to(32).zeros(32);
  expect_open_error(bytes.bytes(), {"tensor 'w'", "too large"});
}

TEST(GgufBadInput, RowThatIsNotWholeBlocks) {
  GgufBytes bytes;
  bytes.header(1, 0).tensor("w", {48, 2}, kQ8_0, 0).pad_to(32).zeros(256);
  expect_open_error(bytes.bytes(), {"tensor 'w'", "48", "Q8_0", "32"});
}

TEST(GgufBadInput, DuplicateTensorName) {
  GgufBytes bytes;
  bytes.header(2, 0).tensor("w", {4}, kF32, 0).tensor("w", {4}, kF32, 32).pad_to(32).zeros(64);
  expect_open_error(bytes.bytes(), {"tensor 'w'", "twice"});
}

TEST(GgufBadInput, TensorOutOfBounds) {
  GgufBytes bytes;
  bytes.header(1, 0).tensor("output.weight", {8}, kF32, 64).pad_to(32).zeros(64);
  expect_open_error(bytes.bytes(), {"tensor 'output.weight'", "offset 64", "past the end"});
}

TEST(GgufBadInput, TensorWithAHugeOffset) {
  GgufBytes bytes;
  bytes.header(1, 0).tensor("w", {8}, kF32, ~uint64_t{0} - 31).pad_to(32).zeros(64);
  expect_open_error(bytes.bytes(), {"tensor 'w'", "past the end"});
}

TEST(GgufBadInput, TruncatedTensorData) {
  std::string bytes = valid_file().bytes();
  expect_open_error(bytes.substr(0, bytes.size() - 1), {"tensor 'b'", "past the end"});
}

TEST(GgufBadInput, OverlappingTensors) {
  GgufBytes bytes;
  bytes.header(2, 0).tensor("first", {16}, kF32, 0).tensor("second", {8}, kF32, 32).pad_to(32);
  expect_open_error(bytes.zeros(128).bytes(), {"tensor 'second'", "overlaps", "'first'"});
}

TEST(GgufBadInput, MisalignedOffset) {
  GgufBytes bytes;
  bytes.header(1, 0).tensor("w", {4}, kF32, 16).pad_to(32).zeros(64);
  expect_open_error(bytes.bytes(), {"tensor 'w'", "offset 16", "alignment 32"});
}

TEST(GgufBadInput, MisalignedForAConfiguredAlignment) {
  GgufBytes bytes;
  bytes.header(1, 1).key_u32("general.alignment", 64).tensor("w", {4}, kF32, 32).pad_to(64);
  expect_open_error(bytes.zeros(128).bytes(), {"tensor 'w'", "offset 32", "alignment 64"});
}

TEST(GgufBadInput, AlignmentNotAPowerOfTwo) {
  for (uint32_t alignment : {0u, 3u, 48u}) {
    GgufBytes bytes;
    bytes.header(0, 1).key_u32("general.alignment", alignment);
    expect_open_error(bytes.bytes(), {"key 'general.alignment'", "power of two",
                                      "uint32 " + std::to_string(alignment)});
  }
}

TEST(GgufBadInput, AlignmentOfTheWrongType) {
  GgufBytes bytes;
  bytes.header(0, 1).key_string("general.alignment", "32");
  expect_open_error(bytes.bytes(), {"key 'general.alignment'", "string"});
}

TEST(GgufBadInput, KeyLongerThanTheLimit) {
  GgufBytes bytes;
  bytes.header(0, 1).str(std::string(70000, 'k')).u32(4).u32(0);
  expect_open_error(bytes.bytes(), {"70000 bytes", "limit"});
}

TEST(GgufBadInput, EmptyFile) { expect_open_error("", {"0 bytes", "too short"}); }

}  // namespace
}  // namespace fornace
