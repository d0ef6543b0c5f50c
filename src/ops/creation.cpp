// Tensor creation from values, ranges and a seeded normal generator, and reading back to host.
#include "ops/creation.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "cpu/copy_kernels.h"
#include "ops/copy.h"

namespace fornace {

Tensor full(const Dims& shape, double value, DType dtype) {
  memory::OpScope scope("full");
  // Filled in the target dtype directly: integers stay exact (no trip through f32) and no f32
  // temporary is allocated for a bf16 or f16 result.
  Tensor result = Tensor::empty(shape, dtype);
  int64_t count = result.numel();
  switch (dtype) {
    case DType::i32:
      std::fill_n(result.data<int32_t>(), count, static_cast<int32_t>(value));
      break;
    case DType::u32:
      std::fill_n(result.data<uint32_t>(), count, static_cast<uint32_t>(value));
      break;
    case DType::f32:
      std::fill_n(result.data<float>(), count, static_cast<float>(value));
      break;
    case DType::bf16:
    case DType::f16: {
      float single = static_cast<float>(value);
      uint16_t bits = 0;
      cpu::convert(&bits, dtype, &single, DType::f32, 1);
      std::fill_n(result.data<uint16_t>(), count, bits);
      break;
    }
  }
  return result;
}

Tensor zeros(const Dims& shape, DType dtype) { return full(shape, 0.0, dtype); }
Tensor ones(const Dims& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor from_vector(const std::vector<float>& values, const Dims& shape, DType dtype) {
  if (static_cast<int64_t>(values.size()) != shape.product()) {
    fail("from_vector: ", values.size(), " values for shape ", shape.to_string());
  }
  memory::OpScope scope("from_vector");
  Tensor result = Tensor::empty(shape, dtype);
  cpu::convert(result.raw(), dtype, values.data(), DType::f32, result.numel());
  return result;
}

Tensor from_ids(const std::vector<int32_t>& values, const Dims& shape, DType dtype) {
  if (static_cast<int64_t>(values.size()) != shape.product()) {
    fail("from_ids: ", values.size(), " values for shape ", shape.to_string());
  }
  memory::OpScope scope("from_ids");
  Tensor result = Tensor::empty(shape, dtype);
  cpu::convert(result.raw(), dtype, values.data(), DType::i32, result.numel());
  return result;
}

Tensor randn(const Dims& shape, uint64_t seed, double stddev, DType dtype) {
  memory::OpScope scope("randn");
  // A fixed generator and a fixed transform (Box-Muller), so the values do not depend on the
  // standard library's distribution implementation.
  std::mt19937_64 generator(seed);
  auto uniform = [&generator] {
    return (static_cast<double>(generator() >> 11) + 0.5) * 0x1p-53;
  };
  Tensor result = Tensor::empty(shape, DType::f32);
  float* data = result.data<float>();
  int64_t count = result.numel();
  for (int64_t i = 0; i < count; i += 2) {
    double radius = std::sqrt(-2.0 * std::log(uniform()));
    double angle = 2.0 * M_PI * uniform();
    data[i] = static_cast<float>(stddev * radius * std::cos(angle));
    if (i + 1 < count) data[i + 1] = static_cast<float>(stddev * radius * std::sin(angle));
  }
  return to_dtype(result, dtype);
}

std::vector<float> to_f32_vector(const Tensor& input) {
  std::vector<float> values(input.numel());
  cpu::strided_to_contiguous(values.data(), DType::f32, input.storage()->data(), input.dtype(),
                             input.layout());
  return values;
}

std::vector<double> to_f64_vector(const Tensor& input) {
  std::vector<float> values = to_f32_vector(input);
  return {values.begin(), values.end()};
}

std::vector<int64_t> to_i64_vector(const Tensor& input) {
  if (is_float(input.dtype())) {
    std::vector<float> values = to_f32_vector(input);
    return {values.begin(), values.end()};
  }
  std::vector<int32_t> values(input.numel());
  cpu::strided_to_contiguous(values.data(), DType::i32, input.storage()->data(), input.dtype(),
                             input.layout());
  std::vector<int64_t> result(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    result[i] = input.dtype() == DType::u32 ? static_cast<int64_t>(static_cast<uint32_t>(values[i]))
                                            : values[i];
  }
  return result;
}

}  // namespace fornace
