// Picks the block kernels of a type for an ISA.
#include "cpu/quant.h"

#include <string>

#include "core/error.h"
#include "cpu/quant_internal.h"

namespace fornace::cpu {

const BlockKernels& block_kernels(BlockType type, Isa isa) {
  if (const BlockKernels* kernels = legacy_block_kernels(type, isa)) return *kernels;
  if (const BlockKernels* kernels = k_block_kernels(type, isa)) return *kernels;
  throw Error(std::string("no block kernels for ") + block_format(type).name);
}

const BlockKernels& block_kernels(BlockType type) { return block_kernels(type, active_isa()); }

}  // namespace fornace::cpu
