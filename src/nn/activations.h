// The tensors a forward pass writes its activations into: one-token buffers that every decode
// step reuses (so a step allocates nothing), and buffers made once per prompt pass.
#pragma once

#include <array>

#include "core/tensor.h"

namespace fornace {

// The activations of a decoder layer and of the model around the layers.
enum class ActivationBuffer {
  hidden,
  normed,
  query,
  key,
  value,
  value_cached,  // V in the KV cache's dtype.
  query_rotated,
  key_rotated,
  attended,
  merged,  // Attended rows of a batched pass, [1, B, heads * D].
  projected,
  gate,
  up,
  gated,  // activation(gate) * up in bf16, where down_proj takes bf16 input.
  logits,
  count
};

// The decode buffers, made at load. Layers of one model share them.
class StepBuffers {
 public:
  // Makes the buffer `id`, or checks that the one made already has this shape and dtype.
  void reserve(ActivationBuffer id, const Dims& shape, DType dtype = DType::f32);
  const Tensor& get(ActivationBuffer id) const { return buffers_[static_cast<size_t>(id)]; }

 private:
  std::array<Tensor, static_cast<size_t>(ActivationBuffer::count)> buffers_;
};

// Hands out the tensor an op writes into: in a decode step (one token after the prompt), the
// decode buffer; in a prompt pass, a buffer made on first use and reused by every layer of the
// pass (so each pass faults its pages in once, not once a layer), except K and V, which a cat
// cache may keep as they are.
class Activations {
 public:
  Activations(const StepBuffers& step_buffers, bool decode_step)
      : step_buffers_(step_buffers), decode_step_(decode_step) {}
  Tensor get(ActivationBuffer id, const Dims& shape, const char* op, DType dtype = DType::f32);
  bool decode_step() const { return decode_step_; }

 private:
  const StepBuffers& step_buffers_;
  std::array<Tensor, static_cast<size_t>(ActivationBuffer::count)> pass_buffers_;
  bool decode_step_;
};

}  // namespace fornace
