// The tables of block kernels, one per family of formats, behind block_kernels().
#pragma once

#include "cpu/quant.h"

namespace fornace::cpu {

// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (cpu/quant_legacy*.cpp); null for other types.
const BlockKernels* legacy_block_kernels(BlockType type, Isa isa);
// Q4_K, Q5_K and Q6_K (cpu/quant_k*.cpp); null for other types.
const BlockKernels* k_block_kernels(BlockType type, Isa isa);

}  // namespace fornace::cpu
