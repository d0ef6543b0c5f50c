// Tests of whole-file reads, atomic writes (no temporaries, no partial targets) and .npy output.
#include "io/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>

#include "common/source_paths.h"
#include "io/test_files.h"

namespace fornace {
namespace {

using test_support::error_message;
using test_support::expect_message_names;
using test_support::list_directory;
using test_support::read_bytes;
using test_support::TemporaryDirectory;
using test_support::write_bytes;

TEST(ReadFile, ReturnsEveryByte) {
  TemporaryDirectory directory;
  std::string bytes("a\0b\xff\n", 5);
  write_bytes(directory.file("data"), bytes);
  EXPECT_EQ(read_file(directory.file("data")), bytes);
  write_bytes(directory.file("empty"), "");
  EXPECT_EQ(read_file(directory.file("empty")), "");
}

TEST(ReadFile, MissingFileNamesThePath) {
  TemporaryDirectory directory;
  expect_message_names(error_message([&] { read_file(directory.file("absent.json")); }),
                       {directory.file("absent.json"), "no such file"});
}

TEST(ReadFile, DirectoryNamesThePath) {
  TemporaryDirectory directory;
  expect_message_names(error_message([&] { read_file(directory.path()); }),
                       {directory.path(), "is a directory"});
}

TEST(ReadFile, UnreadableFileNamesThePath) {
  TemporaryDirectory directory;
  std::string path = directory.file("secret.json");
  write_bytes(path, "{}");
  ::chmod(path.c_str(), 0);
  if (test_support::permissions_do_not_stop_reads(path)) {
    GTEST_SKIP() << "running with privileges that read files without read permission (root)";
  }
  expect_message_names(error_message([&] { read_file(path); }), {path, "permission denied"});
}

TEST(WriteFileAtomically, WritesTheContentAndLeavesNoTemporary) {
  TemporaryDirectory directory;
  std::string path = directory.file("out.txt");
  write_file_atomically(path, [](std::ostream& stream) { stream << "first"; });
  write_file_atomically(path, [](std::ostream& stream) { stream << "second version"; });
  EXPECT_EQ(read_bytes(path), "second version");
  EXPECT_EQ(list_directory(directory.path()), (std::vector<std::string>{"out.txt"}));
}

TEST(WriteFileAtomically, LargeWritesArriveWhole) {
  TemporaryDirectory directory;
  std::string path = directory.file("big.bin");
  std::string block(3 << 20, 'x');
  for (size_t index = 0; index < block.size(); index += 4099) block[index] = 'y';
  write_file_atomically(path, [&](std::ostream& stream) {
    stream << "head";
    stream.write(block.data(), static_cast<std::streamsize>(block.size()));
    stream << "tail";
  });
  EXPECT_EQ(read_bytes(path), "head" + block + "tail");
}

TEST(WriteFileAtomically, WriterThatThrowsMidwayLeavesTheOldFileIntact) {
  TemporaryDirectory directory;
  std::string path = directory.file("out.txt");
  write_bytes(path, "old content");
  EXPECT_THROW(write_file_atomically(path,
                                     [](std::ostream& stream) {
                                       stream << std::string(5 << 20, 'n');
                                       throw Error("interrupted");
                                     }),
               Error);
  EXPECT_EQ(read_bytes(path), "old content");
  EXPECT_EQ(list_directory(directory.path()), (std::vector<std::string>{"out.txt"}));
}

TEST(WriteFileAtomically, WriterThatThrowsLeavesNoFileWhereThereWasNone) {
  TemporaryDirectory directory;
  EXPECT_THROW(write_file_atomically(directory.file("new.txt"),
                                     [](std::ostream& stream) {
                                       stream << "partial";
                                       throw std::runtime_error("interrupted");
                                     }),
               std::runtime_error);
  EXPECT_TRUE(list_directory(directory.path()).empty());
}

TEST(WriteFileAtomically, TargetThatIsADirectory) {
  TemporaryDirectory directory;
  std::string path = directory.file("taken");
  std::filesystem::create_directory(path);
  expect_message_names(error_message([&] {
                         write_file_atomically(path, [](std::ostream& stream) { stream << "x"; });
                       }),
                       {path, "is a directory"});
  EXPECT_EQ(list_directory(directory.path()), (std::vector<std::string>{"taken"}));
}

TEST(WriteFileAtomically, MissingParentDirectory) {
  TemporaryDirectory directory;
  std::string path = directory.file("absent/out.txt");
  expect_message_names(error_message([&] {
                         write_file_atomically(path, [](std::ostream& stream) { stream << "x"; });
                       }),
                       {path});
}

TEST(WriteFileAtomically, FailedStreamIsAnErrorAndLeavesNothing) {
  TemporaryDirectory directory;
  std::string path = directory.file("failed");
  std::string message = error_message([&] {
    write_file_atomically(path, [](std::ostream& stream) {
      stream << "some bytes";
      stream.setstate(std::ios::badbit);
    });
  });
  expect_message_names(message, {path, "write failed"});
  EXPECT_TRUE(list_directory(directory.path()).empty());
}

// The .npy bytes of `path` split into (header dict text, data bytes), checking the preamble.
std::pair<std::string, std::string> read_npy_parts(const std::string& path) {
  std::string bytes = read_bytes(path);
  EXPECT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t header_length = static_cast<unsigned char>(bytes[8]) |
                         (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  EXPECT_EQ((10 + header_length) % 64, 0u);
  EXPECT_EQ(bytes[10 + header_length - 1], '\n');
  return {bytes.substr(10, header_length), bytes.substr(10 + header_length)};
}

TEST(WriteNpy, HeaderFollowsFormatOneAndDataIsLittleEndianFloat32) {
  TemporaryDirectory directory;
  std::string path = directory.file("values.npy");
  std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};
  write_npy(path, values, {2, 3});
  auto [header, data] = read_npy_parts(path);
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u)
      << header;
  ASSERT_EQ(data.size(), values.size() * 4);
  EXPECT_EQ(std::memcmp(data.data(), values.data(), data.size()), 0);
  EXPECT_EQ(list_directory(directory.path()), (std::vector<std::string>{"values.npy"}));
}

TEST(WriteNpy, OneDimensionalAndScalarShapesUsePythonTupleSyntax) {
  TemporaryDirectory directory;
  write_npy(directory.file("vector.npy"), {1, 2, 3}, {3});
  EXPECT_NE(read_npy_parts(directory.file("vector.npy")).first.find("'shape': (3,), }"),
            std::string::npos);
  write_npy(directory.file("scalar.npy"), {4}, Dims{});
  EXPECT_NE(read_npy_parts(directory.file("scalar.npy")).first.find("'shape': (), }"),
            std::string::npos);
}

TEST(WriteNpy, NumpyLoadsTheValuesAndShape) {
  TemporaryDirectory directory;
  std::string path = directory.file("check.npy");
  write_npy(path, {0.5f, -1.25f, 3.0f, 4.0f, -0.0f, 1e30f, 2.0f, 8.0f}, {2, 2, 2});
  std::string script =
      "import sys, numpy as np; a = np.load(sys.argv[1]); "
      "print(a.dtype.str, a.shape, a.ravel().tolist())";
  auto result = test_support::run_command_line(fornace::test_paths::python() + " -c " +
                                               test_support::shell_quote(script) + " " + path);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output,
            "<f4 (2, 2, 2) [0.5, -1.25, 3.0, 4.0, -0.0, 1.0000000150474662e+30, 2.0, 8.0]\n");
}

TEST(WriteNpy, ValueCountMustMatchTheShape) {
  TemporaryDirectory directory;
  std::string path = directory.file("bad.npy");
  expect_message_names(error_message([&] {
                         write_npy(path, {1, 2, 3}, {2, 2});
                       }),
                       {path, "[2, 2]"});
  EXPECT_TRUE(list_directory(directory.path()).empty());
}

}  // namespace
}  // namespace fornace
