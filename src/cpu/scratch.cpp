// Per-thread scratch buffers: one counted Storage per slot and thread, grown on demand.
#include "cpu/scratch.h"

#include <algorithm>
#include <array>
#include <memory>

#include "core/storage.h"

namespace fornace::cpu {

void* thread_scratch(ScratchSlot slot, size_t bytes) {
  constexpr size_t kInitialBytes = size_t{64} << 10;
  thread_local std::array<std::shared_ptr<Storage>, static_cast<size_t>(ScratchSlot::count)>
      buffers;
  std::shared_ptr<Storage>& buffer = buffers[static_cast<size_t>(slot)];
  if (!buffer || buffer->bytes() < bytes) {
    buffer = Storage::allocate(std::max(bytes, kInitialBytes));
  }
  return buffer->data();
}

}  // namespace fornace::cpu
