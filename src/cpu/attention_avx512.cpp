// The attention tile kernel (attention_kernel.inl) compiled for AVX512.
#define FORNACE_KERNEL_NAMESPACE avx512
#include "cpu/attention_kernel.inl"
