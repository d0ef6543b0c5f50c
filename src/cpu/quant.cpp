// Picks the block kernels of a type for an ISA.
#include "cpu/quant.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "core/error.h"
#include "cpu/quant_internal.h"
#include "cpu/quant_legacy_kernels.h"

namespace fornace::cpu {

const BlockKernels& block_kernels(BlockType type, Isa isa) {
  if (const BlockKernels* kernels = legacy_block_kernels(type, isa)) return *kernels;
  if (const BlockKernels* kernels = k_block_kernels(type, isa)) return *kernels;
  throw Error(std::string("no block kernels for ") + block_format(type).name);
}

const BlockKernels& block_kernels(BlockType type) { return block_kernels(type, active_isa()); }

namespace {
const BlockKernels* legacy_interleaved_kernels(BlockType type, Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return legacy::avx512::interleaved_kernels(type);
    case Isa::avx2:
      return legacy::avx2::interleaved_kernels(type);
    default:
      return nullptr;
  }
}
}  // namespace

bool has_interleaved_kernels(BlockType type, int64_t columns, Isa isa) {
  return legacy_interleaved_kernels(type, isa) != nullptr && columns > 0 &&
         columns % (4 * legacy::kBlockElements) == 0;
}

bool interleaves_quantized_rows() {
  return has_interleaved_kernels(active_isa()) && packed_weights_selected() &&
         interleaved_quads_selected();
}

bool has_interleaved_kernels(Isa isa) {
  const BlockType legacy_types[] = {BlockType::q4_0, BlockType::q4_1, BlockType::q5_0,
                                    BlockType::q5_1, BlockType::q8_0};
  return std::any_of(std::begin(legacy_types), std::end(legacy_types), [isa](BlockType type) {
    return has_interleaved_kernels(type, 4 * legacy::kBlockElements, isa);
  });
}

const BlockKernels& interleaved_block_kernels(BlockType type, Isa isa) {
  const BlockKernels* kernels = legacy_interleaved_kernels(type, isa);
  if (!kernels) {
    throw Error(std::string("no interleaved block kernels for ") + block_format(type).name +
                " at " + isa_name(isa));
  }
  return *kernels;
}

void interleave_rows(BlockType type, const void* in, void* out, int64_t rows, int64_t columns) {
  if (!has_interleaved_kernels(type, columns, active_isa())) {
    fail("interleave_rows: no interleaved kernels for ", block_format(type).name, " rows of ",
         columns);
  }
  const int64_t quads = columns / (4 * legacy::kBlockElements) * rows;
  legacy::interleave_quads(type, static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out),
                           quads);
}

}  // namespace fornace::cpu
