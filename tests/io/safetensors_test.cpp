// Tests of the safetensors reader, writer and checkpoint directories, including malformed files.
#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>

#include "common/source_paths.h"
#include "io/test_files.h"
#include "ops/copy.h"
#include "ops/creation.h"

namespace fornace {
namespace {

using test_support::error_message;
using test_support::expect_message_names;
using test_support::read_bytes;
using test_support::safetensors_bytes;
using test_support::TemporaryDirectory;
using test_support::write_bytes;

// Values exactly representable in bf16 and f16, so every dtype round-trips them exactly.
std::vector<float> exact_values(int64_t count) {
  std::vector<float> values(count);
  for (int64_t index = 0; index < count; ++index) {
    values[index] = static_cast<float>(index % 17 - 8) * 0.25f;
  }
  return values;
}

// A small valid file with two f32 tensors "a" [2] and "b" [3] (values 1, 2 and 3, 4, 5).
std::string two_tensor_file() {
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[3],"data_offsets":[8,20]}})";
  float values[5] = {1, 2, 3, 4, 5};
  return safetensors_bytes(header, std::string(reinterpret_cast<char*>(values), sizeof(values)));
}

// The message from opening a file holding `bytes`.
std::string open_error(const TemporaryDirectory& directory, const std::string& bytes) {
  std::string path = directory.file("model.safetensors");
  write_bytes(path, bytes);
  return error_message([&] { SafetensorsFile::open(path); });
}

// The message for a one-tensor file "w" whose entry is `entry` and whose data is `data_bytes`.
std::string entry_error(const TemporaryDirectory& directory, const std::string& entry,
                        size_t data_bytes = 16) {
  return open_error(directory,
                    safetensors_bytes(R"({"w":)" + entry + "}", std::string(data_bytes, '\0')));
}

TEST(Safetensors, RoundTripPreservesValuesDtypesAndShapesOfEveryKind) {
  TemporaryDirectory directory;
  std::vector<std::pair<std::string, Dims>> shapes = {
      {"matrix", {2, 3}}, {"vector", {5}},   {"cube", {2, 2, 2}},
      {"scalar", {}},     {"empty", {0, 4}}, {"rank6", {1, 1, 1, 1, 2, 3}}};
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    for (const auto& [name, shape] : shapes) {
      tensors.push_back({std::string(dtype_name(dtype)) + "." + name,
                         from_vector(exact_values(shape.product()), shape, dtype)});
    }
  }
  std::string path = directory.file("model.safetensors");
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "round trip"}});

  auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file->entries().size(), tensors.size());
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->metadata().at("note"), "round trip");
  for (const auto& [name, original] : tensors) {
    ASSERT_TRUE(file->contains(name)) << name;
    Tensor loaded = file->tensor(name);
    EXPECT_EQ(loaded.dtype(), original.dtype()) << name;
    EXPECT_EQ(loaded.shape(), original.shape()) << name;
    EXPECT_EQ(to_f32_vector(loaded), exact_values(original.numel())) << name;
  }
}

