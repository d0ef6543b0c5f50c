// contiguous, reshape, cat, slice_set, index_select and to_dtype over the CPU copy kernels.
#include "ops/copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "cpu/copy_kernels.h"
#include "cpu/gemm.h"
#include "cpu/thread_pool.h"

namespace fornace {
namespace {

void require_cpu(const Tensor& tensor, const char* op) {
  if (!tensor.defined()) fail(op, ": undefined tensor");
  if (tensor.device() != Device::cpu) fail(op, ": unsupported device ", device_name(tensor.device()));
}

// Copies a contiguous source into `count` blocks: block i of `block_bytes` goes to
// destination + i * destination_pitch. Counted as contiguous bytes.
void copy_blocks(char* destination, int64_t destination_pitch, const char* source,
                 int64_t block_bytes, int64_t count) {
  for (int64_t block = 0; block < count; ++block) {
    std::memcpy(destination + block * destination_pitch, source + block * block_bytes,
                block_bytes);
  }
  memory::record_copy(block_bytes * count, false);
}

}  // namespace

void copy_into(const Tensor& destination, const Tensor& source) {
  require_cpu(destination, "copy_into");
  require_cpu(source, "copy_into");
  if (!(destination.shape() == source.shape())) {
    fail("copy_into: shape mismatch, destination ", destination.describe(), " and source ",
         source.describe());
  }
  if (destination.storage()->read_only()) fail("copy_into: destination is read-only");
  int64_t bytes = source.numel() * static_cast<int64_t>(destination.element_size());
  if (destination.dtype() == source.dtype() && destination.is_contiguous() &&
      source.is_contiguous()) {
    copy_blocks(static_cast<char*>(destination.raw()), 0, static_cast<const char*>(source.raw()),
                bytes, 1);
    return;
  }
  int64_t runs = cpu::strided_to_strided(destination.storage()->data(), destination.dtype(),
                                         destination.layout(), source.storage()->data(),
                                         source.dtype(), source.layout());
  memory::record_copy(bytes, !(destination.is_contiguous() && source.is_contiguous()), runs);
}

Tensor contiguous(const Tensor& input) {
  require_cpu(input, "contiguous");
  if (input.is_contiguous()) return input;
  memory::OpScope scope("contiguous");
  Tensor result = Tensor::empty(input.shape(), input.dtype());
  copy_into(result, input);
  return result;
}

Tensor reshape(const Tensor& input, const Dims& shape, ReshapeViews views) {
  Dims target = infer_shape(shape, input.numel(), input.shape(), "reshape");
  bool view = views == ReshapeViews::only_when_contiguous ? input.is_contiguous()
                                                          : input.layout().reshaped(target).has_value();
  if (view) return input.view(target);
  memory::OpScope scope("reshape");
  return contiguous(input).view(target);
}

Tensor cat(const std::vector<Tensor>& inputs, int64_t dim) {
  if (inputs.empty()) fail("cat: no inputs");
  const Tensor& first = inputs[0];
  require_cpu(first, "cat");
  int axis = normalize_dim(dim, first.rank(), "cat");
  Dims shape = first.shape();
  shape[axis] = 0;
  for (const Tensor& input : inputs) {
    require_cpu(input, "cat");
    bool compatible = input.rank() == first.rank() && input.dtype() == first.dtype();
    for (int i = 0; compatible && i < first.rank(); ++i) {
      compatible = i == axis || input.shape()[i] == first.shape()[i];
    }
    if (!compatible) {
      fail("cat: along dim ", dim, ", ", first.describe(), " and ", input.describe(),
           " do not match");
    }
    shape[axis] += input.shape()[axis];
  }
  memory::OpScope scope("cat");

  bool all_contiguous = true;
  for (const Tensor& input : inputs) all_contiguous = all_contiguous && input.is_contiguous();
  if (all_contiguous) {
    // One block per outer index from each input.
    Tensor result = Tensor::empty(shape, first.dtype());
    int64_t outer = 1;
    for (int i = 0; i < axis; ++i) outer *= shape[i];
    int64_t inner = 1;
    for (int i = axis + 1; i < first.rank(); ++i) inner *= shape[i];
    int64_t element = static_cast<int64_t>(first.element_size());
    int64_t pitch = shape[axis] * inner * element;
    auto* out = static_cast<char*>(result.raw());
    int64_t position = 0;
    for (const Tensor& input : inputs) {
      int64_t block = input.shape()[axis] * inner * element;
      copy_blocks(out + position * inner * element, pitch, static_cast<const char*>(input.raw()),
                  block, outer);
      position += input.shape()[axis];
    }
    return result;
  }
  if (axis != 0) {
    // Candle's path for strided inputs: move `dim` to the front, join along dim 0, move it
    // back. The result keeps the transposed layout.
    std::vector<Tensor> transposed;
    transposed.reserve(inputs.size());
    for (const Tensor& input : inputs) transposed.push_back(input.transpose(0, axis));
    return cat(transposed, 0).transpose(0, axis);
  }
  // Along dim 0 every input lands in one contiguous region of the result.
  Tensor result = Tensor::empty(shape, first.dtype());
  int64_t position = 0;
  for (const Tensor& input : inputs) {
    copy_into(result.narrow(0, position, input.shape()[0]), input);
    position += input.shape()[0];
  }
  return result;
}

void slice_set(const Tensor& destination, const Tensor& source, int64_t dim, int64_t offset) {
  require_cpu(destination, "slice_set");
  require_cpu(source, "slice_set");
  if (!source.is_contiguous()) {
    fail("slice_set: source ", source.describe(), " must be contiguous; call contiguous() first");
  }
  if (!destination.is_contiguous()) {
    fail("slice_set: destination ", destination.describe(), " must be contiguous");
  }
  if (destination.dtype() != source.dtype() || destination.rank() != source.rank()) {
    fail("slice_set: source ", source.describe(), " does not match destination ",
         destination.describe());
  }
  int axis = normalize_dim(dim, destination.rank(), "slice_set");
  for (int i = 0; i < destination.rank(); ++i) {
    if (i != axis && destination.shape()[i] != source.shape()[i]) {
      fail("slice_set: source ", source.describe(), " does not match destination ",
           destination.describe(), " outside dim ", dim);
    }
  }
  if (offset < 0 || offset + source.shape()[axis] > destination.shape()[axis]) {
    fail("slice_set: rows [", offset, ", ", offset + source.shape()[axis], ") out of range for dim ",
         dim, " of ", destination.describe());
  }
  if (destination.storage()->read_only()) fail("slice_set: destination is read-only");
  int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= destination.shape()[i];
  int64_t inner = 1;
  for (int i = axis + 1; i < destination.rank(); ++i) inner *= destination.shape()[i];
  int64_t element = static_cast<int64_t>(destination.element_size());
  copy_blocks(static_cast<char*>(destination.raw()) + offset * inner * element,
              destination.shape()[axis] * inner * element, static_cast<const char*>(source.raw()),
              source.shape()[axis] * inner * element, outer);
}

namespace {

// Checks index_select's operands; returns the result shape.
Dims index_select_shape(const Tensor& table, const Tensor& ids) {
  require_cpu(table, "index_select");
  require_cpu(ids, "index_select");
  if (ids.dtype() != DType::u32 && ids.dtype() != DType::i32) {
    fail("index_select: ids must be u32 or i32, got ", ids.describe());
  }
  if (table.rank() < 1) fail("index_select: table ", table.describe(), " has no rows");
  Dims shape = ids.shape();
  for (int i = 1; i < table.rank(); ++i) shape.push_back(table.shape()[i]);
  return shape;
}

// The row of `table` that each of `ids` picks; throws on an id out of range.
std::vector<int64_t> checked_row_ids(const Tensor& table, const Tensor& ids) {
  Tensor id_values = contiguous(ids);
  const int64_t rows = table.shape()[0];
  std::vector<int64_t> row_ids(static_cast<size_t>(id_values.numel()));
  for (int64_t i = 0; i < id_values.numel(); ++i) {
    int64_t id = ids.dtype() == DType::u32 ? static_cast<int64_t>(id_values.data<uint32_t>()[i])
                                           : static_cast<int64_t>(id_values.data<int32_t>()[i]);
    if (id < 0 || id >= rows) {
      fail("index_select: id ", id, " out of range for ", rows, " rows of ", table.describe());
    }
    row_ids[i] = id;
  }
  return row_ids;
}

// Ids gathered per part of the pool's work: a prompt's rows split across the threads.
constexpr int64_t kRowsPerPart = 16;

// Writes the rows of `table` picked by `ids` into `output`, converted to its dtype, split across
// the pool's threads (a packed row is one word in each of its k pairs' lines, so a prompt's rows
// wait on memory); row(id) gives a row's `table.dtype()` values.
template <typename Row>
void select_rows(const Tensor& output, const Tensor& table, const Tensor& ids, Row&& row) {
  const std::vector<int64_t> row_ids = checked_row_ids(table, ids);
  const auto count = static_cast<int64_t>(row_ids.size());
  int64_t row_length = table.numel() / std::max<int64_t>(table.shape()[0], 1);
  int64_t out_row_bytes = row_length * static_cast<int64_t>(output.element_size());
  auto* out = static_cast<char*>(output.raw());
  ThreadPool::global().run(count, kRowsPerPart, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      cpu::convert(out + i * out_row_bytes, output.dtype(), row(row_ids[i]), table.dtype(),
                   row_length);
    }
  });
  memory::record_copy(out_row_bytes * count, false);
}

