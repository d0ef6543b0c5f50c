// The computing ops other than matmul/linear: checks, result allocation and threading around the
// kernels in src/cpu. Inputs of any layout are read row by row (or run by run) as f32 through
// cpu::read_f32, which uses unit-stride f32 data in place and converts everything else.
#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "core/error.h"
#include "cpu/attention.h"
#include "cpu/elementwise.h"
#include "cpu/strided_access.h"
#include "cpu/thread_pool.h"
#include "ops/math.h"
#include "ops/quantized.h"

namespace fornace {
namespace {

// Below this many elements per thread the pool's hand-off costs more than it saves.
constexpr int64_t kMinElementsPerPart = 16384;
// Elementwise ops convert and compute in chunks of this many elements.
constexpr int64_t kChunk = 512;

void require_float(const Tensor& tensor, const char* op, const char* role) {
  if (!tensor.defined()) fail(op, ": ", role, " is undefined");
  if (tensor.device() != Device::cpu) {
    fail(op, ": ", role, " ", tensor.describe(), " is on unsupported device ",
         device_name(tensor.device()));
  }
  if (!is_float(tensor.dtype())) {
    fail(op, ": ", role, " ", tensor.describe(), " must be f32, bf16 or f16");
  }
}

// A per-thread f32 buffer of at least `size` elements; `slot` tells apart buffers in use at once.
float* scratch(int slot, int64_t size) {
  thread_local std::array<std::vector<float>, 4> buffers;
  std::vector<float>& buffer = buffers[slot];
  if (static_cast<int64_t>(buffer.size()) < size) buffer.resize(size);
  return buffer.data();
}

// Runs body(begin, end) over `count` items of `item_size` elements each on the global pool.
template <typename Body>
void parallel_for(int64_t count, int64_t item_size, Body&& body) {
  int64_t grain = std::max<int64_t>(1, kMinElementsPerPart / std::max<int64_t>(1, item_size));
  ThreadPool::global().run(count, grain, body);
}

// A row-wise op over the last dim: body(input_row, output_row, row_index) gets row `row` of
// `input` as f32 and a f32 row to fill, written to `result` (contiguous, `input`'s shape).
template <typename Body>
void map_rows_into(const Tensor& result, const Tensor& input, Body&& body) {
  if (input.numel() == 0) return;
  int64_t length = input.rank() == 0 ? 1 : input.shape().back();
  int64_t stride = input.rank() == 0 ? 1 : input.strides().back();
  int64_t rows = input.numel() / length;
  const void* base = input.storage()->data();
  DType dtype = input.dtype();
  DType out_dtype = result.dtype();
  void* out_base = result.raw();
  // Rows along the second-to-last dim are a stride apart: the layout is walked once per run.
  const int64_t run_rows = input.rank() >= 2 ? input.shape()[input.rank() - 2] : 1;
  const int64_t row_stride = input.rank() >= 2 ? input.strides()[input.rank() - 2] : 0;
  parallel_for(rows, length, [&](int64_t begin, int64_t end) {
    int64_t offset = 0;
    for (int64_t row = begin; row < end; ++row) {
      offset = row == begin || row % run_rows == 0 ? cpu::row_offset(input.layout(), row)
                                                   : offset + row_stride;
      const float* in =
          cpu::read_f32(base, dtype, offset, stride, length, scratch(0, length));
      float* out = out_dtype == DType::f32 ? static_cast<float*>(out_base) + row * length
                                           : scratch(1, length);
      body(in, out, row);
      if (out_dtype != DType::f32) cpu::store_f32(out_base, out_dtype, row * length, out, length);
    }
  });
}

template <typename Body>
Tensor map_rows(const Tensor& input, Body&& body) {
  Tensor result = Tensor::empty(input.shape(), input.dtype());
  map_rows_into(result, input, body);
  return result;
}

// An elementwise op over `inputs` broadcast to `result`'s shape: kernel(input_pointers, out,
// count) gets f32 chunks and fills `result` (contiguous).
template <int N, typename Kernel>
void map_elements_into(const Tensor& result, const std::array<const Tensor*, N>& inputs,
                       Kernel&& kernel) {
  if (result.numel() == 0) return;
  const Dims& shape = result.shape();
  DType dtype = result.dtype();
  std::array<Layout, N + 1> layouts;
  layouts[0] = result.layout();
  for (int i = 0; i < N; ++i) layouts[i + 1] = inputs[i]->layout().broadcast_as(shape);
  std::array<const Layout*, N + 1> layout_pointers;
  for (int i = 0; i <= N; ++i) layout_pointers[i] = &layouts[i];
  cpu::MergedLayouts<N + 1> merged = cpu::merge_layouts<N + 1>(layout_pointers);
  void* out_base = result.storage()->data();
  parallel_for(result.numel(), 1, [&](int64_t begin, int64_t end) {
    cpu::for_each_run(merged, begin, end, [&](const std::array<int64_t, N + 1>& offsets,
                                              int64_t length) {
      for (int64_t done = 0; done < length; done += kChunk) {
        int64_t count = std::min(kChunk, length - done);
        std::array<const float*, N> values;
        for (int i = 0; i < N; ++i) {
          int64_t stride = merged.inner_stride(i + 1);
          values[i] = cpu::read_f32(inputs[i]->storage()->data(), inputs[i]->dtype(),
                                    offsets[i + 1] + done * stride, stride, count,
                                    scratch(i, kChunk));
        }
        int64_t out_offset = offsets[0] + done;
        float* out = dtype == DType::f32 ? static_cast<float*>(out_base) + out_offset
                                         : scratch(N, kChunk);
        kernel(values, out, count);
        if (dtype != DType::f32) cpu::store_f32(out_base, dtype, out_offset, out, count);
      }
    });
  });
}

template <int N, typename Kernel>
Tensor map_elements(const std::array<const Tensor*, N>& inputs, const Dims& shape, DType dtype,
                    Kernel&& kernel) {
  Tensor result = Tensor::empty(shape, dtype);
  map_elements_into<N>(result, inputs, kernel);
  return result;
}

// Checks the operands of a binary op; returns the shape they broadcast to.
Dims binary_shape(const char* op, const Tensor& left, const Tensor& right) {
  require_float(left, op, "left");
  require_float(right, op, "right");
  if (left.dtype() != right.dtype()) {
    fail(op, ": dtypes differ, ", left.describe(), " and ", right.describe());
  }
  return broadcast_shapes(left.shape(), right.shape(), op);
}

void binary_into(const Tensor& result, cpu::BinaryOp kind, const Tensor& left,
                 const Tensor& right) {
  map_elements_into<2>(result, {&left, &right},
                       [kind](const std::array<const float*, 2>& values, float* out,
                              int64_t count) {
                         cpu::binary_run(kind, values[0], values[1], out, count);
                       });
}

Tensor binary(const char* op, cpu::BinaryOp kind, const Tensor& left, const Tensor& right) {
  Dims shape = binary_shape(op, left, right);
  memory::OpScope scope(op);
  Tensor result = Tensor::empty(shape, left.dtype());
  binary_into(result, kind, left, right);
  return result;
}

void check_gated(const Tensor& gate, const Tensor& up, GateActivation activation) {
  const char* op = gated_op_name(activation);
  require_float(gate, op, "gate");
  require_float(up, op, "up");
  if (!(gate.shape() == up.shape()) || gate.dtype() != up.dtype()) {
    fail(op, ": gate ", gate.describe(), " and up ", up.describe(), " differ");
  }
}

void gated_kernel_into(const Tensor& result, const Tensor& gate, const Tensor& up,
                       GateActivation activation) {
  map_elements_into<2>(result, {&gate, &up},
                       [activation](const std::array<const float*, 2>& values, float* out,
                                    int64_t count) {
                         cpu::gated_product_rows(activation, values[0], 0, values[1], 0, 1, count,
                                                 out, false, 0);
                       });
}

}  // namespace

const char* gated_op_name(GateActivation activation) {
  return activation == GateActivation::silu ? "silu_mul" : "gelu_tanh_mul";
}

void require_output(const Tensor& output, const Dims& shape, DType dtype, const char* op) {
  if (!output.defined()) fail(op, ": output is undefined");
  if (!(output.shape() == shape) || output.dtype() != dtype || !output.is_contiguous() ||
      output.storage()->read_only()) {
    fail(op, ": output ", output.describe(), " must be a writable contiguous ", dtype_name(dtype),
         shape.to_string());
  }
}

Tensor add(const Tensor& left, const Tensor& right) {
  return binary("add", cpu::BinaryOp::add, left, right);
}

void add_into(const Tensor& output, const Tensor& left, const Tensor& right) {
  require_output(output, binary_shape("add", left, right), left.dtype(), "add_into");
  memory::OpScope scope("add");
  binary_into(output, cpu::BinaryOp::add, left, right);
}

void gated_activation_into(const Tensor& output, const Tensor& gate, const Tensor& up,
                           GateActivation activation) {
  check_gated(gate, up, activation);
  const char* op = gated_op_name(activation);
  require_float(output, op, "output");
  require_output(output, gate.shape(), output.dtype(), op);
  memory::OpScope scope(op);
  gated_kernel_into(output, gate, up, activation);
}

void soft_cap_into(const Tensor& output, const Tensor& input, double cap) {
  require_float(input, "soft_cap", "input");
  require_output(output, input.shape(), input.dtype(), "soft_cap_into");
  if (!(cap > 0)) fail("soft_cap: the cap must be positive, got ", cap);
  float value = static_cast<float>(cap);
  map_elements_into<1>(output, {&input},
                       [value](const std::array<const float*, 1>& values, float* out,
                               int64_t count) { cpu::soft_cap_run(values[0], value, out, count); });
}

Tensor mul(const Tensor& left, const Tensor& right) {
  return binary("mul", cpu::BinaryOp::mul, left, right);
}

Tensor scale(const Tensor& input, double factor) {
  require_float(input, "scale", "input");
  memory::OpScope scope("scale");
  float value = static_cast<float>(factor);
  return map_elements<1>({&input}, input.shape(), input.dtype(),
                         [value](const std::array<const float*, 1>& values, float* out,
                                 int64_t count) { cpu::scale_run(values[0], value, out, count); });
}

void scale_into(const Tensor& output, const Tensor& input, double factor) {
  require_float(input, "scale", "input");
  require_output(output, input.shape(), input.dtype(), "scale_into");
  float value = static_cast<float>(factor);
  map_elements_into<1>(output, {&input},
                       [value](const std::array<const float*, 1>& values, float* out,
                               int64_t count) { cpu::scale_run(values[0], value, out, count); });
}

Tensor silu(const Tensor& input) {
  require_float(input, "silu", "input");
  memory::OpScope scope("silu");
  return map_elements<1>({&input}, input.shape(), input.dtype(),
                         [](const std::array<const float*, 1>& values, float* out,
                            int64_t count) { cpu::silu_run(values[0], out, count); });
}

Tensor softmax(const Tensor& input) {
  require_float(input, "softmax", "input");
  memory::OpScope scope("softmax");
  int64_t length = input.rank() == 0 ? 1 : input.shape().back();
  return map_rows(input, [length](const float* in, float* out, int64_t) {
    cpu::softmax_row(in, out, length);
  });
}

namespace {

// Checks rms_norm's operands and output; returns the weight as f32 values (the calling thread's
// scratch).
const float* rms_norm_weight(const Tensor& output, const Tensor& input, const Tensor& weight) {
  require_float(input, "rms_norm", "input");
  require_float(weight, "rms_norm", "weight");
  if (input.rank() < 1 || weight.rank() != 1 || weight.dim(0) != input.dim(-1)) {
    fail("rms_norm: weight ", weight.describe(), " does not match the last dim of input ",
         input.describe());
  }
  require_float(output, "rms_norm", "output");
  require_output(output, input.shape(), output.dtype(), "rms_norm");
  return cpu::read_f32(weight.storage()->data(), weight.dtype(), weight.layout().offset,
                       weight.strides()[0], weight.dim(0), scratch(3, weight.dim(0)));
}

}  // namespace

void rms_norm_into(const Tensor& output, const Tensor& input, const Tensor& weight, double eps) {
  const float* weight_values = rms_norm_weight(output, input, weight);
  memory::OpScope scope("rms_norm");
  const int64_t length = input.dim(-1);
  const float epsilon = static_cast<float>(eps);
  map_rows_into(output, input, [=](const float* in, float* out, int64_t) {
    cpu::rms_norm_row(in, weight_values, epsilon, out, length);
  });
}

void add_rms_norm_into(const Tensor& output, const Tensor& hidden, const Tensor& update,
                       const Tensor& weight, double eps) {
  const bool rows_in_place = hidden.dtype() == DType::f32 && update.dtype() == DType::f32 &&
                             hidden.is_contiguous() && update.is_contiguous() &&
                             hidden.shape() == update.shape() && !hidden.storage()->read_only() &&
                             hidden.numel() > 0;
  if (!rows_in_place) {
    add_into(hidden, hidden, update);
    rms_norm_into(output, hidden, weight, eps);
    return;
  }
  const float* weight_values = rms_norm_weight(output, hidden, weight);
  memory::OpScope scope("add_rms_norm");
  const int64_t length = hidden.dim(-1);
  const float epsilon = static_cast<float>(eps);
  float* sums = hidden.data<float>();
  const float* updates = update.data<float>();
  // The rows of `hidden` are read in place (contiguous f32): each becomes its sum first.
  map_rows_into(output, hidden, [=](const float*, float* out, int64_t row) {
    float* sum = sums + row * length;
    cpu::binary_run(cpu::BinaryOp::add, sum, updates + row * length, sum, length);
    cpu::rms_norm_row(sum, weight_values, epsilon, out, length);
  });
}

Tensor rms_norm(const Tensor& input, const Tensor& weight, double eps) {
  memory::OpScope scope("rms_norm");
  Tensor result = Tensor::empty(input.shape(), input.dtype());
  rms_norm_into(result, input, weight, eps);
  return result;
}

void rope_into(const Tensor& output, const Tensor& input, const Tensor& cos, const Tensor& sin) {
  require_float(input, "rope", "input");
  require_float(cos, "rope", "cos");
  require_float(sin, "rope", "sin");
  if (input.rank() < 2 || input.dim(-1) % 2 != 0) {
    fail("rope: input ", input.describe(), " must be [..., S, D] with an even D");
  }
  int64_t length = input.dim(-2);
  int64_t half = input.dim(-1) / 2;
  Dims table_shape{length, half};
  if (!(cos.shape() == table_shape) || !(sin.shape() == table_shape)) {
    fail("rope: cos ", cos.describe(), " and sin ", sin.describe(), " must both be ",
         table_shape.to_string(), " for input ", input.describe());
  }
  // The output may be any float dtype (a bf16 KV cache takes the rotated keys in bf16).
  require_output(output, input.shape(), is_float(output.dtype()) ? output.dtype() : input.dtype(),
                 "rope");
  memory::OpScope scope("rope");
  if (input.numel() == 0) return;
  // The model's tables are contiguous f32 rows, read in place.
  auto in_place = [](const Tensor& table) {
    return table.dtype() == DType::f32 && table.is_contiguous() ? table.data<float>() : nullptr;
  };
  const float* cos_rows = in_place(cos);
  const float* sin_rows = in_place(sin);
  const int64_t width = 2 * half;
  // The model's case: unit-stride f32 rows into a contiguous f32 or bf16 output; each run of
  // rows along dim -2 (a stride apart) goes to the kernel at once.
  const DType out_dtype = output.dtype();
  if (input.dtype() == DType::f32 && input.strides().back() == 1 && cos_rows && sin_rows &&
      output.is_contiguous() && (out_dtype == DType::f32 || out_dtype == DType::bf16)) {
    const auto* base = static_cast<const float*>(input.storage()->data());
    const int64_t row_stride = input.strides()[input.rank() - 2];
    auto* out = static_cast<char*>(output.raw());
    const int64_t row_bytes = width * static_cast<int64_t>(output.element_size());
    parallel_for(input.numel() / width, width, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end;) {
        const int64_t position = row % length;
        const int64_t count = std::min(end - row, length - position);
        cpu::rope_rows(base + cpu::row_offset(input.layout(), row), row_stride,
                       cos_rows + position * half, sin_rows + position * half, half, count, half,
                       out + row * row_bytes, out_dtype == DType::bf16);
        row += count;
      }
    });
    return;
  }
  map_rows_into(output, input, [&, length, half](const float* in, float* out, int64_t row) {
    int64_t position = row % length;
    const float* cos_row = cos_rows ? cos_rows + position * half
                                    : cpu::read_f32(cos.storage()->data(), cos.dtype(),
                                                    cpu::row_offset(cos.layout(), position),
                                                    cos.strides()[1], half, scratch(2, half));
    const float* sin_row = sin_rows ? sin_rows + position * half
                                    : cpu::read_f32(sin.storage()->data(), sin.dtype(),
                                                    cpu::row_offset(sin.layout(), position),
                                                    sin.strides()[1], half, scratch(3, half));
    cpu::rope_rows(in, 0, cos_row, sin_row, 0, 1, half, out, false);
  });
}