TEST(Safetensors, StridedTensorsAreWrittenRowMajor) {
  TemporaryDirectory directory;
  Tensor matrix = from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  std::string path = directory.file("model.safetensors");
  write_safetensors(path, {{"transposed", matrix.transpose(0, 1)}});
  Tensor loaded = SafetensorsFile::open(path)->tensor("transposed");
  EXPECT_EQ(loaded.shape(), (Dims{3, 2}));
  EXPECT_EQ(to_f32_vector(loaded), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(Safetensors, TensorsPointIntoTheMappingWithoutCopying) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.safetensors");
  write_safetensors(path, {{"first", from_vector(exact_values(64), {8, 8}, DType::bf16)},
                           {"second", from_vector(exact_values(10), {10}, DType::bf16)}});
  auto file = SafetensorsFile::open(path);
  const char* begin = static_cast<const char*>(file->mapped_data());
  const char* end = begin + file->mapped_size();
  EXPECT_EQ(file->mapped_size(), std::filesystem::file_size(path));
  for (const char* name : {"first", "second"}) {
    Tensor tensor = file->tensor(name);
    const char* data = static_cast<const char*>(tensor.raw());
    EXPECT_GE(data, begin) << name;
    EXPECT_LE(data + tensor.numel() * 2, end) << name;
    EXPECT_TRUE(tensor.storage()->read_only()) << name;
    // The bytes in the mapping are the bytes of the file at the tensor's offset.
    const TensorEntry& entry = file->entry(name);
    std::string bytes = read_bytes(path);
    size_t data_start = file->mapped_size() - (file->entries().back().end);
    EXPECT_EQ(std::memcmp(data, bytes.data() + data_start + entry.begin, entry.end - entry.begin),
              0);
  }
  // The tensor keeps the mapping alive after the file object is gone.
  Tensor kept = file->tensor("second");
  file.reset();
  EXPECT_EQ(to_f32_vector(kept), exact_values(10));
}

TEST(Safetensors, HeaderIsPaddedSoDataStartsOnAnEightByteBoundary) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.safetensors");
  // A 2-byte tensor first in the argument list: the writer still places the f32 one first.
  write_safetensors(path, {{"h", from_vector({1, 2, 3}, {3}, DType::bf16)},
                           {"odd_name_for_padding", from_vector({4, 5}, {2}, DType::f32)}});
  std::string bytes = read_bytes(path);
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  EXPECT_EQ((8 + header_length) % 8, 0u);
  auto file = SafetensorsFile::open(path);
  for (const TensorEntry& entry : file->entries()) {
    EXPECT_EQ(entry.begin % dtype_size(entry.dtype), 0u) << entry.name;
  }
  EXPECT_EQ(to_f32_vector(file->tensor("odd_name_for_padding")), (std::vector<float>{4, 5}));
}

TEST(Safetensors, ReadsAFileBuiltByHand) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.safetensors");
  write_bytes(path, two_tensor_file());
  auto file = SafetensorsFile::open(path);
  EXPECT_EQ(to_f32_vector(file->tensor("a")), (std::vector<float>{1, 2}));
  EXPECT_EQ(to_f32_vector(file->tensor("b")), (std::vector<float>{3, 4, 5}));
}

TEST(Safetensors, MisalignedDataIsCopiedWithCorrectValues) {
  TemporaryDirectory directory;
  // A 9-byte header leaves the data section at file offset 17, misaligned for f32.
  std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.resize(header.size() + (9 - header.size() % 9) % 9 + 1, ' ');
  ASSERT_NE((8 + header.size()) % 4, 0u);
  float values[2] = {1.5f, -2.0f};
  std::string path = directory.file("model.safetensors");
  write_bytes(path, safetensors_bytes(header, std::string(reinterpret_cast<char*>(values), 8)));
  Tensor tensor = SafetensorsFile::open(path)->tensor("x");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tensor.raw()) % 4, 0u);
  EXPECT_EQ(to_f32_vector(tensor), (std::vector<float>{1.5f, -2.0f}));
}

TEST(Safetensors, IndependentNumpyParserReadsWhatTheWriterWrote) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.safetensors");
  write_safetensors(path, {{"f32", from_vector({1.5f, -2.25f, 3.0f}, {3}, DType::f32)},
                           {"bf16", from_vector({0.5f, -8.0f}, {2, 1}, DType::bf16)},
                           {"f16", from_vector({0.125f, 1024.0f}, {1, 2}, DType::f16)}});
  std::string script =
      "import sys, json; sys.path.insert(0, '" + fornace::test_paths::source("tests/reference") +
      "'); "
      "import qwen2_ref as r; f = r.SafetensorsReader(sys.argv[1]); "
      "print(json.dumps({n: [list(f.get(n).shape), f.get(n).ravel().tolist()] for n in f.names()},"
      " sort_keys=True))";
  auto result = test_support::run_command_line(fornace::test_paths::python() + " -c " +
                                               test_support::shell_quote(script) + " " + path);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output,
            "{\"bf16\": [[2, 1], [0.5, -8.0]], \"f16\": [[1, 2], [0.125, 1024.0]], "
            "\"f32\": [[3], [1.5, -2.25, 3.0]]}\n");
}

