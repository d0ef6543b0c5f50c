// matmul and linear over the CPU GEMV/GEMM kernels (cpu/gemm.h).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <new>
#include <memory>

#include "core/error.h"
#include "core/memory.h"
#include "core/storage.h"
#include "cpu/copy_kernels.h"
#include "cpu/elementwise.h"
#include "cpu/gemm.h"
#include "cpu/thread_pool.h"
#include "ops/copy.h"
#include "ops/math.h"

namespace fornace {
namespace {

void require_float_cpu(const Tensor& tensor, const char* op, const char* role) {
  if (!tensor.defined()) fail(op, ": ", role, " is undefined");
  if (tensor.device() != Device::cpu) {
    fail(op, ": ", role, " ", tensor.describe(), " is on unsupported device ",
         device_name(tensor.device()));
  }
  if (tensor.dtype() != DType::f32 && tensor.dtype() != DType::bf16 &&
      tensor.dtype() != DType::f16) {
    fail(op, ": ", role, " ", tensor.describe(), " must be f32, bf16 or f16");
  }
}

// A contiguous f32 copy, or the tensor itself when it already is one.
Tensor contiguous_f32(const Tensor& tensor) {
  return tensor.dtype() == DType::f32 ? contiguous(tensor) : to_dtype(tensor, DType::f32);
}

// The input rows as the kernels take them for weights of `weight_dtype`: contiguous, in
// linear_input_dtype where the input is bf16, else f32.
Tensor kernel_input(const Tensor& input, DType weight_dtype) {
  if (input.dtype() == DType::bf16 && linear_input_dtype(weight_dtype) == DType::bf16) {
    return contiguous(input);
  }
  return contiguous_f32(input);
}

// The most layers one linear_group_into call takes.
constexpr size_t kMaxGroupLayers = 8;

// The bias as f32: the tensor's own data when it is contiguous f32, else a conversion into a
// grow-only buffer of the calling thread (one per layer of a group, `slot`), so a decode step
// does not allocate for it.
const float* bias_as_f32(const Tensor& bias, size_t slot = 0) {
  if (bias.dtype() == DType::f32 && bias.is_contiguous()) return bias.data<float>();
  thread_local std::array<std::shared_ptr<Storage>, kMaxGroupLayers> buffers;
  std::shared_ptr<Storage>& buffer = buffers[slot];
  const size_t bytes = static_cast<size_t>(bias.numel()) * sizeof(float);
  if (!buffer || buffer->bytes() < bytes) buffer = Storage::allocate(bytes);
  float* values = static_cast<float*>(buffer->data());
  if (bias.is_contiguous()) {
    cpu::convert(values, DType::f32, bias.raw(), bias.dtype(), bias.numel());
  } else {
    cpu::strided_to_contiguous(values, DType::f32, bias.storage()->data(), bias.dtype(),
                               bias.layout());
  }
  return values;
}

}  // namespace

namespace {

// Checks linear's operands; returns the output shape.
Dims linear_output_shape(const Tensor& input, const Tensor& weight,
                         const std::optional<Tensor>& bias) {
  require_float_cpu(input, "linear", "input");
  require_float_cpu(weight, "linear", "weight");
  if (input.rank() < 1 || weight.rank() != 2 || input.dim(-1) != weight.dim(1)) {
    fail("linear: input ", input.describe(), " does not match weight ", weight.describe(),
         " (expected input [..., K] and weight [N, K])");
  }
  if (bias) {
    require_float_cpu(*bias, "linear", "bias");
    if (bias->rank() != 1 || bias->dim(0) != weight.dim(0)) {
      fail("linear: bias ", bias->describe(), " does not match weight ", weight.describe(),
           " and input ", input.describe(), " (expected bias [N])");
    }
  }
  Dims output_shape = input.shape();
  output_shape[output_shape.size() - 1] = weight.dim(0);
  return output_shape;
}

// The kernels' view of one layer over the contiguous `rows` of the input (kernel_input), into a
// contiguous f32 `output`; `weight` must be contiguous.
cpu::LinearProblem linear_problem(float* output, const Tensor& rows, const Tensor& weight,
                                  const std::optional<Tensor>& bias, size_t slot,
                                  const Storage* packed) {
  const int64_t depth = weight.dim(1);
  cpu::LinearProblem problem;
  problem.input = rows.raw();
  problem.input_dtype = rows.dtype();
  problem.input_stride = depth;
  problem.rows = 1;
  for (int dim = 0; dim + 1 < rows.rank(); ++dim) problem.rows *= rows.shape()[dim];
  problem.depth = depth;
  problem.outputs = weight.dim(0);
  problem.weight = weight.raw();
  problem.weight_dtype = weight.dtype();
  problem.weight_stride = depth;
  problem.bias = bias ? bias_as_f32(*bias, slot) : nullptr;
  problem.output = output;
  problem.output_stride = problem.outputs;
  problem.packed_weight = packed ? packed->data() : nullptr;
  return problem;
}

// Runs the kernels into a contiguous f32 `output`.
void linear_f32(float* output, const Tensor& input, const Tensor& weight,
                const std::optional<Tensor>& bias, const Storage* packed) {
  Tensor rows = kernel_input(input, weight.dtype());
  // Weights are mmapped and contiguous in the model; any other layout is copied once here.
  Tensor contiguous_weight = packed ? weight : contiguous(weight);
  cpu::linear(linear_problem(output, rows, contiguous_weight, bias, 0, packed));
}

}  // namespace

DType linear_input_dtype(DType weight_dtype) {
  return cpu::linear_rounds_input_to_bf16(weight_dtype) ? DType::bf16 : DType::f32;
}

Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              const Storage* packed) {
  Dims output_shape = linear_output_shape(input, weight, bias);
  memory::OpScope scope("linear");
  Tensor output = Tensor::empty(output_shape, DType::f32);
  linear_f32(output.data<float>(), input, weight, bias, packed);
  return input.dtype() == DType::f32 ? output : to_dtype(output, input.dtype());
}

