// The gated MLP of a decoder layer: down(activation(gate(x)) * up(x)), SwiGLU or GeGLU.
#pragma once

#include <string>

#include "nn/activations.h"
#include "nn/layers.h"
#include "nn/weights.h"
#include "ops/math.h"

namespace fornace {

class GatedMlp {
 public:
  GatedMlp() = default;
  GatedMlp(Linear gate, Linear up, Linear down, GateActivation activation)
      : gate_(std::move(gate)), up_(std::move(up)), down_(std::move(down)),
        activation_(activation) {}

  // <prefix>gate_proj, up_proj and down_proj of a checkpoint, without biases.
  static GatedMlp read(const WeightReader& weights, const std::string& prefix, int64_t hidden,
                       int64_t intermediate, GateActivation activation);

  // Makes the one-token decode buffers it writes into.
  void reserve(StepBuffers& buffers) const;
  // input [1, S, hidden] -> [1, S, hidden] (ActivationBuffer::projected).
  Tensor forward(const Tensor& input, Activations& activations) const;

 private:
  Linear gate_;
  Linear up_;
  Linear down_;
  GateActivation activation_ = GateActivation::silu;
};

}  // namespace fornace