TEST(Safetensors, WriterLeavesNoTemporaryFiles) {
  TemporaryDirectory directory;
  write_safetensors(directory.file("model.safetensors"), {{"x", zeros({4})}});
  EXPECT_EQ(test_support::list_directory(directory.path()),
            (std::vector<std::string>{"model.safetensors"}));
}

TEST(Safetensors, WriterRejectsRepeatedNamesAndKeepsTheOldFile) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.safetensors");
  write_bytes(path, two_tensor_file());
  std::string message = error_message([&] {
    write_safetensors(path, {{"x", zeros({1})}, {"x", zeros({2})}});
  });
  expect_message_names(message, {path, "'x'"});
  EXPECT_EQ(read_bytes(path), two_tensor_file());
  EXPECT_EQ(test_support::list_directory(directory.path()),
            (std::vector<std::string>{"model.safetensors"}));
}

TEST(Safetensors, ProducerThatThrowsMidwayLeavesTheOldFileIntact) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.safetensors");
  write_bytes(path, two_tensor_file());
  std::vector<TensorSpec> specs = {{"first", DType::f32, {1 << 20}}, {"second", DType::f32, {4}}};
  EXPECT_THROW(write_safetensors_streamed(path, specs,
                                          [&](size_t index) -> Tensor {
                                            if (index == 1) throw Error("interrupted");
                                            return zeros({1 << 20});
                                          }),
               Error);
  EXPECT_EQ(read_bytes(path), two_tensor_file());
  EXPECT_EQ(test_support::list_directory(directory.path()),
            (std::vector<std::string>{"model.safetensors"}));
}

// --- Malformed files: each error is one line naming the file (and the tensor where there is one).

TEST(SafetensorsErrors, TruncatedFileNamesFileAndTensor) {
  TemporaryDirectory directory;
  std::string bytes = two_tensor_file();
  std::string message = open_error(directory, bytes.substr(0, bytes.size() - 3));
  expect_message_names(message, {directory.file("model.safetensors"), "'b'", "truncated"});
}

TEST(SafetensorsErrors, FileShorterThanTheLengthPrefix) {
  TemporaryDirectory directory;
  std::string message = open_error(directory, "abc");
  expect_message_names(message, {directory.file("model.safetensors"), "too short"});
}

TEST(SafetensorsErrors, HeaderLengthPastTheEndOfTheFile) {
  TemporaryDirectory directory;
  std::string message = open_error(directory, safetensors_bytes("{}", "", 4096));
  expect_message_names(message,
                       {directory.file("model.safetensors"), "header length 4096", "past the end"});
}

TEST(SafetensorsErrors, HeaderLengthOverTheLimit) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.safetensors");
  // A sparse file larger than the limit, so only the limit check can reject it.
  write_bytes(path, safetensors_bytes("", "", 150'000'000));
  std::filesystem::resize_file(path, 160'000'000);
  std::string message = error_message([&] { SafetensorsFile::open(path); });
  expect_message_names(message, {path, "exceeds the limit"});
}

TEST(SafetensorsErrors, GarbageJson) {
  TemporaryDirectory directory;
  std::string message = open_error(directory, safetensors_bytes("{\"a\": nonsense", ""));
  expect_message_names(message, {directory.file("model.safetensors"), "not valid JSON"});
}

TEST(SafetensorsErrors, NonObjectJson) {
  TemporaryDirectory directory;
  std::string message = open_error(directory, safetensors_bytes("[1, 2, 3]", ""));
  expect_message_names(message, {directory.file("model.safetensors"), "not a JSON object"});
}

