// Block-quantized weights (GGUF's Q4_0 ... Q6_K): row conversion, reference quantizers, and the
// dot-product kernels and matrix products that decode and prefill run on the blocks as stored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/block_type.h"
#include "core/dtype.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm.h"

namespace fornace::cpu {

// The most activation rows one dot_rows call takes.
constexpr int64_t kQuantMaxColumns = 4;


// What a weight type needs from the kernels. Rows hold `n` elements, a multiple of the block.
struct BlockKernels {
  // Widens one row to f32, exactly as the format defines its values.
  void (*dequantize_row)(const void* blocks, float* out, int64_t n) = nullptr;
  // Widens one row to bf16 (the values rounded to nearest even) in registers; null where the ISA
  // has no such kernel (prefill then keeps the 8-bit activation kernels).
  void (*widen_row_bf16)(const void* blocks, uint16_t* out, int64_t n) = nullptr;
  // Widens one row to f32 in registers: dequantize_row's values, bit for bit. Null where the ISA
  // has no such kernel.
  void (*widen_row_f32)(const void* blocks, float* out, int64_t n) = nullptr;
  // Rounds one f32 row into blocks, as llama.cpp's reference quantizer does (for `fornace
  // quantize` and tests); null for types Fornace only reads.
  void (*quantize_row)(const float* in, void* blocks, int64_t n) = nullptr;

  // Activations quantized to 8-bit blocks for integer dot products: the bytes a row of `n`
  // takes, and the conversion. The layout is the kernels' own (not a file format).
  size_t (*activation_row_bytes)(int64_t n) = nullptr;
  void (*quantize_activations)(const float* in, void* out, int64_t n) = nullptr;
  // The values a row of activation blocks stands for (scale times int8), back to f32.
  void (*dequantize_activations)(const void* in, float* out, int64_t n) = nullptr;

