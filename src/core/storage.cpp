// Aligned, counted heap storage and borrowed mapped storage.
#include "core/storage.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <string>

#include "core/error.h"

namespace fornace {

namespace {

constexpr size_t kAlignment = 64;

size_t alignment_rounded(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

std::atomic<bool> huge_page_buffers{true};

// Buffers of 2 MiB and more (prefill activations, scratch) are placed for 2 MiB pages, which a
// kernel read streams through without a TLB miss every 4 KiB.
bool uses_huge_pages(size_t bytes) { return bytes >= kHugePageBytes && huge_pages_enabled(); }
size_t huge_page_rounded(size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

// Freed buffers of 2 MiB pages, kept for the next buffer of the same size: prefill allocates the
// same activation sizes layer after layer, and a fresh buffer costs a page fault and the kernel's
// zeroing of each 2 MiB page. At most kReusableBufferLimit bytes stay; the oldest go first.
class ReusableBuffers {
 public:
  static ReusableBuffers& instance() {
    static ReusableBuffers* blocks = new ReusableBuffers();  // Never destroyed: freed at exit.
    return *blocks;
  }

  void* take(size_t bytes) {
    std::lock_guard lock(mutex_);
    for (auto block = blocks_.begin(); block != blocks_.end(); ++block) {
      if (block->bytes != bytes) continue;
      void* data = block->data;
      cached_bytes_ -= bytes;
      blocks_.erase(block);
      return data;
    }
    return nullptr;
  }

  size_t cached_bytes() {
    std::lock_guard lock(mutex_);
    return cached_bytes_;
  }

  void give(void* data, size_t bytes) {
    std::lock_guard lock(mutex_);
    blocks_.push_back({data, bytes});
    cached_bytes_ += bytes;
    while (cached_bytes_ > kReusableBufferLimit) {
      std::free(blocks_.front().data);
      cached_bytes_ -= blocks_.front().bytes;
      blocks_.pop_front();
    }
  }

 private:
  struct Block {
    void* data;
    size_t bytes;
  };
  std::mutex mutex_;
  std::deque<Block> blocks_;  // Oldest first.
  size_t cached_bytes_ = 0;
};

// `bytes`: a multiple of kAlignment. `huge`: whether it was placed for 2 MiB pages.
void* allocate_aligned(size_t bytes, bool& huge) {
  huge = uses_huge_pages(bytes);
  if (!huge) return std::aligned_alloc(kAlignment, bytes);
  size_t rounded = huge_page_rounded(bytes);
  if (void* cached = ReusableBuffers::instance().take(rounded)) return cached;
  void* data = std::aligned_alloc(kHugePageBytes, rounded);
  if (data) ::madvise(data, rounded, MADV_HUGEPAGE);
  return data;
}

void free_aligned(void* data, size_t bytes, bool huge) {
  if (data && huge && buffers_are_reused()) {
    ReusableBuffers::instance().give(data, huge_page_rounded(bytes));
  } else {
    std::free(data);
  }
}

}  // namespace

size_t reusable_buffer_bytes() { return ReusableBuffers::instance().cached_bytes(); }

bool buffers_are_reused() {
#if defined(FORNACE_SANITIZED)
  return false;  // Every buffer freed, so that AddressSanitizer catches a use after free.
#else
  return huge_pages_enabled();
#endif
}

bool huge_pages_enabled() { return huge_page_buffers.load(std::memory_order_relaxed); }

void set_huge_pages(HugePages mode) {
  huge_page_buffers.store(mode != HugePages::off, std::memory_order_relaxed);
}

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device device) {
  size_t rounded = alignment_rounded(bytes);
  bool huge = false;
  void* data = rounded ? allocate_aligned(rounded, huge) : nullptr;
  if (rounded && !data) fail("out of memory allocating ", bytes, " bytes for ", memory::current_op());
  std::shared_ptr<Storage> storage(new Storage());
  storage->data_ = data;
  storage->huge_pages_ = huge;
  storage->bytes_ = bytes;
  storage->device_ = device;
  memory::record_allocation(device, static_cast<int64_t>(bytes));
  return storage;
}

std::shared_ptr<Storage> Storage::borrow(std::shared_ptr<const void> owner, const void* data,
                                         size_t bytes, PageRelease release) {
  std::shared_ptr<Storage> storage(new Storage());
  storage->data_ = const_cast<void*>(data);
  storage->bytes_ = bytes;
  storage->owner_ = std::move(owner);
  storage->release_ = release;
  return storage;
}

void Storage::release_pages() const { release_pages(data_, bytes_); }

void Storage::release_pages(const void* data, size_t bytes) const {
  const auto* begin = static_cast<const char*>(data);
  const auto* own = static_cast<const char*>(data_);
  if (begin < own || begin + bytes > own + bytes_) {
    fail("Storage::release_pages: range is outside the storage");
  }
  if (release_ && owner_) release_(owner_.get(), data, bytes);
}

Storage::~Storage() {
  if (owner_) return;
  free_aligned(data_, alignment_rounded(bytes_), huge_pages_);
  memory::record_release(device_, static_cast<int64_t>(bytes_));
}

}  // namespace fornace
