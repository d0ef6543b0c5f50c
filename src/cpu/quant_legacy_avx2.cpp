// AVX2 kernels of the legacy block formats (stub: the portable kernels).
#include "cpu/quant_legacy_kernels.h"

namespace fornace::cpu::legacy::avx2 {
const BlockKernels* kernels(BlockType type) { return portable::kernels(type); }
}  // namespace fornace::cpu::legacy::avx2
