// Read-only file mappings at 2 MiB-aligned addresses, populated up front; ranges the page cache
// holds in small folios are re-read in 2 MiB folios, or else copied to anonymous 2 MiB pages.
#include "io/file_mapping.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/storage.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace fornace {
namespace {

constexpr size_t kHugePage = kHugePageBytes;
constexpr size_t kSmallPage = 4096;

// The PAGEMAP_SCAN ioctl of Linux 6.7 (uapi linux/fs.h), declared here for older headers.
struct PageScanArgument {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
  uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
struct PageRegion {
  uint64_t start, end, categories;
};
constexpr unsigned long kPagemapScan = _IOWR('f', 16, PageScanArgument);
constexpr uint64_t kPageIsHuge = 1 << 6;

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// "Rss:   1234 kB" -> 1234 * 1024 added to `bytes` when the line starts with `field`.
bool add_kib_field(const std::string& line, const char* field, size_t& bytes) {
  size_t length = std::strlen(field);
  if (line.compare(0, length, field) != 0) return false;
  unsigned long long kib = 0;
  if (std::sscanf(line.c_str() + length, " %llu kB", &kib) == 1) bytes += kib * 1024;
  return true;
}

// Which of the `count` 2 MiB ranges from `begin` are mapped as one 2 MiB page each; nothing
// where the kernel has no PAGEMAP_SCAN (before 6.7).
std::optional<std::vector<bool>> huge_ranges(const char* begin, size_t count) {
  int descriptor = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return std::nullopt;
  std::vector<bool> huge(count, false);
  auto base = reinterpret_cast<uint64_t>(begin);
  PageRegion regions[64];
  PageScanArgument scan{};
  scan.size = sizeof scan;
  scan.start = base;
  scan.end = base + count * kHugePage;
  scan.vec = reinterpret_cast<uint64_t>(regions);
  scan.vec_len = std::size(regions);
  scan.category_mask = kPageIsHuge;
  scan.return_mask = kPageIsHuge;
  bool scanned = true;
  while (scan.start < scan.end) {
    long found = ::ioctl(descriptor, kPagemapScan, &scan);
    if (found < 0) {
      scanned = false;
      break;
    }
    for (long index = 0; index < found; ++index) {
      // Whole 2 MiB ranges inside the region.
      for (uint64_t at = round_up(regions[index].start, kHugePage);
           at + kHugePage <= regions[index].end; at += kHugePage) {
        huge[(at - base) / kHugePage] = true;
      }
    }
    if (scan.walk_end <= scan.start) break;
    scan.start = scan.walk_end;
  }
  ::close(descriptor);
  if (!scanned) return std::nullopt;
  return huge;
}

// False where /sys says "[never]": anonymous memory would then come in 4 KiB pages too.
bool kernel_offers_huge_pages() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string setting;
  if (!std::getline(file, setting)) return true;
  return setting.find("[never]") == std::string::npos;
}

}  // namespace

const char* huge_page_path_name(HugePagePath path) {
  switch (path) {
    case HugePagePath::off: return "off";
    case HugePagePath::page_cache: return "page cache";
    case HugePagePath::reread: return "re-read";
    case HugePagePath::anonymous_copy: return "anonymous copy";
  }
  return "?";
}

FileMappingOptions FileMappingOptions::for_mode(HugePages mode) {
  FileMappingOptions options;
  static const bool offered = kernel_offers_huge_pages();
  options.huge_pages = mode != HugePages::off && offered;
  options.reread = mode == HugePages::on || mode == HugePages::reread;
  options.anonymous_copies = mode == HugePages::on || mode == HugePages::copy;
  return options;
}