Tensor rope(const Tensor& input, const Tensor& cos, const Tensor& sin) {
  memory::OpScope scope("rope");
  Tensor result = Tensor::empty(input.shape(), input.dtype());
  rope_into(result, input, cos, sin);
  return result;
}

Tensor argmax(const Tensor& input) {
  require_float(input, "argmax", "input");
  if (input.rank() < 1 || input.dim(-1) == 0) {
    fail("argmax: input ", input.describe(), " has no last dim to reduce");
  }
  memory::OpScope scope("argmax");
  Dims shape = input.shape();
  shape.erase(shape.size() - 1);
  Tensor result = Tensor::empty(shape, DType::u32);
  int64_t length = input.dim(-1);
  int64_t stride = input.strides().back();
  uint32_t* out = result.data<uint32_t>();
  parallel_for(result.numel(), length, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const float* values =
          cpu::read_f32(input.storage()->data(), input.dtype(),
                        cpu::row_offset(input.layout(), row), stride, length, scratch(0, length));
      out[row] = static_cast<uint32_t>(cpu::argmax_row(values, length));
    }
  });
  return result;
}

void attention_into(const Tensor& output, const Tensor& query, const Tensor& key,
                    const Tensor& value, double scale, bool causal, int64_t window,
                    std::optional<BlockType> kv_blocks) {
  require_float(query, "attention", "query");
  auto shapes = [&] {
    return concat("query ", query.describe(), ", key ", key.describe(), ", value ",
                  value.describe());
  };
  if (query.rank() != 4 || key.rank() != 4 || value.rank() != 4) {
    fail("attention: expected rank-4 [B, H, S, D] tensors, got ", shapes());
  }
  if (kv_blocks) {
    const int64_t words = block_row_words(*kv_blocks, query.dim(3));
    if (key.dtype() != DType::u32 || value.dtype() != DType::u32 || key.dim(3) != words ||
        key.strides()[3] != 1 || value.strides()[3] != 1) {
      fail("attention: ", block_format(*kv_blocks).name,
           " keys and values must be unit-stride u32 rows of ", words, " words, got ", shapes());
    }
  } else {
    require_float(key, "attention", "key");
    require_float(value, "attention", "value");
  }
  if (!(key.shape() == value.shape())) fail("attention: key and value differ, ", shapes());
  int64_t query_heads = query.dim(1);
  int64_t kv_heads = key.dim(1);
  if (query.dim(0) != key.dim(0) || (!kv_blocks && query.dim(3) != key.dim(3))) {
    fail("attention: batch or head_dim differ, ", shapes());
  }
  if (kv_heads == 0 || query_heads % kv_heads != 0) {
    fail("attention: ", query_heads, " query heads are not a multiple of ", kv_heads,
         " kv heads, ", shapes());
  }
  if (key.dim(2) == 0) fail("attention: no key positions, ", shapes());
  if (causal && query.dim(2) > key.dim(2)) {
    fail("attention: causal with more query rows than keys, ", shapes());
  }
  if (window < 0 || (window > 0 && !causal)) {
    fail("attention: a window (", window, ") needs causal attention and must not be negative");
  }
  // The output is contiguous, or the transposed view of a contiguous [B, Sq, Hq, D].
  const bool merged_heads = output.defined() && output.rank() == 4 && !output.is_contiguous();
  Dims dense_shape = query.shape();
  if (merged_heads) std::swap(dense_shape[1], dense_shape[2]);
  require_float(output, "attention", "output");
  require_output(merged_heads ? output.transpose(1, 2) : output, dense_shape, output.dtype(),
                 "attention");
  if (output.numel() == 0) return;
  memory::OpScope scope("attention");
  auto strided = [](const Tensor& tensor, std::optional<BlockType> blocks = {}) {
    return cpu::StridedInput{tensor.storage()->data(), tensor.dtype(), tensor.layout(), blocks};
  };
  cpu::attention(strided(query), strided(key, kv_blocks), strided(value, kv_blocks),
                 cpu::StridedOutput{output.storage()->data(), output.dtype(), output.layout()},
                 static_cast<float>(scale), causal, window);
}

Tensor attention(const Tensor& query, const Tensor& key, const Tensor& value, double scale,
                 bool causal, int64_t window, std::optional<BlockType> kv_blocks) {
  memory::OpScope scope("attention");
  Tensor result = Tensor::empty(query.defined() ? query.shape() : Dims{}, query.dtype());
  attention_into(result, query, key, value, scale, causal, window, kv_blocks);
  return result;
}

}  // namespace fornace