void select_rows(const Tensor& output, const Tensor& table, const Tensor& ids) {
  Tensor rows_table = contiguous(table);
  const auto* source = static_cast<const char*>(rows_table.raw());
  const int64_t row_bytes = table.dim(0) == 0 ? 0 : table.numel() / table.dim(0) *
                                                        static_cast<int64_t>(table.element_size());
  select_rows(output, table, ids, [&](int64_t id) { return source + id * row_bytes; });
}

void require_output(const Tensor& output, const Dims& shape, const char* op) {
  if (!output.defined() || !(output.shape() == shape) || !output.is_contiguous()) {
    fail(op, ": output ", output.describe(), " must be a contiguous ", shape.to_string());
  }
}

}  // namespace

Tensor index_select(const Tensor& table, const Tensor& ids) {
  Dims shape = index_select_shape(table, ids);
  memory::OpScope scope("index_select");
  Tensor result = Tensor::empty(shape, table.dtype());
  select_rows(result, table, ids);
  return result;
}

void index_select_into(const Tensor& output, const Tensor& table, const Tensor& ids) {
  require_output(output, index_select_shape(table, ids), "index_select_into");
  memory::OpScope scope("index_select");
  select_rows(output, table, ids);
}

void index_select_packed_into(const Tensor& output, const Tensor& table, const Storage& packed,
                              const Tensor& ids) {
  require_output(output, index_select_shape(table, ids), "index_select_packed_into");
  if (table.dtype() != DType::bf16 || table.rank() != 2 ||
      packed.bytes() < static_cast<size_t>(cpu::packed_bf16_bytes(table.dim(0), table.dim(1)))) {
    fail("index_select_packed_into: ", table.describe(), " is not a bf16 matrix packed in ",
         packed.bytes(), " bytes");
  }
  memory::OpScope scope("index_select");
  select_rows(output, table, ids, [&](int64_t id) {
    thread_local std::vector<uint16_t> row;
    row.resize(static_cast<size_t>(table.dim(1)));
    cpu::unpack_bf16_row(packed.data(), table.dim(1), id, row.data());
    return row.data();
  });
}

Tensor to_dtype(const Tensor& input, DType dtype) {
  require_cpu(input, "to_dtype");
  if (input.dtype() == dtype) return contiguous(input);
  memory::OpScope scope("to_dtype");
  Tensor result = Tensor::empty(input.shape(), dtype);
  int64_t runs = 1;
  if (input.is_contiguous()) {
    cpu::convert(result.raw(), dtype, input.raw(), input.dtype(), input.numel());
  } else {
    runs = cpu::strided_to_contiguous(result.raw(), dtype, input.storage()->data(), input.dtype(),
                                      input.layout());
  }
  // Counted like every other copy: the bytes written, strided when the source was.
  memory::record_copy(result.numel() * static_cast<int64_t>(result.element_size()),
                      !input.is_contiguous(), runs);
  return result;
}

}  // namespace fornace
