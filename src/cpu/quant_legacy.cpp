// Placeholder table until the kernels land.
#include "cpu/quant_internal.h"

namespace fornace::cpu {

const BlockKernels* legacy_block_kernels(BlockType, Isa) { return nullptr; }

}  // namespace fornace::cpu

namespace fornace::cpu {

void quantized_linear(const QuantizedLinearProblem&) {}

}  // namespace fornace::cpu
