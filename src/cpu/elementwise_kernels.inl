// The f32 run and row kernels, compiled once per ISA: elementwise.cpp (portable),
// elementwise_avx2.cpp and elementwise_avx512.cpp define FORNACE_KERNEL_NAMESPACE and include
// this file.

#include <cmath>

#include "cpu/elementwise.h"
#include "cpu/simd.h"

namespace fornace::cpu::FORNACE_KERNEL_NAMESPACE {
namespace {

using simd::Vec;

void binary_run(BinaryOp op, const float* left, const float* right, float* out, int64_t count) {
  if (op == BinaryOp::add) {
    simd::transform(left, right, out, count, [](Vec a, Vec b) { return simd::add(a, b); });
  } else {
    simd::transform(left, right, out, count, [](Vec a, Vec b) { return simd::multiply(a, b); });
  }
}

void silu_run(const float* input, float* out, int64_t count) {
  const Vec one = simd::broadcast(1.0f);
  const Vec zero = simd::broadcast(0.0f);
  simd::transform(input, out, count, [&](Vec x) {
    return simd::divide(x, simd::add(one, simd::exp(simd::subtract(zero, x))));
  });
}

void scale_run(const float* input, float factor, float* out, int64_t count) {
  const Vec scale = simd::broadcast(factor);
  simd::transform(input, out, count, [&](Vec x) { return simd::multiply(x, scale); });
}

void softmax_row(const float* input, float* out, int64_t count) {
  float maximum = simd::max_value(input, count);
  if (maximum == -INFINITY) maximum = 0.0f;  // An all -inf row gives NaN (0/0), as in PyTorch.
  const Vec shift = simd::broadcast(maximum);
  simd::transform(input, out, count, [&](Vec x) { return simd::exp(simd::subtract(x, shift)); });
  scale_run(out, 1.0f / simd::sum(out, count), out, count);
}

void rms_norm_row(const float* input, const float* weight, float epsilon, float* out,
                  int64_t count) {
  float mean_square = simd::dot(input, input, count) / static_cast<float>(count);
  const Vec inverse = simd::broadcast(1.0f / std::sqrt(mean_square + epsilon));
  simd::transform(input, weight, out, count,
                  [&](Vec x, Vec w) { return simd::multiply(simd::multiply(x, inverse), w); });
}

void rope_row(const float* input, const float* cos, const float* sin, float* out, int64_t half) {
  const float* second = input + half;
  int64_t i = 0;
  for (; i + simd::kWidth <= half; i += simd::kWidth) {
    Vec x1 = simd::load(input + i);
    Vec x2 = simd::load(second + i);
    Vec c = simd::load(cos + i);
    Vec s = simd::load(sin + i);
    simd::store(out + i, simd::subtract(simd::multiply(x1, c), simd::multiply(x2, s)));
    simd::store(out + half + i, simd::add(simd::multiply(x2, c), simd::multiply(x1, s)));
  }
  for (; i < half; ++i) {
    out[i] = input[i] * cos[i] - second[i] * sin[i];
    out[i + half] = second[i] * cos[i] + input[i] * sin[i];
  }
}

int64_t argmax_row(const float* input, int64_t count) {
  float maximum = simd::max_value(input, count);
  for (int64_t i = 0; i < count; ++i) {
    if (input[i] == maximum) return i;
  }
  return 0;
}

}  // namespace

const ElementwiseKernels elementwise_kernels{binary_run,   silu_run, scale_run, softmax_row,
                                             rms_norm_row, rope_row, argmax_row};

}  // namespace fornace::cpu::FORNACE_KERNEL_NAMESPACE
