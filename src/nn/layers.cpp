// Embedding, Linear, RmsNorm and RotaryEmbedding over the ops.
#include "nn/layers.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <vector>

#include "core/error.h"
#include "core/memory.h"
#include "cpu/thread_pool.h"
#include "ops/copy.h"
#include "ops/math.h"
#include "nn/packed_weights.h"
#include "ops/quantized.h"

namespace fornace {

Tensor Embedding::forward(const Tensor& ids, DType dtype) const {
  memory::OpScope scope("embedding");
  if (quantized_) {
    Tensor rows = Tensor::empty({ids.dim(0), ids.dim(1), quantized_->columns}, DType::f32);
    quantized_rows_into(rows, *quantized_, ids);
    return to_dtype(rows, dtype);
  }
  if (packed_) {
    Dims shape = ids.shape();
    shape.push_back(table_.dim(1));
    Tensor rows = Tensor::empty(shape, dtype);
    index_select_packed_into(rows, table_, *packed_, ids);
    return rows;
  }
  return to_dtype(index_select(table_, ids), dtype);
}

void Embedding::forward_into(const Tensor& output, const Tensor& ids) const {
  if (quantized_) {
    quantized_rows_into(output, *quantized_, ids);
  } else if (packed_) {
    index_select_packed_into(output, table_, *packed_, ids);
  } else {
    index_select_into(output, table_, ids);
  }
}

void Linear::pack_weight(PackedWeights& packed) {
  if (quantized_ || packed_) return;
  // The kernels read the packed copy from now on: the stored weight's mapped pages go.
  packed_ = packed.pack(weight_, true);
}

Tensor Linear::forward(const Tensor& input) const {
  if (!quantized_) return linear(input, weight_, bias_, packed_.get());
  Dims shape = input.shape();
  shape[shape.size() - 1] = quantized_->rows;
  Tensor output = Tensor::empty(shape, DType::f32);
  quantized_linear_into(output, input, *quantized_, bias_, activation_rounding_);
  return input.dtype() == DType::f32 ? output : to_dtype(output, input.dtype());
}

DType Linear::input_dtype(int64_t rows) const {
  return quantized_ ? quantized_linear_input_dtype(rows, activation_rounding_)
                    : linear_input_dtype(weight_.dtype());
}

void Linear::forward_into(const Tensor& output, const Tensor& input) const {
  if (quantized_) {
    quantized_linear_into(output, input, *quantized_, bias_, activation_rounding_);
  } else {
    linear_into(output, input, weight_, bias_, packed_.get());
  }
}

namespace {

LinearLayerInto float_layer_into(const Linear& layer, const Tensor* output) {
  return LinearLayerInto{output, &layer.weight(), &layer.bias(), layer.packed_weight().get()};
}

QuantizedLayerInto quantized_layer_into(const Linear& layer, const Tensor* output) {
  return QuantizedLayerInto{output, &*layer.quantized_weight(), &layer.bias()};
}

}  // namespace

void forward_gated(const Tensor& input, const Linear& gate, const Linear& up,
                   const Tensor& gate_output, const Tensor& up_output, const Tensor& gated,
                   GateActivation activation) {
  if (gate.quantized_weight() && up.quantized_weight() &&
      gate.activation_rounding() == up.activation_rounding()) {
    quantized_linear_gated_into(gated, input, quantized_layer_into(gate, &gate_output),
                                quantized_layer_into(up, &up_output), gate.activation_rounding(),
                                activation);
    return;
  }
  if (gate.quantized_weight() || up.quantized_weight()) {  // Float and quantized mixed.
    forward_together(input, {{&gate, &gate_output}, {&up, &up_output}});
    gated_activation_into(gated, gate_output, up_output, activation);
    return;
  }
  linear_gated_into(gated, input, float_layer_into(gate, &gate_output),
                    float_layer_into(up, &up_output), activation);
}

void forward_together(const Tensor& input,
                      std::initializer_list<std::pair<const Linear*, const Tensor*>> layers) {
  constexpr size_t kMaxLayers = 8;
  if (layers.size() > kMaxLayers) fail("forward_together: at most ", kMaxLayers, " layers");
  const Linear& first = *layers.begin()->first;
  size_t quantized = 0;
  for (const auto& [layer, output] : layers) {
    if (layer->quantized_weight()) ++quantized;
  }
  if (quantized == 0) {
    std::array<LinearLayerInto, kMaxLayers> targets;
    size_t count = 0;
    for (const auto& [layer, output] : layers) targets[count++] = float_layer_into(*layer, output);
    linear_group_into(input, std::span<const LinearLayerInto>(targets.data(), count));
    return;
  }
  const bool alike = quantized == layers.size() &&
                     std::all_of(layers.begin(), layers.end(), [&](const auto& each) {
                       return each.first->activation_rounding() == first.activation_rounding();
                     });
  if (!alike) {  // Float and quantized layers mixed: one by one.
    for (const auto& [layer, output] : layers) layer->forward_into(*output, input);
    return;
  }
  std::array<QuantizedLayerInto, kMaxLayers> targets;
  size_t count = 0;
  for (const auto& [layer, output] : layers) {
    targets[count++] = quantized_layer_into(*layer, output);
  }
  quantized_linear_group_into(input, std::span<const QuantizedLayerInto>(targets.data(), count),
                              first.activation_rounding());
}

Tensor RmsNorm::forward(const Tensor& input) const { return rms_norm(input, weight_, eps_); }

void RmsNorm::forward_into(const Tensor& output, const Tensor& input) const {
  rms_norm_into(output, input, weight_, eps_);
}

void RmsNorm::add_then_forward_into(const Tensor& output, const Tensor& hidden,
                                    const Tensor& update) const {
  add_rms_norm_into(output, hidden, update, weight_, eps_);
}

std::vector<double> rope_inverse_frequencies(int64_t head_dim, double theta,
                                             const std::optional<RopeScaling>& scaling,
                                             const std::vector<double>& divisors) {
  if (head_dim % 2 != 0) fail("rotary embedding: head_dim ", head_dim, " is odd");
  std::vector<double> frequencies(head_dim / 2);
  for (size_t i = 0; i < frequencies.size(); ++i) {
    frequencies[i] = std::pow(theta, -2.0 * static_cast<double>(i) / head_dim);
  }
  if (!divisors.empty()) {
    if (divisors.size() != frequencies.size()) {
      fail("rotary embedding: ", divisors.size(), " frequency divisors for ", frequencies.size(),
           " frequencies");
    }
    for (size_t i = 0; i < frequencies.size(); ++i) frequencies[i] /= divisors[i];
  }
  if (!scaling) return frequencies;
  if (scaling->type == "linear") {
    for (double& frequency : frequencies) frequency /= scaling->factor;
    return frequencies;
  }
  // llama3: wavelengths longer than original / low_freq_factor are stretched by the factor,
  // shorter than original / high_freq_factor kept, and the band between blended smoothly.
  const double original = static_cast<double>(scaling->original_max_position_embeddings);
  const double low_wavelength = original / scaling->low_freq_factor;
  const double high_wavelength = original / scaling->high_freq_factor;
  for (double& frequency : frequencies) {
    double wavelength = 2.0 * std::acos(-1.0) / frequency;
    if (wavelength > low_wavelength) {
      frequency /= scaling->factor;
    } else if (wavelength >= high_wavelength) {
      double smooth = (original / wavelength - scaling->low_freq_factor) /
                      (scaling->high_freq_factor - scaling->low_freq_factor);
      frequency = (1.0 - smooth) * frequency / scaling->factor + smooth * frequency;
    }
  }
  return frequencies;
}

RotaryEmbedding::RotaryEmbedding(int64_t head_dim, int64_t max_positions, double theta)
    : RotaryEmbedding(rope_inverse_frequencies(head_dim, theta), max_positions) {}

RotaryEmbedding::RotaryEmbedding(const std::vector<double>& inverse_frequencies,
                                 int64_t max_positions) {
  memory::OpScope scope("rotary_tables");
  int64_t half = static_cast<int64_t>(inverse_frequencies.size());
  cos_ = Tensor::empty({max_positions, half}, DType::f32);
  sin_ = Tensor::empty({max_positions, half}, DType::f32);
  float* cos_data = cos_.data<float>();
  float* sin_data = sin_.data<float>();
  // A million sines at 32k positions: split across the pool to keep start-up short.
  ThreadPool::global().run(max_positions, 256, [&](int64_t begin, int64_t end) {
    for (int64_t position = begin; position < end; ++position) {
      for (int64_t i = 0; i < half; ++i) {
        double angle = static_cast<double>(position) * inverse_frequencies[i];
        cos_data[position * half + i] = static_cast<float>(std::cos(angle));
        sin_data[position * half + i] = static_cast<float>(std::sin(angle));
      }
    }
  });
}

Tensor RotaryEmbedding::apply(const Tensor& input, int64_t start) const {
  memory::OpScope scope("rope");
  Tensor output = Tensor::empty(input.shape(), input.dtype());
  apply_into(output, input, start);
  return output;
}

void RotaryEmbedding::apply_into(const Tensor& output, const Tensor& input, int64_t start) const {
  int64_t length = input.dim(2);
  if (start + length > max_positions()) {
    fail("rotary embedding: positions up to ", start + length, " exceed the table of ",
         max_positions());
  }
  rope_into(output, input, cos_.narrow(0, start, length), sin_.narrow(0, start, length));
}

}  // namespace fornace
