// FileMapping: the bytes of the file at a 2 MiB-aligned address, populated, with page counts.
#include "io/file_mapping.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "io/test_files.h"
#include "ops/creation.h"
#include "nn/packed_weights.h"
#include "ops/math.h"

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

// Six 2 MiB ranges and a few bytes more, none alike.
std::string patterned_bytes() {
  std::string bytes(6 * kHugePage + 5, '\0');
  for (size_t index = 0; index < bytes.size(); ++index) {
    bytes[index] = static_cast<char>((index * 2654435761u) >> 13);
  }
  return bytes;
}

bool kernel_offers_huge_pages() { return FileMappingOptions::for_mode(HugePages::on).huge_pages; }

// Puts the file of `descriptor` in the page cache in 4 KiB folios, clean: written back, dropped
// and read again 4 KiB at a time without read-ahead.
void cache_in_small_folios(int descriptor, size_t size) {
  ASSERT_EQ(::fsync(descriptor), 0);
  ::posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED);
  ::posix_fadvise(descriptor, 0, 0, POSIX_FADV_RANDOM);
  char page[4096];
  for (size_t offset = 0; offset < size; offset += sizeof page) {
    ASSERT_GT(::pread(descriptor, page, sizeof page, static_cast<off_t>(offset)), 0);
  }
}

// `bytes` written to a new file, put in 4 KiB folios when `small_folios`, and mapped.
std::unique_ptr<FileMapping> map_new_file(const TemporaryDirectory& directory,
                                          const std::string& bytes, bool small_folios,
                                          FileMappingOptions options) {
  auto descriptor = open_file_with(directory, bytes);
  if (small_folios) cache_in_small_folios(*descriptor, bytes.size());
  return std::make_unique<FileMapping>(*descriptor, bytes.size(), "weights.bin", options);
}

TEST(FileMapping, CopiesRangesInSmallPagesToTwoMebibytePagesHoldingTheFilesBytes) {
  if (!kernel_offers_huge_pages()) GTEST_SKIP() << "transparent huge pages are off";
  TemporaryDirectory directory;
  std::string bytes = patterned_bytes();
  FileMappingOptions options;
  options.reread = false;
  auto mapped = map_new_file(directory, bytes, true, options);
  const FileMapping& mapping = *mapped;
  EXPECT_EQ(mapping.path(), HugePagePath::anonymous_copy);
  EXPECT_EQ(mapping.copied_bytes(), 6 * kHugePage);
  EXPECT_EQ(mapping.reread_bytes(), 0u);
  PageCounts pages = mapping.pages();
  EXPECT_GE(pages.resident_bytes, bytes.size());
  // All but the 4 KiB page of the tail.
  EXPECT_EQ(pages.huge_page_bytes, 6 * kHugePage);
  EXPECT_EQ(std::string(mapping.data(), mapping.size()), bytes);
}

TEST(FileMapping, RereadRangesHoldTheFilesBytes) {
  TemporaryDirectory directory;
  std::string bytes = patterned_bytes();
  FileMappingOptions options;
  options.anonymous_copies = false;
  auto mapped = map_new_file(directory, bytes, true, options);
  const FileMapping& mapping = *mapped;
  // Re-read where the file system caches in 2 MiB folios (ext4 on Linux 6.16 and later).
  if (mapping.path() == HugePagePath::reread) {
    EXPECT_EQ(mapping.reread_bytes(), 6 * kHugePage);
    EXPECT_EQ(mapping.pages().huge_page_bytes, 6 * kHugePage);
  }
  EXPECT_EQ(mapping.copied_bytes(), 0u);
  EXPECT_EQ(std::string(mapping.data(), mapping.size()), bytes);
}

TEST(FileMapping, WithHugePagesOffKeepsTheFilesSmallPages) {
  TemporaryDirectory directory;
  std::string bytes = patterned_bytes();
  FileMappingOptions options;
  options.huge_pages = false;  // As when the kernel's setting is "never".
  auto mapped = map_new_file(directory, bytes, false, options);
  const FileMapping& mapping = *mapped;
  EXPECT_EQ(mapping.path(), HugePagePath::off);
  EXPECT_EQ(mapping.copied_bytes(), 0u);
  EXPECT_EQ(mapping.reread_bytes(), 0u);
  PageCounts pages = mapping.pages();
  EXPECT_EQ(pages.resident_bytes, bytes.size() + 4096 - 5);
  EXPECT_EQ(pages.huge_page_bytes, 0u);
  EXPECT_EQ(std::string(mapping.data(), mapping.size()), bytes);
}

