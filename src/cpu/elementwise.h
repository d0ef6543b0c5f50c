// Kernels on unit-stride f32 runs and rows: activations, arithmetic, softmax, RMS norm, RoPE and
// argmax. The ops in src/ops/math.cpp feed them rows of any layout and dtype. Each call runs the
// version for the active ISA (elementwise_kernels.inl, compiled per ISA).
#pragma once

#include <cstdint>

namespace fornace::cpu {

enum class BinaryOp { add, mul };
// The activation of a gated MLP: SwiGLU (silu) or GeGLU with the tanh GELU (Gemma's
// gelu_pytorch_tanh).
enum class GateActivation { silu, gelu_tanh };

// out[i] = left[i] op right[i]; out may alias left or right.
void binary_run(BinaryOp op, const float* left, const float* right, float* out, int64_t count);
// out[i] = x / (1 + e^-x).
void silu_run(const float* input, float* out, int64_t count);
// out[i] = GELU with the tanh approximation: x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// which equals 0.5 x (1 + tanh(u)).
void gelu_tanh_run(const float* input, float* out, int64_t count);
// out[i] = cap * tanh(input[i] / cap), logit soft-capping.
void soft_cap_run(const float* input, float cap, float* out, int64_t count);
void scale_run(const float* input, float factor, float* out, int64_t count);

// out = softmax(input) over `count` values, shifted by the maximum.
void softmax_row(const float* input, float* out, int64_t count);
// out[i] = input[i] / sqrt(mean(input^2) + eps) * weight[i].
void rms_norm_row(const float* input, const float* weight, float epsilon, float* out,
                  int64_t count);
// Half-split rotation: input row r (2 * half values, rows input_stride apart) by cos/sin row r
// (half values, rows table_stride apart) into out row r (rows 2 * half apart), f32 or bf16
// (`out_is_bf16`, rounded as round_to_bf16_run).
void rope_rows(const float* input, int64_t input_stride, const float* cos, const float* sin,
               int64_t table_stride, int64_t rows, int64_t half, void* out, bool out_is_bf16);
// Index of the first largest value; NaN never wins; 0 when every value is NaN.
int64_t argmax_row(const float* input, int64_t count);
// out[0, width) = sum over r < count of weights[r] * rows[r * row_stride + (0, width)], the rows
// f32 or bf16 (`rows_are_bf16`) read in place: a small matmul against a right operand stored
// row-major, such as attention probabilities times V.
void weighted_row_sum(const float* weights, const void* rows, bool rows_are_bf16,
                      int64_t row_stride, int64_t count, int64_t width, float* out);
// out[i] = f32_to_bf16(input[i]) (round to nearest even, NaN kept quiet), bit for bit.
void round_to_bf16_run(const float* input, uint16_t* out, int64_t count);
// out[i] = f16_to_f32(input[i]), exactly.
void widen_f16_run(const uint16_t* input, float* out, int64_t count);
// out[r][i] = activation(gate[r][i]) * up[r][i] for r < rows, i < count: bit for bit what
// silu_run or gelu_tanh_run, then binary_run's product give. `out` is f32, or bf16 (`out_is_bf16`)
// rounded as round_to_bf16_run. Strides are in elements.
void gated_product_rows(GateActivation activation, const float* gate, int64_t gate_stride,
                        const float* up, int64_t up_stride, int64_t rows, int64_t count, void* out,
                        bool out_is_bf16, int64_t out_stride);

// One ISA's versions of the functions above.
struct ElementwiseKernels {
  void (*binary_run)(BinaryOp, const float*, const float*, float*, int64_t);
  void (*silu_run)(const float*, float*, int64_t);
  void (*gelu_tanh_run)(const float*, float*, int64_t);
  void (*soft_cap_run)(const float*, float, float*, int64_t);
  void (*scale_run)(const float*, float, float*, int64_t);
  void (*softmax_row)(const float*, float*, int64_t);
  void (*rms_norm_row)(const float*, const float*, float, float*, int64_t);
  void (*rope_rows)(const float*, int64_t, const float*, const float*, int64_t, int64_t, int64_t,
                    void*, bool);
  int64_t (*argmax_row)(const float*, int64_t);
  void (*weighted_row_sum)(const float*, const void*, bool, int64_t, int64_t, int64_t, float*);
  void (*round_to_bf16_run)(const float*, uint16_t*, int64_t);
  void (*gated_product_rows)(GateActivation, const float*, int64_t, const float*, int64_t, int64_t,
                             int64_t, void*, bool, int64_t);
  void (*widen_f16_run)(const uint16_t*, float*, int64_t);
};
namespace portable {
extern const ElementwiseKernels elementwise_kernels;
}
namespace avx2 {
extern const ElementwiseKernels elementwise_kernels;
}
namespace avx512 {
extern const ElementwiseKernels elementwise_kernels;
}

}  // namespace fornace::cpu
