// Checks the GGUF writer against an independent reader: npm's @huggingface/gguf, run by node.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/source_paths.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/test_files.h"

namespace fornace {
namespace {

using nlohmann::json;
using test_support::TemporaryDirectory;

const std::string kReferenceDir = fornace::test_paths::source("tests/reference/gguf");

// Value type ids from the GGUF specification.
template <typename T>
constexpr int spec_type_id() {
  if constexpr (std::is_same_v<T, uint8_t>) return 0;
  if constexpr (std::is_same_v<T, int8_t>) return 1;
  if constexpr (std::is_same_v<T, uint16_t>) return 2;
  if constexpr (std::is_same_v<T, int16_t>) return 3;
  if constexpr (std::is_same_v<T, uint32_t>) return 4;
  if constexpr (std::is_same_v<T, int32_t>) return 5;
  if constexpr (std::is_same_v<T, float>) return 6;
  if constexpr (std::is_same_v<T, bool>) return 7;
  if constexpr (std::is_same_v<T, std::string>) return 8;
  if constexpr (std::is_same_v<T, uint64_t>) return 10;
  if constexpr (std::is_same_v<T, int64_t>) return 11;
  if constexpr (std::is_same_v<T, double>) return 12;
}
constexpr int kArrayTypeId = 9;

// A value as read_gguf.mjs prints it: 64-bit integers (JavaScript BigInt) as decimal strings,
// float32 widened to double, the rest as JSON numbers, booleans and strings.
template <typename T>
json printed(const T& value) {
  if constexpr (std::is_same_v<T, uint64_t> || std::is_same_v<T, int64_t>) {
    return std::to_string(value);
  } else if constexpr (std::is_same_v<T, float>) {
    return static_cast<double>(value);
  } else {
    return value;
  }
}

// Metadata for the writer, and what the independent reader should print for it.
class Expectations {
 public:
  template <typename T>
  void scalar(GgufWriter& writer, const std::string& key, const T& value) {
    writer.set(key, value);
    expected_[key] = {
        {"type", spec_type_id<T>()}, {"sub_type", nullptr}, {"value", printed(value)}};
  }
  template <typename T>
  void array(GgufWriter& writer, const std::string& key, const std::vector<T>& values) {
    writer.set(key, values);
    json items = json::array();
    for (const T& value : values) items.push_back(printed(static_cast<T>(value)));
    expected_[key] = {{"type", kArrayTypeId}, {"sub_type", spec_type_id<T>()}, {"value", items}};
  }
  const json& expected() const { return expected_; }

