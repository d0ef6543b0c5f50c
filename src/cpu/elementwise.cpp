// Portable f32 run and row kernels, written for GCC's auto-vectorizer.
#include "cpu/elementwise.h"

#include <cmath>

#include "cpu/vector_math.h"

namespace fornace::cpu {

void binary_run(BinaryOp op, const float* left, const float* right, float* out, int64_t count) {
  if (op == BinaryOp::add) {
    for (int64_t i = 0; i < count; ++i) out[i] = left[i] + right[i];
  } else {
    for (int64_t i = 0; i < count; ++i) out[i] = left[i] * right[i];
  }
}

void binary_scalar_run(BinaryOp op, const float* left, float scalar, float* out, int64_t count) {
  if (op == BinaryOp::add) {
    for (int64_t i = 0; i < count; ++i) out[i] = left[i] + scalar;
  } else {
    for (int64_t i = 0; i < count; ++i) out[i] = left[i] * scalar;
  }
}

void silu_run(const float* input, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = input[i] / (1.0f + exp_approx(-input[i]));
}

void scale_run(const float* input, float factor, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = input[i] * factor;
}

void softmax_row(const float* input, float* out, int64_t count) {
  float maximum = max_value(input, count);
  if (maximum == -INFINITY) maximum = 0.0f;  // An all -inf row gives NaN (0/0), as in PyTorch.
  for (int64_t i = 0; i < count; ++i) out[i] = exp_approx(input[i] - maximum);
  float inverse = 1.0f / sum(out, count);
  for (int64_t i = 0; i < count; ++i) out[i] *= inverse;
}

void rms_norm_row(const float* input, const float* weight, float epsilon, float* out,
                  int64_t count) {
  float mean_square = dot(input, input, count) / static_cast<float>(count);
  float inverse = 1.0f / std::sqrt(mean_square + epsilon);
  for (int64_t i = 0; i < count; ++i) out[i] = input[i] * inverse * weight[i];
}

void rope_row(const float* input, const float* cos, const float* sin, float* out, int64_t half) {
  const float* second = input + half;
  for (int64_t i = 0; i < half; ++i) {
    float x1 = input[i];
    float x2 = second[i];
    out[i] = x1 * cos[i] - x2 * sin[i];
    out[i + half] = x2 * cos[i] + x1 * sin[i];
  }
}

int64_t argmax_row(const float* input, int64_t count) {
  float maximum = max_value(input, count);
  for (int64_t i = 0; i < count; ++i) {
    if (input[i] == maximum) return i;
  }
  return 0;
}

}  // namespace fornace::cpu
