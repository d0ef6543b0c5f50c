// The elementwise entry points: each runs the active ISA's kernel. Also the portable instance.
#include "cpu/elementwise.h"

#include "cpu/cpu_features.h"

#define FORNACE_KERNEL_NAMESPACE portable
#include "cpu/elementwise_kernels.inl"
#undef FORNACE_KERNEL_NAMESPACE

namespace fornace::cpu {
namespace {

const ElementwiseKernels& active() {
  switch (active_isa()) {
    case Isa::avx512:
      return avx512::elementwise_kernels;
    case Isa::avx2:
      return avx2::elementwise_kernels;
    case Isa::portable:
      break;
  }
  return portable::elementwise_kernels;
}

}  // namespace

void binary_run(BinaryOp op, const float* left, const float* right, float* out, int64_t count) {
  active().binary_run(op, left, right, out, count);
}
void silu_run(const float* input, float* out, int64_t count) {
  active().silu_run(input, out, count);
}
void gelu_tanh_run(const float* input, float* out, int64_t count) {
  active().gelu_tanh_run(input, out, count);
}
void soft_cap_run(const float* input, float cap, float* out, int64_t count) {
  active().soft_cap_run(input, cap, out, count);
}
void scale_run(const float* input, float factor, float* out, int64_t count) {
  active().scale_run(input, factor, out, count);
}
void softmax_row(const float* input, float* out, int64_t count) {
  active().softmax_row(input, out, count);
}
void rms_norm_row(const float* input, const float* weight, float epsilon, float* out,
                  int64_t count) {
  active().rms_norm_row(input, weight, epsilon, out, count);
}
void rope_rows(const float* input, int64_t input_stride, const float* cos, const float* sin,
               int64_t table_stride, int64_t rows, int64_t half, void* out, bool out_is_bf16) {
  active().rope_rows(input, input_stride, cos, sin, table_stride, rows, half, out, out_is_bf16);
}
int64_t argmax_row(const float* input, int64_t count) {
  return active().argmax_row(input, count);
}

void weighted_row_sum(const float* weights, const void* rows, bool rows_are_bf16,
                      int64_t row_stride, int64_t count, int64_t width, float* out) {
  active().weighted_row_sum(weights, rows, rows_are_bf16, row_stride, count, width, out);
}

void round_to_bf16_run(const float* input, uint16_t* out, int64_t count) {
  active().round_to_bf16_run(input, out, count);
}

void widen_f16_run(const uint16_t* input, float* out, int64_t count) {
  active().widen_f16_run(input, out, count);
}

void gated_product_rows(GateActivation activation, const float* gate, int64_t gate_stride,
                        const float* up, int64_t up_stride, int64_t rows, int64_t count, void* out,
                        bool out_is_bf16, int64_t out_stride) {
  active().gated_product_rows(activation, gate, gate_stride, up, up_stride, rows, count, out,
                              out_is_bf16, out_stride);
}

}  // namespace fornace::cpu
