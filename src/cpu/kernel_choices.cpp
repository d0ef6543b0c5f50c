// kernel_choices(): the active ISA and the linear-layer kernels it picks, in words.
#include "cpu/kernel_choices.h"

#include "core/dtype.h"
#include "cpu/attention.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"
#include "cpu/quant.h"

namespace fornace::cpu {

std::string kernel_choices() {
  return std::string("isa ") + isa_name(active_isa()) +
         "; gemv bf16: " + gemv_kernel_name(DType::bf16) +
         "; gemm bf16: " + gemm_kernel_name(DType::bf16) +
         "; quantized: " + quantized_kernel_name() +
         "; attention bf16: " + bf16_attention_kernel_name() +
         "; attention q8_0/q4_0: " + quantized_cache_attention_kernel_name();
}

}  // namespace fornace::cpu