TEST(SafetensorsErrors, DeeplyNestedJsonIsRejectedWithoutRecursion) {
  TemporaryDirectory directory;
  std::string header = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  std::string message = open_error(directory, safetensors_bytes(header, ""));
  expect_message_names(message, {directory.file("model.safetensors"), "deeper"});
}

TEST(SafetensorsErrors, EntryThatIsNotAnObject) {
  TemporaryDirectory directory;
  expect_message_names(entry_error(directory, "42"), {"model.safetensors", "'w'", "not an object"});
}

TEST(SafetensorsErrors, MissingField) {
  TemporaryDirectory directory;
  expect_message_names(entry_error(directory, R"({"dtype":"F32","shape":[4]})"),
                       {"model.safetensors", "'w'", "data_offsets"});
}

TEST(SafetensorsErrors, UnknownDtype) {
  TemporaryDirectory directory;
  expect_message_names(
      entry_error(directory, R"({"dtype":"Q7","shape":[4],"data_offsets":[0,16]})"),
      {"model.safetensors", "'w'", "unknown dtype", "Q7"});
}

TEST(SafetensorsErrors, UnsupportedDtype) {
  TemporaryDirectory directory;
  expect_message_names(
      entry_error(directory, R"({"dtype":"I64","shape":[2],"data_offsets":[0,16]})"),
      {"model.safetensors", "'w'", "unsupported dtype I64"});
}

TEST(SafetensorsErrors, ShapeDisagreesWithByteRange) {
  TemporaryDirectory directory;
  expect_message_names(
      entry_error(directory, R"({"dtype":"F32","shape":[3],"data_offsets":[0,16]})"),
      {"model.safetensors", "'w'", "needs 12 bytes", "hold 16"});
}

TEST(SafetensorsErrors, NegativeOrNonIntegerShape) {
  TemporaryDirectory directory;
  expect_message_names(
      entry_error(directory, R"({"dtype":"F32","shape":[-4],"data_offsets":[0,16]})"),
      {"model.safetensors", "'w'", "shape"});
  expect_message_names(
      entry_error(directory, R"({"dtype":"F32","shape":["4"],"data_offsets":[0,16]})"),
      {"model.safetensors", "'w'", "shape"});
}

TEST(SafetensorsErrors, ShapeWhoseSizeOverflows) {
  TemporaryDirectory directory;
  expect_message_names(
      entry_error(directory,
                  R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]})"),
      {"model.safetensors", "'w'", "too large"});
}

TEST(SafetensorsErrors, RangeEndingBeforeItBegins) {
  TemporaryDirectory directory;
  expect_message_names(
      entry_error(directory, R"({"dtype":"F32","shape":[0],"data_offsets":[8,4]})"),
      {"model.safetensors", "'w'", "end before begin"});
}

TEST(SafetensorsErrors, OverlappingRangesNameBothTensors) {
  TemporaryDirectory directory;
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  std::string message = open_error(directory, safetensors_bytes(header, std::string(12, '\0')));
  expect_message_names(message, {directory.file("model.safetensors"), "'a'", "'b'", "overlap"});
}

TEST(SafetensorsErrors, MetadataMustMapStringsToStrings) {
  TemporaryDirectory directory;
  std::string message =
      open_error(directory, safetensors_bytes(R"({"__metadata__":{"format":1}})", ""));
  expect_message_names(message, {directory.file("model.safetensors"), "__metadata__", "format"});
}

