// The elementwise kernels (elementwise_kernels.inl) compiled for AVX2.
#define FORNACE_KERNEL_NAMESPACE avx2
#include "cpu/elementwise_kernels.inl"
