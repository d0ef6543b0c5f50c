// Linear-layer kernels on raw pointers: output = input · weightᵀ + bias, as a GEMV for a few
// rows (decode) or a blocked, packed GEMM (prefill), on the thread pool, for the active ISA.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "cpu/elementwise.h"

namespace fornace::cpu {

// A weight stored in blocks that the GEMM widens as it packs each panel (a quantized prefill),
// so that the widened rows never leave the thread's cache. Row r's values from k on, for k a
// multiple of k_step, start at rows + r * row_bytes + k / k_step * step_bytes; the widenings
// write n of them (a multiple of k_step): to bf16 for the bf16 micro-kernels, to f32 for the
// f32 ones (AVX2).
struct BlockWeight {
  const void* rows = nullptr;
  size_t row_bytes = 0;
  int64_t k_step = 1;
  size_t step_bytes = 0;
  void (*widen_row_bf16)(const void* blocks, uint16_t* out, int64_t n) = nullptr;
  void (*widen_row_f32)(const void* blocks, float* out, int64_t n) = nullptr;
  bool present() const { return rows != nullptr; }
};

// output[m][n] = sum_k input[m][k] * weight[n][k] + bias[n], for m < rows, n < outputs,
// k < depth. Rows are contiguous along k (and along n for the output); the strides are between
// rows, in elements. Accumulation is in f32.
struct LinearProblem {
  // f32 rows, or bf16 rows where linear_rounds_input_to_bf16(weight_dtype): the kernels would
  // round f32 to bf16 anyway, and read bf16 rows as they are.
  const void* input = nullptr;
  DType input_dtype = DType::f32;
  int64_t input_stride = 0;
  int64_t rows = 0;              // M
  int64_t depth = 0;             // K
  int64_t outputs = 0;           // N
  const void* weight = nullptr;  // f32, bf16 or f16
  DType weight_dtype = DType::f32;
  int64_t weight_stride = 0;
  const float* bias = nullptr;  // f32 [outputs], or null
  float* output = nullptr;
  int64_t output_stride = 0;
  // The same bf16 weight packed by pack_bf16_weight, or null. Only where packs_bf16_weights();
  // the GEMM and the GEMV then read it instead of `weight`.
  const void* packed_weight = nullptr;
  // Where present, the weight's rows in blocks, widened as the GEMM packs them; weight_dtype
  // (bf16 or f32) then picks the GEMM, and `weight` is unused. The GEMM only (gemm, gemm_group,
  // linear_gated with more than kGemvPreferredMaxRows rows), with the widening that its
  // micro-kernel takes (gemm_widens_blocks_to_bf16).
  BlockWeight blocks;
};

// Whether bf16 weights are packed once at load for the active ISA's kernels: at the AVX-512
// level (AVX512_BF16), unless FORNACE_PACKED_WEIGHTS=0.
bool packs_bf16_weights();
// Bytes of a bf16 weight [outputs, depth] packed: panels of 32 weight rows over the whole depth,
// as [k / 2][32][2] (the GEMM's weight panel format), zero past the weight; 64-byte aligned.
int64_t packed_bf16_panel_bytes(int64_t depth);
int64_t packed_bf16_bytes(int64_t outputs, int64_t depth);
// Packs panels [panel_begin, panel_end) of a contiguous bf16 weight [outputs, depth] into
// `packed` (packed_bf16_bytes in all, 64-byte aligned), on the thread pool. Needs
// packs_bf16_weights().
void pack_bf16_weight(const uint16_t* weight, int64_t outputs, int64_t depth, void* packed,
                      int64_t panel_begin, int64_t panel_end);
// Row `row` of a weight packed by pack_bf16_weight (depth wide), as it was stored: `depth` bf16.
void unpack_bf16_row(const void* packed, int64_t depth, int64_t row, uint16_t* out);

// The GEMV kernels take up to this many input rows per pass over a block of weight rows; the
// AVX-512 BF16 kernel takes up to kGemvBf16DotMaxRows (a batched decode step of 8 sequences
// reads each weight once).
constexpr int64_t kGemvMaxRows = 4;
constexpr int64_t kGemvBf16DotMaxRows = 8;
// Up to this many rows, linear() runs the GEMV kernels: they read each weight row from memory
// once and reuse it from L2 for the further groups of rows, which beats packing for the GEMM.
constexpr int64_t kGemvPreferredMaxRows = 16;

// Picks gemv() or gemm() by the row count.
void linear(const LinearProblem& problem);
// Several linear layers over one input, such as Q, K and V, or gate and up: the problems share
// input, input stride, rows, depth and weight dtype. The input is rounded or packed once, and one
// pass of the threads covers every layer's outputs, so that each small layer does not pay for a
// hand-off of its own. Throws Error when the problems do not share those.
void linear_group(const LinearProblem* problems, int count);
void gemv_group(const LinearProblem* problems, int count);
void gemm_group(const LinearProblem* problems, int count);

// Where linear_gated writes activation(gate) * up: [rows][outputs] at `stride` elements, f32 or
// bf16 (rounded as round_to_bf16_run).
struct GatedProduct {
  GateActivation activation = GateActivation::silu;
  void* output = nullptr;
  DType dtype = DType::f32;
  int64_t stride = 0;
};
// The gate and up layers of a gated MLP (linear_group's conditions, and equal outputs), then
// gated_product_rows over them into `product`: bit for bit what linear_group and
// gated_product_rows give one after the other. The GEMM takes each tile's product while gate and
// up are in L1, instead of in a pass of its own; gate's and up's outputs serve as its scratch
// (what they hold after the call is unspecified). `product.output` may be gate's output.
void linear_gated(const LinearProblem& gate, const LinearProblem& up, const GatedProduct& product);
// activation(gate) * up into `product` for `rows` rows of `columns`, rows split across the
// threads (after a decode step's gate and up).
void write_gated_products(const float* gate, int64_t gate_stride, const float* up,
                          int64_t up_stride, int64_t rows, int64_t columns,
                          const GatedProduct& product);
// Streams the weight once, in blocks of rows that stay in L2 while each group of kGemvMaxRows
// input rows passes over them; weight rows split across threads.
// With AVX512_BF16 and bf16 weights, the input is rounded to bf16 (nearest even) first.
void gemv(const LinearProblem& problem);
// Packs input and weight panels per call and runs a register-blocked micro-kernel; output
// columns split across threads. With AVX512_BF16 and bf16 weights, the input is rounded to bf16.
void gemm(const LinearProblem& problem);

// Whether linear() with this weight dtype rounds its input to bf16 at the active ISA.
bool linear_rounds_input_to_bf16(DType weight_dtype);
// Whether the GEMM of this weight dtype at the active ISA widens weights in blocks to bf16 (its
// micro-kernel multiplies bf16 pairs: bf16 at AVX-512) or to f32.
bool gemm_widens_blocks_to_bf16(DType weight_dtype);

// The kernels linear() picks at the active ISA for this weight dtype, in words (for --trace and
// the bench's records): the GEMM micro-kernel, and the GEMV's way through one and several rows.
std::string gemm_kernel_name(DType weight_dtype);
std::string gemv_kernel_name(DType weight_dtype);

}  // namespace fornace::cpu
