// Per-thread scratch buffers kept between calls, so kernels in the decode loop do not allocate.
#pragma once

#include <cstddef>

namespace fornace::cpu {

// Which buffer: kernels that may be in use on one thread at the same time take different slots.
enum class ScratchSlot {
  gemv_input,
  gemm_weight_panels,
  gemm_gated_tiles,  // a gate and an up tile of linear_gated's GEMM
  quantized_input,
  widened_weight,  // quantized weight rows widened to bf16 for a GEMM
  rounding_residual,       // an input row less its 8-bit rounding
  quantized_partial_sums,  // dot products of an input's two 8-bit rows, before their sum
  count
};

// A buffer of at least `bytes`, owned by the calling thread; valid until the next call for the
// same slot on this thread. It starts at 64 KiB so that small uses never grow it.
void* thread_scratch(ScratchSlot slot, size_t bytes);

}  // namespace fornace::cpu
