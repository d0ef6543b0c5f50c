// Aligned, counted heap storage and borrowed mapped storage.
#include "core/storage.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <string>

#include "core/error.h"

namespace fornace {

namespace {

constexpr size_t kAlignment = 64;

// Buffers of 2 MiB and more (prefill activations, scratch) are placed for 2 MiB pages, which a
// kernel read streams through without a TLB miss every 4 KiB.
void* allocate_aligned(size_t bytes) {
  if (bytes < kHugePageBytes || !huge_pages_enabled()) {
    return std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  }
  size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* data = std::aligned_alloc(kHugePageBytes, rounded);
  if (data) ::madvise(data, rounded, MADV_HUGEPAGE);
  return data;
}

}  // namespace

bool huge_pages_enabled() {
  static const bool enabled = [] {
    const char* setting = std::getenv("FORNACE_HUGE_PAGES");
    return !(setting && std::string(setting) == "0");
  }();
  return enabled;
}

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device device) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* data = rounded ? allocate_aligned(rounded) : nullptr;
  if (rounded && !data) fail("out of memory allocating ", bytes, " bytes for ", memory::current_op());
  std::shared_ptr<Storage> storage(new Storage());
  storage->data_ = data;
  storage->bytes_ = bytes;
  storage->device_ = device;
  memory::record_allocation(device, static_cast<int64_t>(bytes));
  return storage;
}

std::shared_ptr<Storage> Storage::borrow(std::shared_ptr<const void> owner, const void* data,
                                         size_t bytes) {
  std::shared_ptr<Storage> storage(new Storage());
  storage->data_ = const_cast<void*>(data);
  storage->bytes_ = bytes;
  storage->owner_ = std::move(owner);
  return storage;
}

Storage::~Storage() {
  if (owner_) return;
  std::free(data_);
  memory::record_release(device_, static_cast<int64_t>(bytes_));
}

}  // namespace fornace
