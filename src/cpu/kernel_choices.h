// The kernels this process runs, in one line: the instruction-set level and what each linear-layer
// path picks at it (printed by --trace and recorded by fornace-bench, so that runs compare).
#pragma once

#include <string>

namespace fornace::cpu {

// "isa avx512; gemv bf16: ...; gemm bf16: ...; quantized: ..." at the active ISA.
std::string kernel_choices();

}  // namespace fornace::cpu