void linear_into(const Tensor& output, const Tensor& input, const Tensor& weight,
                 const std::optional<Tensor>& bias, const Storage* packed) {
  Dims output_shape = linear_output_shape(input, weight, bias);
  if (input.dtype() != DType::f32 && input.dtype() != DType::bf16) {
    fail("linear_into: input ", input.describe(), " must be f32 or bf16");
  }
  require_output(output, output_shape, DType::f32, "linear_into");
  memory::OpScope scope("linear");
  linear_f32(output.data<float>(), input, weight, bias, packed);
}

namespace {

// The kernels' problems of linear_group_into's layers (checked; named `op` in errors); `rows`
// and `weights` hold what the problems point to.
struct GroupProblems {
  Tensor rows;
  std::array<Tensor, kMaxGroupLayers> weights;
  std::array<cpu::LinearProblem, kMaxGroupLayers> problems;
};

void prepare_group(const char* op, const Tensor& input, std::span<const LinearLayerInto> layers,
                   GroupProblems& group) {
  if (layers.size() > kMaxGroupLayers) {
    fail(op, ": ", layers.size(), " layers, at most ", kMaxGroupLayers);
  }
  if (input.dtype() != DType::f32 && input.dtype() != DType::bf16) {
    fail(op, ": input ", input.describe(), " must be f32 or bf16");
  }
  group.rows = kernel_input(input, layers[0].weight->dtype());
  for (size_t index = 0; index < layers.size(); ++index) {
    const LinearLayerInto& layer = layers[index];
    const Dims output_shape = linear_output_shape(input, *layer.weight, *layer.bias);
    require_output(*layer.output, output_shape, DType::f32, op);
    if (layer.weight->dtype() != layers[0].weight->dtype()) {
      fail(op, ": weight ", layer.weight->describe(), " and weight ", layers[0].weight->describe(),
           " differ in dtype");
    }
    group.weights[index] = layer.packed ? *layer.weight : contiguous(*layer.weight);
    group.problems[index] = linear_problem(layer.output->data<float>(), group.rows,
                                           group.weights[index], *layer.bias, index, layer.packed);
  }
}

}  // namespace