// Options that neither re-read nor copy: the page cache's pages as they are.
FileMappingOptions page_cache_only() {
  FileMappingOptions options;
  options.reread = false;
  options.anonymous_copies = false;
  return options;
}

TEST(FileMapping, WithoutRereadsOrCopiesMapsThePageCacheAsItIs) {
  TemporaryDirectory directory;
  std::string bytes = patterned_bytes();
  auto mapped = map_new_file(directory, bytes, false, page_cache_only());
  const FileMapping& mapping = *mapped;
  EXPECT_EQ(mapping.path(), HugePagePath::page_cache);
  EXPECT_EQ(mapping.copied_bytes(), 0u);
  EXPECT_EQ(std::string(mapping.data(), mapping.size()), bytes);
}

// Released pages of the page cache's mapping leave the resident count and come back with the
// same bytes; anonymous copies keep theirs (dropping them would zero the bytes).
TEST(FileMapping, ReleasedPagesLeaveTheResidentCountAndReadBackTheSameBytes) {
  TemporaryDirectory directory;
  std::string bytes = patterned_bytes();
  FileMappingOptions options = page_cache_only();
  auto mapped = map_new_file(directory, bytes, false, options);
  const size_t before = mapped->pages().resident_bytes;
  ASSERT_GE(before, bytes.size());
  // From mid-page to mid-page: the whole 4 KiB pages inside go.
  FileMapping::release_pages(mapped.get(), mapped->data() + 100, 3 * kHugePage);
  const size_t after = mapped->pages().resident_bytes;
  EXPECT_LE(after + 3 * kHugePage - 4096, before) << "resident " << before << " -> " << after;
  EXPECT_EQ(std::string(mapped->data(), mapped->size()), bytes);

  if (!kernel_offers_huge_pages()) return;
  options.anonymous_copies = true;
  auto copied = map_new_file(directory, bytes, true, options);
  ASSERT_EQ(copied->path(), HugePagePath::anonymous_copy);
  FileMapping::release_pages(copied.get(), copied->data(), copied->size());
  EXPECT_EQ(std::string(copied->data(), copied->size()), bytes);
}

// A mapped bf16 weight packed with release_source (in two slices here): the packed copy is
// that of an owned copy of the bytes, the weight's pages leave the resident count, and the
// file's bytes read back unchanged.
TEST(FileMapping, AWeightPackedWithReleaseLeavesTheResidentCountAndKeepsItsBytes) {
  TemporaryDirectory directory;
  std::string bytes = patterned_bytes();
  std::shared_ptr<FileMapping> mapped = map_new_file(directory, bytes, false, page_cache_only());
  const int64_t rows = 3072;
  const int64_t depth = 2048;
  const size_t weight_bytes = static_cast<size_t>(rows * depth * 2);
  ASSERT_LE(weight_bytes, bytes.size());
  Tensor weight(Storage::borrow(mapped, mapped->data(), weight_bytes, FileMapping::release_pages),
                Layout::contiguous({rows, depth}), DType::bf16);
  Tensor owned = Tensor::empty({rows, depth}, DType::bf16);
  std::memcpy(owned.raw(), mapped->data(), weight_bytes);
  PackedWeights packer;
  std::shared_ptr<const Storage> expected = packer.pack(owned);
  if (!expected) GTEST_SKIP() << "this CPU's kernels take no packed weights";
  const size_t before = mapped->pages().resident_bytes;
  std::shared_ptr<const Storage> packed = packer.pack(weight, true);
  ASSERT_NE(packed, nullptr);
  ASSERT_EQ(packed->bytes(), expected->bytes());
  EXPECT_EQ(std::memcmp(packed->data(), expected->data(), expected->bytes()), 0);
  const size_t after = mapped->pages().resident_bytes;
  EXPECT_LE(after + weight_bytes, before) << "resident " << before << " -> " << after;
  EXPECT_EQ(std::string(mapped->data(), mapped->size()), bytes);
}

TEST(FileMapping, EmptyFileIsAnErrorNamingThePath) {
  TemporaryDirectory directory;
  auto descriptor = open_file_with(directory, "");
  EXPECT_EQ(error_message([&] { FileMapping(*descriptor, 0, "weights.bin"); }),
            "weights.bin: cannot map an empty file");
}

}  // namespace
}  // namespace fornace
