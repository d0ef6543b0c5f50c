// Storage: a counted, 64-byte aligned heap buffer, or a read-only region of a file mapping.
#pragma once

#include <cstddef>
#include <memory>

#include "core/memory.h"
#include "core/settings.h"

namespace fornace {

// Buffers of 2 MiB and more ask the kernel for 2 MiB pages unless set_huge_pages() got
// HugePages::off (FORNACE_HUGE_PAGES=off; the weights' mappings take their own options,
// io/file_mapping.h). Set once at start-up; a buffer is freed as it was allocated.
bool huge_pages_enabled();
void set_huge_pages(HugePages mode);
constexpr size_t kHugePageBytes = size_t{2} << 20;

// Freed buffers of 2 MiB pages are kept, up to kReusableBufferLimit bytes, for the next buffer of
// the same size: whether they are (not with FORNACE_HUGE_PAGES=off nor in sanitizer builds), and
// the bytes kept now (memory that no tensor holds).
constexpr size_t kReusableBufferLimit = size_t{128} << 20;
bool buffers_are_reused();
size_t reusable_buffer_bytes();

class Storage {
 public:
  // A new heap buffer of `bytes`, uninitialised, counted by the memory accounting.
  static std::shared_ptr<Storage> allocate(size_t bytes, Device device = Device::cpu);
  // Drops the pages of [data, data + bytes) of `owner` from the process's resident memory,
  // where they can be read back later (a file mapping's).
  using PageRelease = void (*)(const void* owner, const void* data, size_t bytes);
  // A read-only view of `bytes` at `data`, kept alive by `owner` (a file mapping). Not counted.
  // `release`, when given, is how release_pages() drops the view's pages.
  static std::shared_ptr<Storage> borrow(std::shared_ptr<const void> owner, const void* data,
                                         size_t bytes, PageRelease release = nullptr);

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool read_only() const { return owner_ != nullptr; }
  // Drops a borrowed view's pages from resident memory where its owner can read them back on the
  // next access (the data stays the same); does nothing otherwise. For weights that the kernels
  // read from a packed copy instead.
  void release_pages() const;
  // The same for the pages wholly inside [data, data + bytes), a range of this view.
  void release_pages(const void* data, size_t bytes) const;

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_ = Device::cpu;
  bool huge_pages_ = false;  // Placed for 2 MiB pages (and reusable when freed).
  std::shared_ptr<const void> owner_;
  PageRelease release_ = nullptr;
};

}  // namespace fornace