void linear_group_into(const Tensor& input, std::span<const LinearLayerInto> layers) {
  if (layers.empty()) return;
  memory::OpScope scope("linear");
  GroupProblems group;
  prepare_group("linear_group_into", input, layers, group);
  cpu::linear_group(group.problems.data(), static_cast<int>(layers.size()));
}

void linear_gated_into(const Tensor& output, const Tensor& input, const LinearLayerInto& gate,
                       const LinearLayerInto& up, GateActivation activation) {
  const LinearLayerInto layers[2] = {gate, up};
  memory::OpScope scope("linear");
  GroupProblems group;
  prepare_group("linear_gated_into", input, layers, group);
  cpu::linear_gated(group.problems[0], group.problems[1],
                    gated_product_into(output, *gate.output, *up.output, activation,
                                       "linear_gated_into"));
}

cpu::GatedProduct gated_product_into(const Tensor& output, const Tensor& gate_output,
                                     const Tensor& up_output, GateActivation activation,
                                     const char* op) {
  if (!(gate_output.shape() == up_output.shape())) {
    fail(op, ": gate ", gate_output.describe(), " and up ", up_output.describe(),
         " differ in shape");
  }
  if (output.dtype() != DType::f32 && output.dtype() != DType::bf16) {
    fail(op, ": output ", output.describe(), " must be f32 or bf16");
  }
  require_output(output, gate_output.shape(), output.dtype(), op);
  cpu::GatedProduct product;
  product.activation = activation;
  product.output = output.raw();
  product.dtype = output.dtype();
  product.stride = gate_output.dim(-1);
  return product;
}

