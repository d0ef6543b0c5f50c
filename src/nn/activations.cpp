// Decode buffers made at load, and the per-pass buffers of prompt passes.
#include "nn/activations.h"

#include "core/error.h"
#include "core/memory.h"

namespace fornace {

void StepBuffers::reserve(Slot slot, const Dims& shape, DType dtype) {
  Tensor& buffer = buffers_[static_cast<size_t>(slot)];
  if (buffer.defined()) {
    if (!(buffer.shape() == shape) || buffer.dtype() != dtype) {
      fail("decode buffers: slot ", static_cast<int>(slot), " is ", buffer.describe(),
           ", asked again as ", dtype_name(dtype), shape.to_string());
    }
    return;
  }
  memory::OpScope scope("decode_buffers");
  buffer = Tensor::empty(shape, dtype);
}

Tensor Activations::get(Slot slot, const Dims& shape, const char* op, DType dtype) {
  if (decode_step_) return step_buffers_.get(slot);
  bool kept_by_cache = slot == Slot::key_rotated || slot == Slot::value || slot == Slot::value_cached;
  Tensor& reused = pass_buffers_[static_cast<size_t>(slot)];
  if (!kept_by_cache && reused.defined() && reused.shape() == shape && reused.dtype() == dtype) {
    return reused;
  }
  memory::OpScope scope(op);
  Tensor made = Tensor::empty(shape, dtype);
  if (!kept_by_cache) reused = made;
  return made;
}

}  // namespace fornace
