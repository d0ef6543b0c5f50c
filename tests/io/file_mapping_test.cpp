// FileMapping: the bytes of the file at a 2 MiB-aligned address, populated, with page counts.
#include "io/file_mapping.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "io/test_files.h"

namespace fornace {
namespace {

using test_support::error_message;
using test_support::TemporaryDirectory;
using test_support::write_bytes;

constexpr size_t kHugePage = size_t{2} << 20;

// A read-only descriptor of `path`, closed with the returned holder.
std::shared_ptr<int> open_file_with_existing(const std::string& path) {
  return std::shared_ptr<int>(new int(::open(path.c_str(), O_RDONLY)), [](int* descriptor) {
    ::close(*descriptor);
    delete descriptor;
  });
}

// A descriptor of a new file "weights.bin" holding `bytes`.
std::shared_ptr<int> open_file_with(const TemporaryDirectory& directory, const std::string& bytes) {
  std::string path = directory.file("weights.bin");
  write_bytes(path, bytes);
  return open_file_with_existing(path);
}

TEST(FileMapping, MapsEveryByteAtATwoMebibyteBoundary) {
  TemporaryDirectory directory;
  std::string bytes(3 * kHugePage + 5, '\0');
  for (size_t index = 0; index < bytes.size(); ++index) {
    bytes[index] = static_cast<char>((index * 2654435761u) >> 13);
  }
  auto descriptor = open_file_with(directory, bytes);
  FileMapping mapping(*descriptor, bytes.size(), "weights.bin");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mapping.data()) % kHugePage, 0u);
  ASSERT_EQ(mapping.size(), bytes.size());
  EXPECT_EQ(std::string(mapping.data(), mapping.size()), bytes);
}

TEST(FileMapping, IsResidentBeforeFirstUseAndCountsHugePagesWithinIt) {
  TemporaryDirectory directory;
  std::string bytes(5 * kHugePage, 'x');
  auto descriptor = open_file_with(directory, bytes);
  FileMapping mapping(*descriptor, bytes.size(), "weights.bin");
  PageCounts pages = mapping.pages();
  // Populated up front: every page of the file is mapped before anything reads it.
  EXPECT_EQ(pages.resident_bytes, bytes.size());
  EXPECT_LE(pages.huge_page_bytes, pages.resident_bytes);
  EXPECT_EQ(pages.huge_page_bytes % kHugePage, 0u);
}

TEST(FileMapping, TheSameFileOpenedTwiceSharesOneMappingAndAReplacedOneGetsItsOwn) {
  TemporaryDirectory directory;
  auto descriptor = open_file_with(directory, std::string(kHugePage, 'a'));
  auto first = FileMapping::shared(*descriptor, kHugePage, "weights.bin");
  auto again = FileMapping::shared(*descriptor, kHugePage, "weights.bin");
  EXPECT_EQ(again.get(), first.get());
  // Replaced by a rename, as checkpoints are written: a new inode, so a new mapping.
  std::string path = directory.file("weights.bin");
  write_bytes(path + ".new", std::string(kHugePage, 'b'));
  std::filesystem::rename(path + ".new", path);
  auto replaced_descriptor = open_file_with_existing(path);
  auto replaced = FileMapping::shared(*replaced_descriptor, kHugePage, "weights.bin");
  EXPECT_NE(replaced.get(), first.get());
  EXPECT_EQ(replaced->data()[0], 'b');
  EXPECT_EQ(first->data()[0], 'a');
}

TEST(FileMapping, EmptyFileIsAnErrorNamingThePath) {
  TemporaryDirectory directory;
  auto descriptor = open_file_with(directory, "");
  EXPECT_EQ(error_message([&] { FileMapping(*descriptor, 0, "weights.bin"); }),
            "weights.bin: cannot map an empty file");
}

}  // namespace
}  // namespace fornace
