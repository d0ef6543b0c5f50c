// The attention tile kernel (attention_kernel.inl) compiled for AVX2.
#define FORNACE_KERNEL_NAMESPACE avx2
#include "cpu/attention_kernel.inl"