FileMapping::FileMapping(int descriptor, size_t size, const char* path, FileMappingOptions options)
    : size_(size) {
  if (size == 0) fail(path, ": cannot map an empty file");
  auto start = std::chrono::steady_clock::now();
  // Reserve 2 MiB more than needed, map the file at the first 2 MiB boundary inside, and give
  // back the rest: a 2 MiB page maps file offset k * 2 MiB to an address that is a multiple too.
  size_t reserved = size + kHugePage;
  void* reservation =
      ::mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reservation == MAP_FAILED) fail(path, ": mmap failed: ", std::strerror(errno));
  auto* begin = static_cast<char*>(reservation);
  auto* aligned = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(begin), kHugePage));
  void* mapped = ::mmap(aligned, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, descriptor, 0);
  if (mapped == MAP_FAILED) {
    int error = errno;
    ::munmap(reservation, reserved);
    fail(path, ": mmap failed: ", std::strerror(error));
  }
  char* mapped_end = aligned + round_up(size, kSmallPage);
  if (aligned > begin) ::munmap(begin, static_cast<size_t>(aligned - begin));
  if (begin + reserved > mapped_end) {
    ::munmap(mapped_end, static_cast<size_t>(begin + reserved - mapped_end));
  }
  data_ = aligned;
  // Errors here only cost speed: a kernel without THP or MADV_POPULATE_READ faults pages lazily.
  ::madvise(data_, size_, options.huge_pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  ::madvise(data_, size_, MADV_POPULATE_READ);
  if (options.huge_pages) {
    path_ = HugePagePath::page_cache;
    place_in_huge_pages(descriptor, options);
  }
  setup_ms_ = ms_since(start);
  pages_at_setup_ = pages();
}

FileMapping::~FileMapping() { ::munmap(data_, size_); }

void FileMapping::release_pages(const void* mapping, const void* data, size_t bytes) {
  const auto& self = *static_cast<const FileMapping*>(mapping);
  constexpr size_t kPage = 4096;
  const size_t offset = static_cast<size_t>(static_cast<const char*>(data) - self.data_);
  size_t begin = round_up(offset, kPage);
  const size_t end = std::min(self.size_, offset + bytes) / kPage * kPage;
  // Copied ranges are anonymous memory: dropping those would lose the bytes.
  for (const auto& [copy_begin, copy_end] : self.copied_ranges_) {
    if (copy_end <= begin) continue;
    if (copy_begin >= end) break;
    if (copy_begin > begin) ::madvise(self.data_ + begin, copy_begin - begin, MADV_DONTNEED);
    begin = std::max(begin, copy_end);
  }
  if (end > begin) ::madvise(self.data_ + begin, end - begin, MADV_DONTNEED);
}

namespace {

// Calls `visit(begin, end)` for each run of ranges that `huge` marks false, in bytes.
template <typename Visit>
void for_each_small_run(const std::vector<bool>& huge, Visit visit) {
  for (size_t first = 0; first < huge.size();) {
    size_t last = first;
    while (last < huge.size() && !huge[last]) ++last;
    if (last > first && !visit(first * kHugePage, last * kHugePage)) return;
    first = last + 1;
  }
}

size_t count_small(const std::vector<bool>& huge) {
  size_t small = 0;
  for (bool range : huge) small += !range;
  return small;
}

}  // namespace

void FileMapping::place_in_huge_pages(int descriptor, const FileMappingOptions& options) {
  size_t count = size_ / kHugePage;  // Whole 2 MiB ranges; the file's tail stays as it is.
  auto scan = [&] {
    if (auto scanned = huge_ranges(data_, count)) return *scanned;
    // No answer range by range: all or nothing, by whether 95 % came out in 2 MiB pages.
    PageCounts counts = pages();
    return std::vector<bool>(count, counts.huge_page_bytes * 100 >= counts.resident_bytes * 95);
  };
  std::vector<bool> huge = scan();
  if (options.reread && count_small(huge) > 0) {
    auto start = std::chrono::steady_clock::now();
    size_t before = count_small(huge);
    reread_ranges(descriptor, huge);
    huge = scan();
    if (count_small(huge) < before) path_ = HugePagePath::reread;
    reread_ms_ = ms_since(start);
  }
  if (options.anonymous_copies && count_small(huge) > 0) {
    auto start = std::chrono::steady_clock::now();
    for_each_small_run(huge, [&](size_t begin, size_t end) { return copy_range(begin, end); });
    if (copied_bytes_ > 0) path_ = HugePagePath::anonymous_copy;
    copy_ms_ = ms_since(start);
  }
}

