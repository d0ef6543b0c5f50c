// The elementwise kernels (elementwise_kernels.inl) compiled for AVX512.
#define FORNACE_KERNEL_NAMESPACE avx512
#include "cpu/elementwise_kernels.inl"
