// Block-quantized linear layers, embedding rows and widening, on the block kernels.
#include "ops/quantized.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/memory.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "ops/copy.h"
#include "ops/math.h"

namespace fornace {
namespace {

const cpu::BlockKernels& matrix_kernels(const QuantizedMatrix& matrix) {
  return matrix.interleaved ? cpu::interleaved_block_kernels(matrix.type, cpu::active_isa())
                            : cpu::block_kernels(matrix.type);
}

void dequantize_row(const QuantizedMatrix& matrix, int64_t row, float* out) {
  matrix_kernels(matrix).dequantize_row(matrix.row(row), out, matrix.columns);
}

}  // namespace

void quantized_linear_into(const Tensor& output, const Tensor& input, const QuantizedMatrix& weight,
                           const std::optional<Tensor>& bias,
                           ActivationRounding activation_rounding) {
  const QuantizedLayerInto layer{&output, &weight, &bias};
  quantized_linear_group_into(input, std::span<const QuantizedLayerInto>(&layer, 1),
                              activation_rounding);
}

DType quantized_linear_input_dtype(int64_t rows, ActivationRounding activation_rounding) {
  return cpu::quantized_linear_input_dtype(rows, activation_rounding);
}

namespace {

// The kernels' problems of quantized layers over `input` (checked; named `op` in errors); `rows`
// holds the input they point to: contiguous, and f32 unless every layer takes bf16 as it is.
struct QuantizedProblems {
  Tensor rows;
  std::array<cpu::QuantizedLinearProblem, cpu::kMaxQuantizedGroupLayers> problems;
};

void prepare_quantized(const char* op, const Tensor& input,
                       std::span<const QuantizedLayerInto> layers,
                       ActivationRounding activation_rounding, QuantizedProblems& prepared) {
  if (layers.empty() || layers.size() > static_cast<size_t>(cpu::kMaxQuantizedGroupLayers)) {
    fail(op, ": ", layers.size(), " layers, not 1 to ", cpu::kMaxQuantizedGroupLayers);
  }
  for (const QuantizedLayerInto& layer : layers) {
    const QuantizedMatrix& weight = *layer.weight;
    const std::optional<Tensor>& bias = *layer.bias;
    if ((input.dtype() != DType::f32 && input.dtype() != DType::bf16) || input.rank() < 1 ||
        input.dim(-1) != weight.columns) {
      fail(op, ": input ", input.describe(), " must be f32 or bf16 [..., ", weight.columns,
           "] for ", block_format(weight.type).name, " weight [", weight.rows, ", ",
           weight.columns, "]");
    }
    if (bias && (bias->dtype() != DType::f32 || bias->rank() != 1 ||
                 bias->dim(0) != weight.rows || !bias->is_contiguous())) {
      fail(op, ": bias ", bias->describe(), " must be contiguous f32 [", weight.rows, "]");
    }
    Dims output_shape = input.shape();
    output_shape[output_shape.size() - 1] = weight.rows;
    require_output(*layer.output, output_shape, DType::f32, op);
  }
  const int64_t depth = layers[0].weight->columns;
  const int64_t rows = input.numel() / std::max<int64_t>(1, depth);
  for (size_t index = 0; index < layers.size(); ++index) {
    const QuantizedMatrix& weight = *layers[index].weight;
    const std::optional<Tensor>& bias = *layers[index].bias;
    cpu::QuantizedLinearProblem& problem = prepared.problems[index];
    problem.input_stride = weight.columns;
    problem.rows = rows;
    problem.depth = weight.columns;
    problem.outputs = weight.rows;
    problem.weight = weight.data;
    problem.weight_type = weight.type;
    problem.weight_row_bytes = weight.row_bytes;
    problem.bias = bias ? bias->data<float>() : nullptr;
    problem.output = layers[index].output->data<float>();
    problem.output_stride = weight.rows;
    problem.activation_rounding = activation_rounding;
    problem.interleaved = weight.interleaved;
  }
  // bf16 rows go as they are to the widened bf16 GEMM, which would round f32 rows to bf16 anyway.
  const bool bf16_in_place =
      input.dtype() == DType::bf16 &&
      cpu::quantized_linear_input_dtype(rows, activation_rounding) == DType::bf16 &&
      std::all_of(prepared.problems.begin(), prepared.problems.begin() + layers.size(),
                  [](const cpu::QuantizedLinearProblem& problem) {
                    return cpu::quantized_linear_widens(problem);
                  });
  prepared.rows = contiguous(bf16_in_place ? input : to_dtype(input, DType::f32));
  for (size_t index = 0; index < layers.size(); ++index) {
    prepared.problems[index].input = prepared.rows.raw();
    prepared.problems[index].input_dtype = prepared.rows.dtype();
  }
}

}  // namespace

void quantized_linear_group_into(const Tensor& input, std::span<const QuantizedLayerInto> layers,
                                 ActivationRounding activation_rounding) {
  memory::OpScope scope("linear");
  QuantizedProblems prepared;
  prepare_quantized("quantized_linear_into", input, layers, activation_rounding, prepared);
  cpu::quantized_linear_group(prepared.problems.data(), static_cast<int>(layers.size()));
}

void quantized_linear_gated_into(const Tensor& output, const Tensor& input,
                                 const QuantizedLayerInto& gate, const QuantizedLayerInto& up,
                                 ActivationRounding activation_rounding,
                                 GateActivation activation) {
  const QuantizedLayerInto layers[2] = {gate, up};
  memory::OpScope scope("linear");
  QuantizedProblems prepared;
  prepare_quantized("quantized_linear_gated_into", input, layers, activation_rounding, prepared);
  cpu::quantized_linear_gated(prepared.problems[0], prepared.problems[1],
                              gated_product_into(output, *gate.output, *up.output, activation,
                                                 "quantized_linear_gated_into"));
}

void quantized_rows_into(const Tensor& output, const QuantizedMatrix& table, const Tensor& ids) {
  if (ids.dtype() != DType::u32 || ids.rank() != 2) {
    fail("quantized_rows_into: ids ", ids.describe(), " must be u32 [B, S]");
  }
  require_output(output, {ids.dim(0), ids.dim(1), table.columns}, DType::f32,
                 "quantized_rows_into");
  memory::OpScope scope("index_select");
  Tensor flat_ids = contiguous(ids);
  const uint32_t* id_data = flat_ids.data<uint32_t>();
  float* out = output.data<float>();
  for (int64_t index = 0; index < flat_ids.numel(); ++index) {
    if (id_data[index] >= static_cast<uint64_t>(table.rows)) {
      fail("quantized_rows_into: id ", id_data[index], " is past the table's ", table.rows,
           " rows");
    }
    dequantize_row(table, id_data[index], out + index * table.columns);
  }
}

Tensor dequantize(const QuantizedMatrix& matrix, DType dtype) {
  memory::OpScope scope("dequantize");
  Tensor widened = Tensor::empty({matrix.rows, matrix.columns}, DType::f32);
  float* out = widened.data<float>();
  ThreadPool::global().run(matrix.rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) dequantize_row(matrix, row, out + row * matrix.columns);
  });
  return dtype == DType::f32 ? widened : to_dtype(widened, dtype);
}