void FileMapping::reread_ranges(int descriptor, const std::vector<bool>& huge) {
  auto drop = [&](size_t begin, size_t end) {
    // Unmapped here first: the page cache keeps folios that a mapping still uses.
    ::madvise(data_ + begin, end - begin, MADV_DONTNEED);
    ::posix_fadvise(descriptor, static_cast<off_t>(begin), static_cast<off_t>(end - begin),
                    POSIX_FADV_DONTNEED);
    return true;
  };
  auto read = [&](size_t begin, size_t end) {
    ::madvise(data_ + begin, end - begin, MADV_POPULATE_READ);
    reread_bytes_ += end - begin;
    return true;
  };
  // Probe with one range first: where the file system caches in small folios only, or the range
  // is dirty, the rest would be a disk read for nothing.
  size_t probe = 0;
  while (huge[probe]) ++probe;
  drop(probe * kHugePage, (probe + 1) * kHugePage);
  read(probe * kHugePage, (probe + 1) * kHugePage);
  auto probed = huge_ranges(data_ + probe * kHugePage, 1);
  if (!probed || !(*probed)[0]) return;
  std::vector<bool> rest = huge;
  rest[probe] = true;
  for_each_small_run(rest, drop);
  for_each_small_run(rest, read);
}

bool FileMapping::copy_range(size_t begin, size_t end) {
  size_t bytes = end - begin;
  void* reservation = ::mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (reservation == MAP_FAILED) return false;
  auto* raw = static_cast<char*>(reservation);
  auto* copy = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(raw), kHugePage));
  if (copy > raw) ::munmap(raw, static_cast<size_t>(copy - raw));
  if (raw + kHugePage > copy) ::munmap(copy + bytes, static_cast<size_t>(raw + kHugePage - copy));
  ::madvise(copy, bytes, MADV_HUGEPAGE);
  ::madvise(copy, bytes, MADV_POPULATE_WRITE);
  // A copy in 4 KiB pages would cost memory and gain nothing: keep the file's pages then.
  auto huge = huge_ranges(copy, bytes / kHugePage);
  size_t huge_count = 0;
  if (huge) {
    for (bool range : *huge) huge_count += range;
  }
  if (huge && huge_count * 2 < huge->size()) {
    ::munmap(copy, bytes);
    return false;
  }
  std::memcpy(copy, data_ + begin, bytes);
  ::mprotect(copy, bytes, PROT_READ);
  void* moved = ::mremap(copy, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, data_ + begin);
  if (moved == MAP_FAILED) {
    ::munmap(copy, bytes);
    return false;
  }
  copied_bytes_ += bytes;
  copied_ranges_.emplace_back(begin, end);
  return true;
}

PageCounts FileMapping::pages() const {
  PageCounts counts;
  std::ifstream smaps("/proc/self/smaps");
  auto first = reinterpret_cast<uintptr_t>(data_);
  uintptr_t last = first + size_;
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    size_t space = line.find(' ');
    size_t dash = line.find('-');
    if (space != std::string::npos && dash < space) {
      // A VMA header "start-end perms ...": the file's and the copies' VMAs lie inside.
      uintptr_t vma_start = std::strtoull(line.c_str(), nullptr, 16);
      uintptr_t vma_end = std::strtoull(line.c_str() + dash + 1, nullptr, 16);
      if (vma_start >= last) break;
      inside = vma_end > first;
      continue;
    }
    if (!inside) continue;
    if (!add_kib_field(line, "Rss:", counts.resident_bytes) &&
        !add_kib_field(line, "FilePmdMapped:", counts.huge_page_bytes)) {
      add_kib_field(line, "AnonHugePages:", counts.huge_page_bytes);
    }
  }
  return counts;
}

}  // namespace fornace
