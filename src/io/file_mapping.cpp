// Read-only file mappings at 2 MiB-aligned addresses, populated up front, re-cached in 2 MiB pages.
#include "io/file_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "core/error.h"
#include "core/memory.h"
#include "core/storage.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace fornace {
namespace {

constexpr size_t kHugePage = kHugePageBytes;
constexpr size_t kSmallPage = 4096;
// Smaller files are not worth a re-read from disk: the TLB misses they cause are few.
constexpr size_t kMinRecacheBytes = size_t{64} << 20;

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// "Rss:   1234 kB" -> 1234 * 1024 when the line starts with `field`.
bool read_kib_field(const std::string& line, const char* field, size_t& bytes) {
  size_t length = std::strlen(field);
  if (line.compare(0, length, field) != 0) return false;
  unsigned long long kib = 0;
  if (std::sscanf(line.c_str() + length, " %llu kB", &kib) == 1) bytes = kib * 1024;
  return true;
}

}  // namespace

FileMapping::FileMapping(int descriptor, size_t size, const char* path) : size_(size) {
  if (size == 0) fail(path, ": cannot map an empty file");
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
  ::madvise(data_, size_, huge_pages_enabled() ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  populate(0, size_);
  if (size_ >= kMinRecacheBytes && huge_pages_enabled()) recache_in_huge_pages(descriptor);
}

FileMapping::~FileMapping() { ::munmap(data_, size_); }

std::shared_ptr<const FileMapping> FileMapping::shared(int descriptor, size_t size,
                                                       const char* path) {
  struct stat status {};
  if (::fstat(descriptor, &status) != 0) fail(path, ": fstat failed: ", std::strerror(errno));
  // A file changed in place shows its new bytes through the old mapping too (both map the same
  // page cache), so the inode and the size are the whole identity.
  using Key = std::tuple<dev_t, ino_t, size_t>;
  Key key{status.st_dev, status.st_ino, size};
  static std::mutex mutex;
  static std::map<Key, std::weak_ptr<const FileMapping>> mappings;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto live = mappings[key].lock()) return live;
  for (auto entry = mappings.begin(); entry != mappings.end();) {
    entry = entry->second.expired() && entry->first != key ? mappings.erase(entry) : ++entry;
  }
  auto mapping = std::make_shared<const FileMapping>(descriptor, size, path);
  mappings[key] = mapping;
  PageCounts pages = mapping->pages();
  memory::record_mapping(static_cast<int64_t>(pages.resident_bytes),
                         static_cast<int64_t>(pages.huge_page_bytes));
  return mapping;
}

void FileMapping::populate(size_t begin, size_t end) const {
  ::madvise(data_ + begin, end - begin, MADV_POPULATE_READ);
}

void FileMapping::recache_in_huge_pages(int descriptor) {
  PageCounts before = pages();
  if (before.resident_bytes == 0 || before.huge_page_bytes * 2 >= before.resident_bytes) return;
  // Probe: drop the first 2 MiB from this mapping and the page cache, read it back, and look.
  auto drop = [&](size_t bytes) {
    ::madvise(data_, bytes, MADV_DONTNEED);
    ::posix_fadvise(descriptor, 0, static_cast<off_t>(bytes), POSIX_FADV_DONTNEED);
    populate(0, bytes);
  };
  drop(kHugePage);
  if (pages().huge_page_bytes <= before.huge_page_bytes) return;
  drop(size_);
}

PageCounts FileMapping::pages() const {
  PageCounts counts;
  std::ifstream smaps("/proc/self/smaps");
  char header[32];
  std::snprintf(header, sizeof header, "%" PRIxPTR "-", reinterpret_cast<uintptr_t>(data_));
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    size_t space = line.find(' ');
    bool vma_header = space != std::string::npos && line.find('-') < space;
    if (vma_header) {
      if (inside) break;
      inside = line.compare(0, std::strlen(header), header) == 0;
      continue;
    }
    if (!inside) continue;
    if (!read_kib_field(line, "Rss:", counts.resident_bytes)) {
      read_kib_field(line, "FilePmdMapped:", counts.huge_page_bytes);
    }
  }
  return counts;
}

}  // namespace fornace
