// FileMapping: the bytes of the file at a 2 MiB-aligned address, populated, with page counts.
#include "io/file_mapping.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>

#include "io/test_files.h"

namespace fornace {
namespace {

using test_support::error_message;
using test_support::TemporaryDirectory;
using test_support::write_bytes;

constexpr size_t kHugePage = size_t{2} << 20;

// A descriptor of a new file holding `bytes`, closed with the returned holder.
std::shared_ptr<int> open_file_with(const TemporaryDirectory& directory, const std::string& bytes) {
  std::string path = directory.file("weights.bin");
  write_bytes(path, bytes);
  return std::shared_ptr<int>(new int(::open(path.c_str(), O_RDONLY)), [](int* descriptor) {
    ::close(*descriptor);
    delete descriptor;
  });
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

TEST(FileMapping, EmptyFileIsAnErrorNamingThePath) {
  TemporaryDirectory directory;
  auto descriptor = open_file_with(directory, "");
  EXPECT_EQ(error_message([&] { FileMapping(*descriptor, 0, "weights.bin"); }),
            "weights.bin: cannot map an empty file");
}

}  // namespace
}  // namespace fornace
