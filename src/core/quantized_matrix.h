// A block-quantized matrix [rows, columns], as a GGUF file stores it (read in place) or packed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/block_type.h"

namespace fornace {

struct QuantizedMatrix {
  BlockType type = BlockType::q8_0;
  int64_t rows = 0;
  int64_t columns = 0;
  size_t row_bytes = 0;  // block_row_bytes(type, columns)
  const uint8_t* data = nullptr;
  std::shared_ptr<const void> owner;  // Keeps the mapping (or a copy) alive.
  // How to drop the rows' mapped pages once a packed copy replaces them (Storage::PageRelease);
  // null where they are not a mapping's.
  void (*release_pages)(const void* owner, const void* data, size_t bytes) = nullptr;
  bool interleaved = false;  // Rows rearranged by cpu::interleave_rows, not as stored.

  size_t bytes() const { return row_bytes * static_cast<size_t>(rows); }
  const uint8_t* row(int64_t index) const { return data + row_bytes * static_cast<size_t>(index); }
};

}  // namespace fornace