int64_t block_row_words(BlockType type, int64_t elements) {
  if (type != BlockType::q8_0 && type != BlockType::q4_0) {
    fail("rows of ", block_format(type).name, " blocks: only Q8_0 and Q4_0 rows are supported");
  }
  if (elements % block_format(type).block_elements != 0) {
    fail("rows of ", block_format(type).name, " blocks need a multiple of 32 values, got ",
         elements);
  }
  const auto bytes = static_cast<int64_t>(block_row_bytes(type, elements));
  return (bytes + 3) / 4;
}

Tensor quantize_rows(const Tensor& rows, BlockType type) {
  memory::OpScope scope("quantize_rows");
  const int64_t elements = rows.dim(rows.rank() - 1);
  const int64_t words = block_row_words(type, elements);
  if (rows.rank() == 0) fail("quantize_rows: expected rows, got ", rows.describe());
  Tensor values = to_dtype(rows, DType::f32);
  Dims shape = rows.shape();
  shape[shape.size() - 1] = words;
  Tensor blocks = Tensor::empty(shape, DType::u32);
  const int64_t count = elements == 0 ? 0 : values.numel() / elements;
  const auto quantize_row = cpu::block_kernels(type).quantize_row;
  const float* in = values.data<float>();
  uint32_t* out = blocks.data<uint32_t>();
  for (int64_t row = 0; row < count; ++row) {
    out[(row + 1) * words - 1] = 0;  // The padding of the last word, if any.
    quantize_row(in + row * elements, out + row * words, elements);
  }
  return blocks;
}

Tensor dequantize_rows(const Tensor& blocks, BlockType type, int64_t elements) {
  const int64_t words = block_row_words(type, elements);
  if (blocks.dtype() != DType::u32 || blocks.rank() == 0 ||
      blocks.dim(blocks.rank() - 1) != words) {
    fail("dequantize_rows: expected u32 rows of ", words, " words, got ", blocks.describe());
  }
  Tensor packed = contiguous(blocks);
  Dims shape = blocks.shape();
  shape[shape.size() - 1] = elements;
  Tensor values = Tensor::empty(shape, DType::f32);
  const int64_t count = packed.numel() / words;
  const auto dequantize_row = cpu::block_kernels(type).dequantize_row;
  for (int64_t row = 0; row < count; ++row) {
    dequantize_row(packed.data<uint32_t>() + row * words, values.data<float>() + row * elements,
                   elements);
  }
  return values;
}

}  // namespace fornace
