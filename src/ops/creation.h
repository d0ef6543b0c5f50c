// Ops that create tensors: filled, from host vectors, seeded normal, and back to host.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace fornace {

Tensor full(const Dims& shape, double value, DType dtype = DType::f32);
Tensor zeros(const Dims& shape, DType dtype = DType::f32);
Tensor ones(const Dims& shape, DType dtype = DType::f32);
// A tensor of `shape` from host values, converted to `dtype`. Sizes must agree.
Tensor from_vector(const std::vector<float>& values, const Dims& shape, DType dtype = DType::f32);
Tensor from_ids(const std::vector<int32_t>& values, const Dims& shape, DType dtype = DType::u32);
// Normal(mean 0, `stddev`) values from a seeded generator: the same seed gives the same tensor.
Tensor randn(const Dims& shape, uint64_t seed, double stddev = 1.0, DType dtype = DType::f32);

// Every element in row-major order, converted to float / double / int64 (any layout).
std::vector<float> to_f32_vector(const Tensor& input);
std::vector<double> to_f64_vector(const Tensor& input);
std::vector<int64_t> to_i64_vector(const Tensor& input);

}  // namespace fornace