  // out[c * out_stride + r] = dot(weight row r, activation row c) for r < rows, c < columns
  // (columns <= kQuantMaxColumns). Weight rows are weight_row_bytes apart, activation rows
  // (from quantize_activations) activation_row_bytes apart.
  void (*dot_rows)(const void* weights, size_t weight_row_bytes, int64_t rows,
                   const void* activations, size_t activation_row_bytes, int64_t columns,
                   int64_t n, float* out, int64_t out_stride) = nullptr;
  // The same with f32 activations (rows `activation_stride` floats apart): the weights are
  // widened in registers and multiplied in f32, with no rounding of the activations.
  void (*dot_rows_f32)(const void* weights, size_t weight_row_bytes, int64_t rows,
                       const float* activations, int64_t activation_stride, int64_t columns,
                       int64_t n, float* out, int64_t out_stride) = nullptr;
};

// The kernels of `type` for `isa` (the active ISA by default). Throws Error for a type without
// kernels (q8_k, or plain floats, which run through cpu/gemm.h).
const BlockKernels& block_kernels(BlockType type, Isa isa);
const BlockKernels& block_kernels(BlockType type);

// Decode's integer dot products run 1.2-1.5x faster on a core (rows in cache) with each quad of
// 4 blocks rearranged so that its fields load whole (the same bytes, the same results;
// InterleavedQuad in cpu/quant_legacy_kernels.h). Whether rows of `columns` of `type` have
// kernels so arranged at `isa`: Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 with AVX-512 VNNI, rows of whole
// quads (a multiple of 128).
bool has_interleaved_kernels(BlockType type, int64_t columns, Isa isa);
// Whether `isa` has interleaved kernels for any format (those above).
bool has_interleaved_kernels(Isa isa);
// Whether the model packs interleaved rows at load: the active ISA has the kernels, and neither
// FORNACE_PACKED_WEIGHTS=0 nor FORNACE_INTERLEAVED_QUADS=0 is set.
bool interleaves_quantized_rows();
// Blocks per interleaved quad: a quad's bytes are its blocks', rearranged.
constexpr int64_t kInterleavedQuadBlocks = 4;
// Rearranges `rows` rows of `columns` (block_row_bytes apart, in and out) into interleaved quads;
// throws Error where has_interleaved_kernels is false at the active ISA.
void interleave_rows(BlockType type, const void* in, void* out, int64_t rows, int64_t columns);
// The kernels of interleaved rows at `isa`: dequantize_row, the widenings, dot_rows and the
// activation functions (those of `type`); no dot_rows_f32 or quantize_row. Throws Error where
// there are none.
const BlockKernels& interleaved_block_kernels(BlockType type, Isa isa);

// output[m][r] = sum_k input[m][k] * W[r][k] + bias[r] for a block-quantized W [outputs, depth].
struct QuantizedLinearProblem {
  // f32 rows; or bf16 rows where the problem runs as the widened BF16 GEMM
  // (quantized_linear_input_dtype), which rounds its input to bf16 anyway.
  const void* input = nullptr;
  DType input_dtype = DType::f32;
  int64_t input_stride = 0;
  int64_t rows = 0;     // M: tokens
  int64_t depth = 0;    // K
  int64_t outputs = 0;  // N
  const void* weight = nullptr;
  BlockType weight_type = BlockType::q8_0;
  size_t weight_row_bytes = 0;
  const float* bias = nullptr;
  float* output = nullptr;
  int64_t output_stride = 0;
  ActivationRounding activation_rounding = ActivationRounding::int8;
  bool interleaved = false;  // weight rows from interleave_rows (int8 input rounding only)
};

// Runs the problem on the global thread pool: the input is quantized once, then weight rows are
// split across threads, each block of rows reused from cache for every group of input rows.
// From kWidenedGemmMinRows rows on (prefill) with a rounded input, it runs instead as the GEMM of
// cpu/gemm.h, which widens the weight rows panel by panel as it packs them
// (quantized_linear_widens).
void quantized_linear(const QuantizedLinearProblem& problem);
// Several quantized layers over one input, such as Q, K and V, or gate and up: the problems share
// input, input stride, rows, depth and input rounding (the block types may differ). The input is
// rounded once per activation format, and one pass of the threads covers every layer's outputs,
// so that each small layer does not pay for a hand-off of its own (prefill's widened GEMM too).
// Throws Error when the problems do not share those.
constexpr int kMaxQuantizedGroupLayers = 8;
void quantized_linear_group(const QuantizedLinearProblem* problems, int count);

// The gate and up layers of a gated MLP (quantized_linear_group's conditions, and equal outputs),
// then activation(gate) * up into `product`, as linear_gated does: in the widened BF16 GEMM, each
// tile's product while gate and up are in L1; in decode, after the group. Gate's and up's outputs
// serve as scratch, and `product.output` may be gate's output.
void quantized_linear_gated(const QuantizedLinearProblem& gate, const QuantizedLinearProblem& up,
                            const GatedProduct& product);

constexpr int64_t kWidenedGemmMinRows = 32;
// Whether quantized_linear runs `problem` as a GEMM of cpu/gemm.h with its weights widened,
// instead of the 8-bit or f32 kernels on the blocks: with 8-bit roundings the GEMM that BF16
// weights take (at the AVX-512 level the BF16 GEMM, weights and input rounded to bf16; at AVX2
// the f32 GEMM, weights and input exact), with ActivationRounding::f32 the f32 GEMM. Every type
// widens at AVX2 and AVX-512 from kWidenedGemmMinRows rows on (the first form: whether the ISA
// and `rows` allow it), but AVX2's Q4_0 with 8-bit roundings, whose integer kernels are faster.
bool quantized_linear_widens(int64_t rows);
bool quantized_linear_widens(const QuantizedLinearProblem& problem);
// The rows that quantized_linear takes for `rows` rows at that rounding: bf16 where they go to
// the BF16 GEMM (which would round f32 rows to bf16 anyway), else f32.
DType quantized_linear_input_dtype(int64_t rows, ActivationRounding rounding);
// How quantized_linear runs at the active ISA, in words (for --trace and the bench's records).
std::string quantized_kernel_name();

}  // namespace fornace::cpu
