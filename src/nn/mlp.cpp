// The gated MLP: gate, up and the activation in one pass over the input, then down.
#include "nn/mlp.h"

namespace fornace {

GatedMlp GatedMlp::read(const WeightReader& weights, const std::string& prefix, int64_t hidden,
                       int64_t intermediate, GateActivation activation) {
  return GatedMlp(weights.linear(prefix + "gate_proj", intermediate, hidden, false),
                  weights.linear(prefix + "up_proj", intermediate, hidden, false),
                  weights.linear(prefix + "down_proj", hidden, intermediate, false), activation);
}

void GatedMlp::reserve(StepBuffers& buffers) const {
  int64_t intermediate = gate_.outputs();
  buffers.reserve(ActivationBuffer::gate, {1, 1, intermediate});
  buffers.reserve(ActivationBuffer::up, {1, 1, intermediate});
  if (down_.input_dtype(1) != DType::f32) {
    buffers.reserve(ActivationBuffer::gated, {1, 1, intermediate}, down_.input_dtype(1));
  }
  buffers.reserve(ActivationBuffer::projected, {1, 1, down_.outputs()});
}

Tensor GatedMlp::forward(const Tensor& input, Activations& activations) const {
  Dims shape{1, input.dim(1), gate_.outputs()};
  Tensor gate = activations.get(ActivationBuffer::gate, shape, "linear");
  Tensor up = activations.get(ActivationBuffer::up, shape, "linear");
  // In place over the gate, or into a tensor of the dtype down takes as it is.
  const DType gated_dtype = down_.input_dtype(input.dim(1));
  Tensor gated = gated_dtype == DType::f32
                     ? gate
                     : activations.get(ActivationBuffer::gated, shape, gated_op_name(activation_),
                                       gated_dtype);
  forward_gated(input, gate_, up_, gate, up, gated, activation_);
  Tensor output =
      activations.get(ActivationBuffer::projected, {1, input.dim(1), down_.outputs()}, "linear");
  down_.forward_into(output, gated);
  return output;
}

}  // namespace fornace