TEST(SafetensorsErrors, MutatedHeadersGiveErrorsNotCrashes) {
  // Deterministic byte flips, truncations and length changes of a valid file, parsed in memory.
  std::string valid = two_tensor_file();
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = valid;
    int mutations = 1 + static_cast<int>(next() % 4);
    for (int index = 0; index < mutations; ++index) {
      switch (next() % 3) {
        case 0:
          bytes[next() % bytes.size()] = static_cast<char>(next());
          break;
        case 1:
          bytes.resize(next() % (bytes.size() + 1));
          break;
        default:
          if (!bytes.empty())
            bytes[next() % std::min<size_t>(bytes.size(), 8)] ^= 1 << (next() % 8);
      }
      if (bytes.empty()) bytes = "x";
    }
    try {
      auto entries = SafetensorsFile::parse_header(bytes.data(), bytes.size(), "fuzz");
      for (const TensorEntry& entry : entries) {
        ASSERT_LE(entry.end, bytes.size());
        ASSERT_LE(entry.begin, entry.end);
      }
      ++accepted;
    } catch (const Error& error) {
      ASSERT_EQ(std::string(error.what()).rfind("fuzz: ", 0), 0u) << error.what();
    }
  }
  EXPECT_LT(accepted, 3000);
}

TEST(SafetensorsErrors, FileThatShrankAfterOpeningIsDetected) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.safetensors");
  write_bytes(path, two_tensor_file());
  auto file = SafetensorsFile::open(path);
  std::filesystem::resize_file(path, 12);
  std::string message = error_message([&] { file->tensor("a"); });
  expect_message_names(message, {path, "changed size"});
}

TEST(SafetensorsErrors, FileChangedBetweenRunsIsValidatedAtLoad) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.safetensors");
  write_bytes(path, two_tensor_file());
  SafetensorsFile::open(path);
  std::filesystem::resize_file(path, two_tensor_file().size() - 4);
  expect_message_names(error_message([&] { SafetensorsFile::open(path); }), {path, "'b'"});
}

TEST(SafetensorsErrors, DirectoryWhereAFileWasExpected) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.safetensors");
  std::filesystem::create_directory(path);
  expect_message_names(error_message([&] { SafetensorsFile::open(path); }),
                       {path, "is a directory"});
}

TEST(SafetensorsErrors, MissingFile) {
  TemporaryDirectory directory;
  std::string path = directory.file("absent.safetensors");
  expect_message_names(error_message([&] { SafetensorsFile::open(path); }), {path, "no such file"});
}

TEST(SafetensorsErrors, UnreadableFile) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.safetensors");
  write_bytes(path, two_tensor_file());
  ::chmod(path.c_str(), 0);
  if (test_support::permissions_do_not_stop_reads(path)) {
    GTEST_SKIP() << "running with privileges that read files without read permission (root)";
  }
  expect_message_names(error_message([&] { SafetensorsFile::open(path); }),
                       {path, "permission denied"});
}

// --- Checkpoint directories.

