// Decode buffers made at load, and the per-pass buffers of prompt passes.
#include "nn/activations.h"

#include "core/error.h"
#include "core/memory.h"

namespace fornace {

void StepBuffers::reserve(ActivationBuffer id, const Dims& shape, DType dtype) {
  Tensor& buffer = buffers_[static_cast<size_t>(id)];
  if (buffer.defined()) {
    if (!(buffer.shape() == shape) || buffer.dtype() != dtype) {
      fail("decode buffers: buffer ", static_cast<int>(id), " is ", buffer.describe(),
           ", asked again as ", dtype_name(dtype), shape.to_string());
    }
    return;
  }
  memory::OpScope scope("decode_buffers");
  buffer = Tensor::empty(shape, dtype);
}

Tensor Activations::get(ActivationBuffer id, const Dims& shape, const char* op, DType dtype) {
  if (decode_step_) return step_buffers_.get(id);
  bool kept_by_cache = id == ActivationBuffer::key_rotated || id == ActivationBuffer::value ||
                       id == ActivationBuffer::value_cached;
  Tensor& reused = pass_buffers_[static_cast<size_t>(id)];
  if (!kept_by_cache && reused.defined() && reused.shape() == shape && reused.dtype() == dtype) {
    return reused;
  }
  memory::OpScope scope(op);
  Tensor made = Tensor::empty(shape, dtype);
  if (!kept_by_cache) reused = made;
  return made;
}

}  // namespace fornace
