// Packing weights for the kernels at load: bf16 panels, interleaved quantized rows, and the
// stored forms of an earlier load handed out again.
#include "nn/packed_weights.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>

#include "core/memory.h"
#include "cpu/gemm.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"

namespace fornace {

std::shared_ptr<const Storage> PackedWeights::pack(const Tensor& weight, bool release_source) {
  if (weight.dtype() != DType::bf16 || weight.rank() != 2 || !weight.is_contiguous() ||
      weight.numel() == 0 || !cpu::packs_bf16_weights()) {
    return nullptr;
  }
  const int64_t outputs = weight.dim(0);
  const int64_t depth = weight.dim(1);
  const auto* source = weight.data<uint16_t>();
  auto write = [&](char* data) {
    // Slices of about 8 MiB of the weight: a 272 MB tied embedding packed whole would hold both
    // copies at once.
    const int64_t panels = (outputs + 31) / 32;
    const int64_t slice_panels = std::max<int64_t>(1, (int64_t{8} << 20) / (32 * depth * 2));
    for (int64_t panel = 0; panel < panels; panel += slice_panels) {
      const int64_t end = std::min(panels, panel + slice_panels);
      cpu::pack_bf16_weight(source, outputs, depth, data, panel, end);
      if (release_source) {
        const int64_t first_row = panel * 32;
        const int64_t row_count = std::min(outputs, end * 32) - first_row;
        weight.storage()->release_pages(source + first_row * depth,
                                        static_cast<size_t>(row_count * depth * 2));
      }
    }
  };
  auto write_first_panel = [&](char* data) {
    cpu::pack_bf16_weight(source, outputs, depth, data, 0, 1);
  };
  std::shared_ptr<const Storage> packed =
      place(static_cast<size_t>(cpu::packed_bf16_bytes(outputs, depth)),
            static_cast<size_t>(cpu::packed_bf16_panel_bytes(depth)), write, write_first_panel);
  // Pages that straddle two slices went with neither (and a stored form's source went whole).
  if (release_source) weight.storage()->release_pages();
  return packed;
}

std::shared_ptr<const Storage> PackedWeights::next_stored(size_t bytes, size_t head_bytes,
                                                          const Write& write_head) {
  const size_t index = stored_used_;
  if (stored_differ_ || !stored_.bytes || index >= stored_.sizes.size() ||
      stored_.sizes[index] != bytes || stored_offset_ + bytes > stored_.bytes->bytes()) {
    stored_differ_ = true;
    return nullptr;
  }
  const char* data = static_cast<const char*>(stored_.bytes->data()) + stored_offset_;
  head_bytes = std::min(head_bytes, bytes);
  struct AlignedDelete {
    void operator()(char* head) const { ::operator delete (head, std::align_val_t{64}); }
  };
  std::unique_ptr<char, AlignedDelete> head(
      static_cast<char*>(::operator new (std::max<size_t>(head_bytes, 64), std::align_val_t{64})));
  write_head(head.get());
  if (std::memcmp(head.get(), data, head_bytes) != 0) {
    stored_differ_ = true;
    return nullptr;
  }
  stored_offset_ += (bytes + 63) / 64 * 64;
  ++stored_used_;
  return Storage::borrow(stored_.bytes, data, bytes);
}

std::shared_ptr<const Storage> PackedWeights::place(size_t bytes, size_t head_bytes,
                                                    const Write& write, const Write& write_head) {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const Storage> form = next_stored(bytes, head_bytes, write_head);
  const bool stored = form != nullptr;
  if (!stored) {
    constexpr size_t kBufferBytes = size_t{32} << 20;
    if (!buffer_ || used_ + bytes > buffer_->bytes()) {
      memory::OpScope scope("pack_weight");
      buffer_ = Storage::allocate(std::max(kBufferBytes, bytes));
      used_ = 0;
    }
    char* data = static_cast<char*>(buffer_->data()) + used_;
    used_ += (bytes + 63) / 64 * 64;
    write(data);
    form = Storage::borrow(buffer_, data, bytes);
  }
  forms_.push_back(form);
  packed_bytes_ += static_cast<int64_t>(bytes);
  if (stored) stored_bytes_ += static_cast<int64_t>(bytes);
  pack_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return form;
}

QuantizedMatrix packed_for_int8_input(const QuantizedMatrix& matrix, PackedWeights& packed) {
  if (matrix.interleaved || !cpu::interleaves_quantized_rows()) return matrix;
  const bool interleave =
      cpu::has_interleaved_kernels(matrix.type, matrix.columns, cpu::active_isa()) &&
      matrix.row_bytes == block_row_bytes(matrix.type, matrix.columns);
  // Rows kept as stored are copied only to let the mapping go: a weight read at every step would
  // otherwise map back the 2 MiB pages around it, released rows and all.
  if (!interleave && !matrix.release_pages) return matrix;
  // Slices of about 8 MiB, each slice's mapped pages released once it is copied, so that a large
  // table is never held twice; then the pages that straddled two slices.
  const int64_t slice_rows =
      std::max<int64_t>(1, (int64_t{8} << 20) / static_cast<int64_t>(matrix.row_bytes));
  auto write_rows = [&](uint8_t* out, int64_t first, int64_t count) {
    ThreadPool::global().run(count, 64, [&](int64_t begin, int64_t end) {
      uint8_t* destination = out + (first + begin) * matrix.row_bytes;
      if (interleave) {
        cpu::interleave_rows(matrix.type, matrix.row(first + begin), destination, end - begin,
                             matrix.columns);
      } else {
        std::memcpy(destination, matrix.row(first + begin), (end - begin) * matrix.row_bytes);
      }
    });
  };
  auto write = [&](char* data) {
    auto* out = reinterpret_cast<uint8_t*>(data);
    for (int64_t first = 0; first < matrix.rows; first += slice_rows) {
      const int64_t count = std::min(slice_rows, matrix.rows - first);
      write_rows(out, first, count);
      if (matrix.release_pages) {
        matrix.release_pages(matrix.owner.get(), matrix.row(first), count * matrix.row_bytes);
      }
    }
  };
  // The first 64 rows (whole groups of interleaved rows), or the first slice's when it is shorter.
  const int64_t head_rows = std::min({int64_t{64}, matrix.rows, slice_rows});
  auto write_head = [&](char* data) { write_rows(reinterpret_cast<uint8_t*>(data), 0, head_rows); };
  std::shared_ptr<const Storage> copy = packed.place(
      matrix.bytes(), static_cast<size_t>(head_rows) * matrix.row_bytes, write, write_head);
  const auto* out = static_cast<const uint8_t*>(copy->data());
  if (matrix.release_pages) matrix.release_pages(matrix.owner.get(), matrix.data, matrix.bytes());
  QuantizedMatrix result = matrix;
  result.data = out;
  result.owner = copy;
  result.release_pages = nullptr;
  result.interleaved = interleave;
  return result;
}

}  // namespace fornace
