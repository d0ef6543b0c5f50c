// Ops that compute: matmul, linear, norms, rotary embedding, softmax, activations, reductions.
// Every op accepts any layout and returns a new contiguous tensor. Float math accumulates in f32.
// The *_into forms write into a given contiguous `output` of the result's shape and dtype
// instead, so a decode step can run without allocating; output may alias an elementwise input.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/block_type.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "cpu/elementwise.h"
#include "cpu/gemm.h"

namespace fornace {

// The activation of a gated MLP (silu or gelu_tanh).
using cpu::GateActivation;

// [..., M, K] x [..., K, N] -> [..., M, N]; batch dims broadcast. Both inputs share a float
// dtype (f32, bf16 or f16), or the left is f32 and the right any float dtype (a bf16 right then
// rounds the left to bf16, as a bf16 matmul would); the result has the left's dtype,
// accumulated in f32. A right operand that is contiguous, or the transpose of a contiguous one,
// is read in place; any other layout is packed once.
Tensor matmul(const Tensor& left, const Tensor& right);

// One layer of linear_group_into: output = input · weightᵀ + bias, output contiguous f32.
// `packed`, when given, is the weight packed for the kernels (nn/packed_weights.h), read
// instead of the weight.
struct LinearLayerInto {
  const Tensor* output;
  const Tensor* weight;
  const std::optional<Tensor>* bias;
  const Storage* packed = nullptr;
};
// The dtype in which the linear kernels take their input for weights of `weight_dtype`: bf16
// where they round f32 input to bf16 anyway (bf16 weights with AVX512_BF16), so that the op that
// makes the input can write bf16 and spare them a pass over it; else f32. Either dtype works
// with every weight, with the same results where this is bf16.
DType linear_input_dtype(DType weight_dtype);

// Several linear layers over one f32 or bf16 input (Q, K and V; gate and up), each into its own
// output, in one pass: the input is rounded to bf16 or packed once, and the threads take one
// hand-off for all the layers. The weights must share a dtype; at most 8 layers. The same
// results as linear_into layer by layer, bit for bit.
void linear_group_into(const Tensor& input, std::span<const LinearLayerInto> layers);
// The gate and up layers of a gated MLP as linear_group_into runs them, and activation(gate) *
// up into `output` (f32 or bf16, their shape): bit for bit linear_group_into, then
// gated_activation_into. The GEMM takes the product tile by tile while gate and up are in L1; it
// may use their outputs as scratch (what they hold after the call is unspecified), and `output`
// may be gate's output.
void linear_gated_into(const Tensor& output, const Tensor& input, const LinearLayerInto& gate,
                       const LinearLayerInto& up, GateActivation activation);
// Where a gated op writes activation(gate) * up: `output`, checked to be f32 or bf16 of gate's
// output shape, which up's must share (named `op` in errors).
cpu::GatedProduct gated_product_into(const Tensor& output, const Tensor& gate_output,
                                     const Tensor& up_output, GateActivation activation,
                                     const char* op);

// x [..., K] times weight [N, K] transposed, plus bias [N]: [..., N] in x's dtype. The weight
// and bias may have another float dtype than x (bf16 weights with f32 activations).
// `packed` as in LinearLayerInto.
Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = {},
              const Storage* packed = nullptr);
void linear_into(const Tensor& output, const Tensor& input, const Tensor& weight,
                 const std::optional<Tensor>& bias = {}, const Storage* packed = nullptr);

// x / sqrt(mean(x^2, last dim) + eps) * weight, weight [H] for x [..., H]. rms_norm_into writes
// an output of any float dtype (computed in f32, then rounded).
Tensor rms_norm(const Tensor& input, const Tensor& weight, double eps);
void rms_norm_into(const Tensor& output, const Tensor& input, const Tensor& weight, double eps);
// The residual step before a norm, in one pass over the rows: hidden += update in place, then
// rms_norm_into(output, hidden, weight, eps); bit for bit add_into, then rms_norm_into, which it
// runs when hidden and update are not contiguous f32 of one shape.
void add_rms_norm_into(const Tensor& output, const Tensor& hidden, const Tensor& update,
                       const Tensor& weight, double eps);

// Rotary embedding in the half-split form of HF's Qwen2 and Llama (rotate_half): for x
// [B, H, S, D], with cos and sin [S, D/2] for the positions of the S rows:
//   out[..., i]       = x[..., i] * cos - x[..., i + D/2] * sin
//   out[..., i + D/2] = x[..., i + D/2] * cos + x[..., i] * sin
Tensor rope(const Tensor& input, const Tensor& cos, const Tensor& sin);
// rope_into writes a contiguous output of any float dtype.
void rope_into(const Tensor& output, const Tensor& input, const Tensor& cos, const Tensor& sin);

// Softmax over the last dim, shifted by the row maximum.
Tensor softmax(const Tensor& input);
Tensor silu(const Tensor& input);
// Elementwise with NumPy broadcasting; both operands share a dtype.
Tensor add(const Tensor& left, const Tensor& right);
void add_into(const Tensor& output, const Tensor& left, const Tensor& right);
Tensor mul(const Tensor& left, const Tensor& right);
Tensor scale(const Tensor& input, double factor);
void scale_into(const Tensor& output, const Tensor& input, double factor);
// The op's name in traces: silu_mul or gelu_tanh_mul.
const char* gated_op_name(GateActivation activation);
// activation(gate) * up into `output`, which may alias gate or up, of any float dtype (computed
// in f32, then rounded).
void gated_activation_into(const Tensor& output, const Tensor& gate, const Tensor& up,
                           GateActivation activation);
// cap * tanh(x / cap) into `output` (may alias input): logit soft-capping.
void soft_cap_into(const Tensor& output, const Tensor& input, double cap);
// Index of the largest element over the last dim (first one on ties), as u32 [...].
Tensor argmax(const Tensor& input);

// Attention for q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D] in any layout, Hq a multiple of Hkv
// (query head h reads kv head h / (Hq / Hkv), no repeated copies). With `causal`, query i sits
// at position Skv - Sq + i and sees keys up to it, or only the last `window` of them when
// window > 0 (a sliding-window layer). Returns [B, Hq, Sq, D] in q's dtype. attention_into
// writes an output of any float dtype, also through the transposed view of a contiguous
// [B, Sq, Hq, D] (the heads merged). With `kv_blocks` (Q8_0 or Q4_0), k and v are rows of blocks
// from quantize_rows (ops/quantized.h), u32 [B, Hkv, Skv, words] in any layout, read in place.
Tensor attention(const Tensor& query, const Tensor& key, const Tensor& value, double scale,
                 bool causal, int64_t window = 0, std::optional<BlockType> kv_blocks = {});
void attention_into(const Tensor& output, const Tensor& query, const Tensor& key,
                    const Tensor& value, double scale, bool causal, int64_t window = 0,
                    std::optional<BlockType> kv_blocks = {});

// Throws Error naming `op` unless `output` is a contiguous, writable tensor of `shape` and
// `dtype` (the check every *_into op makes).
void require_output(const Tensor& output, const Dims& shape, DType dtype, const char* op);

}  // namespace fornace
