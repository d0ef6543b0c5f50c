// Embedding, Linear, RmsNorm and RotaryEmbedding over the ops.
#include "nn/layers.h"

#include <array>
#include <cmath>
#include <span>
#include <vector>

#include "core/error.h"
#include "cpu/thread_pool.h"
#include "ops/copy.h"
#include "ops/math.h"

namespace fornace {

Tensor Embedding::forward(const Tensor& ids, DType dtype) const {
  memory::OpScope scope("embedding");
  return to_dtype(index_select(table_, ids), dtype);
}

void Embedding::forward_into(const Tensor& output, const Tensor& ids) const {
  index_select_into(output, table_, ids);
}

Tensor Linear::forward(const Tensor& input) const { return linear(input, weight_, bias_); }

void Linear::forward_into(const Tensor& output, const Tensor& input) const {
  linear_into(output, input, weight_, bias_);
}

void forward_together(const Tensor& input,
                      std::initializer_list<std::pair<const Linear*, const Tensor*>> layers) {
  constexpr size_t kMaxLayers = 8;
  if (layers.size() > kMaxLayers) fail("forward_together: at most ", kMaxLayers, " layers");
  std::array<LinearLayerInto, kMaxLayers> targets;
  size_t count = 0;
  for (const auto& [layer, output] : layers) {
    targets[count++] = LinearLayerInto{output, &layer->weight(), &layer->bias()};
  }
  linear_group_into(input, std::span<const LinearLayerInto>(targets.data(), count));
}

Tensor RmsNorm::forward(const Tensor& input) const { return rms_norm(input, weight_, eps_); }

void RmsNorm::forward_into(const Tensor& output, const Tensor& input) const {
  rms_norm_into(output, input, weight_, eps_);
}

RotaryEmbedding::RotaryEmbedding(int64_t head_dim, int64_t max_positions, double theta) {
  if (head_dim % 2 != 0) fail("rotary embedding: head_dim ", head_dim, " is odd");
  memory::OpScope scope("rotary_tables");
  int64_t half = head_dim / 2;
  cos_ = Tensor::empty({max_positions, half}, DType::f32);
  sin_ = Tensor::empty({max_positions, half}, DType::f32);
  float* cos_data = cos_.data<float>();
  float* sin_data = sin_.data<float>();
  std::vector<double> inverse_frequencies(half);
  for (int64_t i = 0; i < half; ++i) {
    inverse_frequencies[i] = std::pow(theta, -2.0 * static_cast<double>(i) / head_dim);
  }
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
