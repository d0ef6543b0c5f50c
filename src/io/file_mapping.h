// Read-only file mappings for weights, backed by 2 MiB pages where the kernel allows.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "core/settings.h"

namespace fornace {

// Resident bytes of a mapping, and how many of them the kernel maps with 2 MiB pages.
struct PageCounts {
  size_t resident_bytes = 0;
  size_t huge_page_bytes = 0;
};

// How a mapping came by its 2 MiB pages; each path includes the ones before it.
enum class HugePagePath {
  off,         // not asked for: HugePages::off, or the kernel's THP setting is "never"
  page_cache,  // the file's pages, as far as the page cache held them in 2 MiB folios
  reread,      // and ranges the page cache held in small folios dropped and read back in 2 MiB
  anonymous_copy,  // and ranges still in small folios copied to anonymous 2 MiB pages
};
const char* huge_page_path_name(HugePagePath path);

struct FileMappingOptions {
  bool huge_pages = true;        // MADV_HUGEPAGE, else MADV_NOHUGEPAGE and nothing more
  bool reread = true;            // re-read clean ranges held in small folios
  bool anonymous_copies = true;  // copy the ranges still in small folios
  // From the kernel's THP setting and the mode (FORNACE_HUGE_PAGES, core/settings.h): `off` asks
  // for none, `file` neither re-reads nor copies, `reread` or `copy` only that, `on` both.
  static FileMappingOptions for_mode(HugePages mode);
};

// A whole file mapped read-only at a 2 MiB-aligned address, advised MADV_HUGEPAGE and populated
// before use, so the first forward pass takes no page faults and a GEMV streams weights without
// a TLB miss every 4 KiB. The page cache holds a file in 2 MiB folios only when it was read
// through such a mapping; one just written, or read with read(), sits in smaller folios that
// are mapped 4 KiB at a time. The 2 MiB ranges of the file that did not come out as one 2 MiB
// page are dropped from the page cache and read back through the mapping, which caches them in
// 2 MiB folios for every later process too (the cost of a disk read, once); the ranges that
// cannot be dropped (dirty, or mapped by another process) are copied to anonymous memory advised
// MADV_HUGEPAGE, moved over the file's range and made read-only (a copy per process, in
// private memory).
class FileMapping {
 public:
  // Throws Error naming `path` when the file cannot be mapped.
  FileMapping(int descriptor, size_t size, const char* path,
              FileMappingOptions options = FileMappingOptions::for_mode(HugePages::on));
  ~FileMapping();
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  // Read from /proc/self/smaps over the file's and the copies' ranges; zero counts where it
  // cannot be read.
  PageCounts pages() const;
  HugePagePath path() const { return path_; }
  // pages() as it was when the mapping was set up (before any were released).
  const PageCounts& pages_at_setup() const { return pages_at_setup_; }
  // Storage::PageRelease for a view of `mapping` (a FileMapping): drops the whole 4 KiB pages of
  // [data, data + bytes) that map the file (anonymous copies keep theirs); the next access reads
  // them back from the page cache.
  static void release_pages(const void* mapping, const void* data, size_t bytes);
  // The same over the whole file.
  void release_all_pages() const { release_pages(this, data_, size_); }
  // Bytes re-read and copied, the milliseconds each took, and the whole set-up's (mapping,
  // populating, re-reading, copying).
  size_t copied_bytes() const { return copied_bytes_; }
  size_t reread_bytes() const { return reread_bytes_; }
  double setup_ms() const { return setup_ms_; }
  double copy_ms() const { return copy_ms_; }
  double reread_ms() const { return reread_ms_; }

 private:
  void place_in_huge_pages(int descriptor, const FileMappingOptions& options);
  void reread_ranges(int descriptor, const std::vector<bool>& huge);
  bool copy_range(size_t begin, size_t end);

  char* data_ = nullptr;
  size_t size_ = 0;
  HugePagePath path_ = HugePagePath::off;
  PageCounts pages_at_setup_;
  size_t copied_bytes_ = 0;
  std::vector<std::pair<size_t, size_t>> copied_ranges_;  // [begin, end) offsets, in order
  size_t reread_bytes_ = 0;
  double reread_ms_ = 0;
  double setup_ms_ = 0;
  double copy_ms_ = 0;
};

}  // namespace fornace