Tensor matmul(const Tensor& left, const Tensor& right) {
  require_float_cpu(left, "matmul", "left");
  require_float_cpu(right, "matmul", "right");
  if (left.dtype() != right.dtype() && left.dtype() != DType::f32) {
    fail("matmul: dtypes differ, left ", left.describe(), " and right ", right.describe(),
         " (only an f32 left takes a right of another float dtype)");
  }
  if (left.rank() < 2 || right.rank() < 2) {
    fail("matmul: left ", left.describe(), " and right ", right.describe(),
         " must both have at least 2 dims");
  }
  if (left.dim(-1) != right.dim(-2)) {
    fail("matmul: inner dims differ, left ", left.describe(), " and right ", right.describe());
  }
  const int64_t rows = left.dim(-2);
  const int64_t depth = left.dim(-1);
  const int64_t outputs = right.dim(-1);

  // Batch dims broadcast NumPy-style, aligned from the right.
  const int left_batch_rank = left.rank() - 2;
  const int right_batch_rank = right.rank() - 2;
  const int batch_rank = std::max(left_batch_rank, right_batch_rank);
  Dims batch_shape;
  for (int dim = 0; dim < batch_rank; ++dim) {
    int left_dim = dim - (batch_rank - left_batch_rank);
    int right_dim = dim - (batch_rank - right_batch_rank);
    int64_t left_extent = left_dim >= 0 ? left.shape()[left_dim] : 1;
    int64_t right_extent = right_dim >= 0 ? right.shape()[right_dim] : 1;
    if (left_extent != right_extent && left_extent != 1 && right_extent != 1) {
      fail("matmul: batch dims do not broadcast, left ", left.describe(), " and right ",
           right.describe());
    }
    batch_shape.push_back(std::max(left_extent, right_extent));
  }
  memory::OpScope scope("matmul");

  // The left operand is copied to contiguous f32 when it is not already. The right one is read
  // in place when its layout allows: as the weight rows of the linear kernels when its last two
  // dims transposed are contiguous ([..., N, K], such as K in q · kᵀ), or row by row for a few
  // left rows when it is contiguous ([..., K, N], such as V in p · v). Otherwise it is packed
  // once, transposed, to contiguous f32.
  Tensor left_rows = contiguous_f32(left);
  Tensor right_columns = right.transpose(-1, -2);
  const bool right_rows_in_place = !right_columns.is_contiguous() && rows <= cpu::kGemvMaxRows &&
                                   right.is_contiguous() &&
                                   (right.dtype() == DType::f32 || right.dtype() == DType::bf16);
  if (!right_columns.is_contiguous() && !right_rows_in_place) {
    right_columns = contiguous_f32(right_columns);
  }
  const Tensor& right_in_place = right_rows_in_place ? right : right_columns;

  Dims output_shape = batch_shape;
  output_shape.push_back(rows);
  output_shape.push_back(outputs);
  Tensor output = Tensor::empty(output_shape, DType::f32);
  const int64_t batches = batch_shape.product();

  // Element offsets of batch `index` in each operand, with broadcast dims held at 0.
  auto batch_offsets = [&](int64_t index, int64_t& left_offset, int64_t& right_offset) {
    left_offset = 0;
    right_offset = 0;
    int64_t left_pitch = rows * depth;
    int64_t right_pitch = depth * outputs;
    for (int dim = batch_rank - 1; dim >= 0; --dim) {
      int64_t position = index % batch_shape[dim];
      index /= batch_shape[dim];
      int left_dim = dim - (batch_rank - left_batch_rank);
      int right_dim = dim - (batch_rank - right_batch_rank);
      if (left_dim >= 0) {
        if (left.shape()[left_dim] != 1) left_offset += position * left_pitch;
        left_pitch *= left.shape()[left_dim];
      }
      if (right_dim >= 0) {
        if (right.shape()[right_dim] != 1) right_offset += position * right_pitch;
        right_pitch *= right.shape()[right_dim];
      }
    }
  };
  const size_t right_element = right_in_place.element_size();
  const char* right_base = static_cast<const char*>(right_in_place.raw());

  if (right_rows_in_place) {
    // Each output row is the left row's weighted sum of the right operand's rows.
    const bool bf16 = right.dtype() == DType::bf16;
    ThreadPool::global().run(batches * rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        int64_t left_offset = 0;
        int64_t right_offset = 0;
        batch_offsets(task / rows, left_offset, right_offset);
        int64_t row = task % rows;
        cpu::weighted_row_sum(left_rows.data<float>() + left_offset + row * depth,
                              right_base + right_offset * right_element, bf16, outputs, depth,
                              outputs, output.data<float>() + task * outputs);
      }
    });
    return left.dtype() == DType::f32 ? output : to_dtype(output, left.dtype());
  }

  // When the right operand has one batch and the left has all of them, fold the batches into rows.
  const bool fold_batches =
      right_columns.numel() == depth * outputs && left_rows.numel() == batches * rows * depth;
  const int64_t calls = fold_batches ? 1 : batches;
  for (int64_t call = 0; call < calls; ++call) {
    int64_t left_offset = 0;
    int64_t right_offset = 0;
    if (!fold_batches) batch_offsets(call, left_offset, right_offset);
    cpu::LinearProblem problem;
    problem.input = left_rows.data<float>() + left_offset;
    problem.input_stride = depth;
    problem.rows = fold_batches ? batches * rows : rows;
    problem.depth = depth;
    problem.outputs = outputs;
    problem.weight = right_base + right_offset * right_element;
    problem.weight_dtype = right_columns.dtype();
    problem.weight_stride = depth;
    problem.output = output.data<float>() + call * rows * outputs;
    problem.output_stride = outputs;
    cpu::linear(problem);
  }
  return left.dtype() == DType::f32 ? output : to_dtype(output, left.dtype());
}

}  // namespace fornace