 private:
  json expected_ = json::object();
};

struct ExpectedTensor {
  std::string name;
  BlockType type;
  int ggml_id;  // From the specification.
  std::vector<int64_t> dims;
  uint64_t bytes;  // From the block sizes in the specification.
};

TEST(GgufIndependentReader, ReadsWhatWeWrite) {
  std::string package = std::string(kReferenceDir) + "/node_modules/@huggingface/gguf/package.json";
  ASSERT_TRUE(std::filesystem::exists(package))
      << "the independent GGUF reader is not installed: run `npm ci --prefix tests/reference/gguf`"
         " in the source tree (make test does it through scripts/get-test-packages.sh)";

  TemporaryDirectory directory;
  GgufWriter writer;
  Expectations expectations;
  expectations.scalar(writer, "general.architecture", std::string("qwen2"));
  expectations.scalar(writer, "general.name", std::string("Grüße \"quoted\" \\ 世界"));
  expectations.scalar(writer, "test.u8", uint8_t{255});
  expectations.scalar(writer, "test.i8", int8_t{-128});
  expectations.scalar(writer, "test.u16", uint16_t{65535});
  expectations.scalar(writer, "test.i16", int16_t{-32768});
  expectations.scalar(writer, "test.u32", uint32_t{4294967295u});
  expectations.scalar(writer, "test.i32", int32_t{-2147483647 - 1});
  expectations.scalar(writer, "test.u64", uint64_t{18446744073709551615ull});
  expectations.scalar(writer, "test.i64", int64_t{-9223372036854775807ll - 1});
  expectations.scalar(writer, "test.f32", 0.1f);
  expectations.scalar(writer, "test.f64", -1.25e-300);
  expectations.scalar(writer, "test.true", true);
  expectations.scalar(writer, "test.false", false);
  expectations.scalar(writer, "test.empty_string", std::string());
  expectations.array(writer, "test.u8s", std::vector<uint8_t>{0, 7, 255});
  expectations.array(writer, "test.i8s", std::vector<int8_t>{-1, 127});
  expectations.array(writer, "test.u16s", std::vector<uint16_t>{1, 65535});
  expectations.array(writer, "test.i16s", std::vector<int16_t>{-300, 300});
  expectations.array(writer, "test.u32s", std::vector<uint32_t>{3, 4000000000u});
  expectations.array(writer, "test.i32s", std::vector<int32_t>{-7, 0, 151643});
  expectations.array(writer, "test.u64s", std::vector<uint64_t>{1, 1ull << 63});
  expectations.array(writer, "test.i64s", std::vector<int64_t>{-(1ll << 62), 42});
  expectations.array(writer, "test.f32s", std::vector<float>{1.5f, -0.1f, 3.4e38f});
  expectations.array(writer, "test.f64s", std::vector<double>{0.1, -1e300});
  expectations.array(writer, "test.bools", std::vector<bool>{true, false, false, true});
  expectations.array(writer, "test.empty_i32s", std::vector<int32_t>{});
  // A tokenizer-sized string array: more than the reader's 2 MB read chunk.
  std::vector<std::string> tokens;
  for (int index = 0; index < 40000; ++index) {
    tokens.push_back("tok_" + std::to_string(index) + (index % 3 ? "_Ġword" : "") +
                     std::string(static_cast<size_t>(index % 50), 'x'));
  }
  tokens[5] = "";
  expectations.array(writer, "tokenizer.ggml.tokens", tokens);

  std::vector<ExpectedTensor> tensors = {
      {"token_embd.weight", BlockType::q8_0, 8, {64, 10}, 2 * 34 * 10},
      {"blk.0.attn_q.weight", BlockType::q4_k, 12, {256, 3}, 144 * 3},
      {"blk.0.ffn_down.weight", BlockType::q6_k, 14, {512, 2}, 2 * 210 * 2},
      {"blk.0.attn_norm.weight", BlockType::f32, 0, {7}, 28},
      {"blk.0.attn_k.bias", BlockType::f16, 1, {3}, 6},
      {"output.weight", BlockType::bf16, 30, {5, 2, 3}, 60},
      {"rank4", BlockType::q4_0, 2, {32, 1, 2, 2}, 18 * 4},
  };
  for (const ExpectedTensor& tensor : tensors)
    writer.add_tensor(tensor.name, tensor.type, tensor.dims);
  std::string path = directory.file("written.gguf");
  writer.write(path, [](size_t index, std::span<std::byte> data) {
    for (size_t byte = 0; byte < data.size(); ++byte) {
      data[byte] = static_cast<std::byte>(index + byte);
    }
  });

  auto result = test_support::run_command_line(
      "node " + test_support::shell_quote(std::string(kReferenceDir) + "/read_gguf.mjs") + " " +
      test_support::shell_quote(path));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  json read = json::parse(result.output);

  EXPECT_EQ(read["version"], 3);
  EXPECT_EQ(read["little_endian"], true);
  EXPECT_EQ(read["tensor_count"], std::to_string(tensors.size()));
  EXPECT_EQ(read["kv_count"], std::to_string(expectations.expected().size()));
  EXPECT_EQ(read["metadata"].size(), expectations.expected().size());
  for (const auto& [key, expected] : expectations.expected().items()) {
    ASSERT_TRUE(read["metadata"].contains(key)) << key;
    EXPECT_EQ(read["metadata"][key], expected) << key;
  }

  uint64_t data_offset = std::stoull(read["tensor_data_offset"].get<std::string>());
  EXPECT_EQ(data_offset % 32, 0u);
  ASSERT_EQ(read["tensors"].size(), tensors.size());
  uint64_t offset = 0;
  for (size_t index = 0; index < tensors.size(); ++index) {
    const ExpectedTensor& expected = tensors[index];
    const json& info = read["tensors"][index];
    EXPECT_EQ(info["name"], expected.name);
    EXPECT_EQ(info["dtype"], expected.ggml_id) << expected.name;
    EXPECT_EQ(info["n_dims"], expected.dims.size()) << expected.name;
    json dims = json::array();
    for (int64_t dim : expected.dims) dims.push_back(std::to_string(dim));
    EXPECT_EQ(info["shape"], dims) << expected.name;
    EXPECT_EQ(info["offset"], std::to_string(offset)) << expected.name;
    offset = (offset + expected.bytes + 31) / 32 * 32;
  }
  EXPECT_EQ(std::filesystem::file_size(path), data_offset + offset);
}

}  // namespace
}  // namespace fornace
