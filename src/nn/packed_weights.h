// PackedWeights: a load's weights packed once for the CPU kernels (bf16 GEMM panels, interleaved
// quantized rows), or handed out again from the forms an earlier load stored.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/quantized_matrix.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "io/file_mapping.h"

namespace fornace {

// Forms packed at an earlier load, to be handed out again instead of packed: `bytes` holds them
// in order, each at a 64-byte aligned offset, and `sizes` gives their byte counts.
// `mapping`, when they were mapped from a file (nn/packed_cache.h), is that file's mapping.
struct StoredPackedForms {
  std::shared_ptr<const Storage> bytes;
  std::vector<size_t> sizes;
  std::shared_ptr<const FileMapping> mapping;
};

// Packs contiguous bf16 weights [N, K] once for the CPU kernels (the GEMM's panels, which the
// GEMV reads too), one after another in shared buffers of 2 MiB pages (a buffer each would leave
// a partly used 2 MiB page per weight). Buffers are counted as load memory. Given the forms an
// earlier load stored, it hands those out in turn instead, each after a check that its head is
// what packing gives now; from the first form that differs in size or head on, it packs anew.
class PackedWeights {
 public:
  // `huge_pages`: whether the weights are mapped in 2 MiB pages (FileMappingOptions), where
  // quantized layers read a packed copy (nn/weights.cpp); by default as the kernel offers them.
  PackedWeights() : PackedWeights(StoredPackedForms{}) {}
  explicit PackedWeights(StoredPackedForms stored)
      : PackedWeights(std::move(stored), FileMappingOptions::for_mode(HugePages::on).huge_pages) {}
  PackedWeights(StoredPackedForms stored, bool huge_pages)
      : stored_(std::move(stored)), huge_pages_(huge_pages) {}

  // The packed copy of `weight`, or null where the active kernels read the weight as stored:
  // another dtype, a CPU without AVX512_BF16, or FORNACE_PACKED_WEIGHTS=0. With
  // `release_source`, the weight's mapped pages are released (Storage::release_pages) slice by
  // slice as their panels are written, so that no more than a slice is ever held twice.
  std::shared_ptr<const Storage> pack(const Tensor& weight, bool release_source = false);
  // Another packed form of a weight, `bytes` long: the next stored form when its first
  // `head_bytes` equal what `write_head` writes, else new space in the shared buffers (64-byte
  // aligned) that `write` fills.
  using Write = std::function<void(char* data)>;
  std::shared_ptr<const Storage> place(size_t bytes, size_t head_bytes, const Write& write,
                                       const Write& write_head);

  // Every form handed out, in order: what a cache of this load's packing stores.
  const std::vector<std::shared_ptr<const Storage>>& forms() const { return forms_; }
  // How many of them came from the stored forms.
  size_t stored_forms_used() const { return stored_used_; }
  // The bytes of all forms, of those that came from the stored forms, and the milliseconds that
  // packing and checking them took.
  int64_t packed_bytes() const { return packed_bytes_; }
  int64_t stored_bytes() const { return stored_bytes_; }
  double pack_ms() const { return pack_ms_; }
  bool huge_pages() const { return huge_pages_; }
  // The stored forms' file mapping, if any.
  const std::shared_ptr<const FileMapping>& stored_mapping() const { return stored_.mapping; }

 private:
  std::shared_ptr<const Storage> next_stored(size_t bytes, size_t head_bytes,
                                             const Write& write_head);

  std::shared_ptr<Storage> buffer_;
  size_t used_ = 0;
  StoredPackedForms stored_;
  size_t stored_offset_ = 0;
  size_t stored_used_ = 0;
  bool stored_differ_ = false;
  std::vector<std::shared_ptr<const Storage>> forms_;
  bool huge_pages_ = true;
  int64_t packed_bytes_ = 0;
  int64_t stored_bytes_ = 0;
  double pack_ms_ = 0;
};

// The matrix for a layer whose input is rounded to 8-bit blocks, where the active kernels take
// interleaved rows (AVX-512): in `packed`'s buffers, its rows interleaved (cpu::interleave_rows)
// where its format has such kernels, else as stored (so that no weight read at every step keeps
// mapping back the pages around it), the mapped pages released; else `matrix` itself.
// FORNACE_PACKED_WEIGHTS=0 or FORNACE_INTERLEAVED_QUADS=0 keeps it as stored.
QuantizedMatrix packed_for_int8_input(const QuantizedMatrix& matrix, PackedWeights& packed);

}  // namespace fornace
