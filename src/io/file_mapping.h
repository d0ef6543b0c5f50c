// Read-only file mappings for weights, backed by 2 MiB pages where the kernel allows.
#pragma once

#include <cstddef>
#include <memory>

namespace fornace {

// Resident bytes of a mapping, and how many of them the kernel maps with 2 MiB pages.
struct PageCounts {
  size_t resident_bytes = 0;
  size_t huge_page_bytes = 0;
};

// A whole file mapped read-only at a 2 MiB-aligned address, advised MADV_HUGEPAGE and populated
// before use, so the first forward pass takes no page faults and a GEMV streams weights without
// a TLB miss every 4 KiB. When a large file sits in the page cache in small pages (as a file
// does right after it was written or downloaded), its cached pages are dropped once and read
// back through the mapping, which makes the kernel cache them as 2 MiB pages; that happens only
// after a probe of one 2 MiB range shows the kernel can do so here.
class FileMapping {
 public:
  // Throws Error naming `path` when the file cannot be mapped.
  FileMapping(int descriptor, size_t size, const char* path);
  // The live mapping of the same file (device, inode and size) when this process has one, else
  // a new one: a checkpoint opened twice is resident once.
  static std::shared_ptr<const FileMapping> shared(int descriptor, size_t size, const char* path);
  ~FileMapping();
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  // Read from /proc/self/smaps; zero counts where it cannot be read.
  PageCounts pages() const;

 private:
  void populate(size_t begin, size_t end) const;
  void recache_in_huge_pages(int descriptor);

  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace fornace