TEST(Checkpoint, OpensASingleFileDirectory) {
  TemporaryDirectory directory;
  write_bytes(directory.file("model.safetensors"), two_tensor_file());
  Checkpoint checkpoint = Checkpoint::open_directory(directory.path());
  EXPECT_EQ(checkpoint.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(checkpoint.contains("a"));
  EXPECT_EQ(to_f32_vector(checkpoint.tensor("b")), (std::vector<float>{3, 4, 5}));
}

TEST(Checkpoint, OpensShardsThroughTheIndex) {
  TemporaryDirectory directory;
  write_safetensors(directory.file("model-00001-of-00002.safetensors"),
                    {{"embed", from_vector({1, 2}, {2}, DType::bf16)},
                     {"norm", from_vector({3}, {1}, DType::f32)}});
  write_safetensors(directory.file("model-00002-of-00002.safetensors"),
                    {{"head", from_vector({4, 5, 6}, {3}, DType::f16)}});
  write_bytes(directory.file("model.safetensors.index.json"),
              R"({"metadata":{"total_size":16},"weight_map":{)"
              R"("embed":"model-00001-of-00002.safetensors",)"
              R"("norm":"model-00001-of-00002.safetensors",)"
              R"("head":"model-00002-of-00002.safetensors"}})");
  Checkpoint checkpoint = Checkpoint::open_directory(directory.path());
  EXPECT_EQ(checkpoint.names(), (std::vector<std::string>{"embed", "head", "norm"}));
  EXPECT_EQ(checkpoint.files().size(), 2u);
  EXPECT_EQ(to_f32_vector(checkpoint.tensor("embed")), (std::vector<float>{1, 2}));
  EXPECT_EQ(to_f32_vector(checkpoint.tensor("head")), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(checkpoint.tensor("head").dtype(), DType::f16);
}

TEST(Checkpoint, IndexNamingATensorTheShardLacks) {
  TemporaryDirectory directory;
  write_bytes(directory.file("shard.safetensors"), two_tensor_file());
  write_bytes(directory.file("model.safetensors.index.json"),
              R"({"weight_map":{"a":"shard.safetensors","ghost":"shard.safetensors"}})");
  expect_message_names(error_message([&] { Checkpoint::open_directory(directory.path()); }),
                       {"model.safetensors.index.json", "'ghost'", "shard.safetensors"});
}

TEST(Checkpoint, IndexNamingAMissingShard) {
  TemporaryDirectory directory;
  write_bytes(directory.file("model.safetensors.index.json"),
              R"({"weight_map":{"a":"absent.safetensors"}})");
  expect_message_names(error_message([&] { Checkpoint::open_directory(directory.path()); }),
                       {directory.file("absent.safetensors"), "no such file"});
}

TEST(Checkpoint, IndexShardOutsideTheDirectoryIsRefused) {
  TemporaryDirectory directory;
  write_bytes(directory.file("model.safetensors.index.json"),
              R"({"weight_map":{"a":"../elsewhere.safetensors"}})");
  expect_message_names(error_message([&] { Checkpoint::open_directory(directory.path()); }),
                       {"model.safetensors.index.json", "'a'", "not a file name"});
}

TEST(Checkpoint, IndexWithoutWeightMap) {
  TemporaryDirectory directory;
  write_bytes(directory.file("model.safetensors.index.json"), R"({"metadata":{}})");
  expect_message_names(error_message([&] { Checkpoint::open_directory(directory.path()); }),
                       {"model.safetensors.index.json", "weight_map"});
}

TEST(Checkpoint, MissingTensorNamesFileAndTensor) {
  TemporaryDirectory directory;
  write_bytes(directory.file("model.safetensors"), two_tensor_file());
  Checkpoint checkpoint = Checkpoint::open_directory(directory.path());
  expect_message_names(error_message([&] { checkpoint.tensor("model.norm.weight"); }),
                       {directory.file("model.safetensors"), "'model.norm.weight'", "not found"});
}

TEST(Checkpoint, MissingDirectory) {
  TemporaryDirectory directory;
  std::string path = directory.file("absent");
  expect_message_names(error_message([&] { Checkpoint::open_directory(path); }),
                       {path, "does not exist"});
}

TEST(Checkpoint, DirectoryWithoutWeights) {
  TemporaryDirectory directory;
  expect_message_names(error_message([&] { Checkpoint::open_directory(directory.path()); }),
                       {directory.path(), "no model.safetensors"});
}

TEST(Checkpoint, FileWhereADirectoryWasExpected) {
  TemporaryDirectory directory;
  std::string path = directory.file("model.safetensors");
  write_bytes(path, two_tensor_file());
  expect_message_names(error_message([&] { Checkpoint::open_directory(path); }),
                       {path, "not a directory"});
}

TEST(Checkpoint, DirectoryNamedLikeTheWeightsFile) {
  TemporaryDirectory directory;
  std::filesystem::create_directory(directory.file("model.safetensors"));
  expect_message_names(error_message([&] { Checkpoint::open_directory(directory.path()); }),
                       {directory.file("model.safetensors"), "is a directory"});
}

}  // namespace
}  // namespace fornace
