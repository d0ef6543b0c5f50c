// Test helpers: random values, the same logical tensor in several memory layouts, tolerance
// checks and error-message capture. The references themselves stay in each test.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/copy.h"
#include "ops/creation.h"

namespace fornace::test {

// Uniform values in [low, high) from a fixed seed.
inline std::vector<float> random_values(int64_t count, uint64_t seed, float low = -2.0f,
                                        float high = 2.0f) {
  std::mt19937_64 generator(seed);
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(generator);
  return values;
}

// How a test tensor lies in memory. Every kind holds the same logical values.
enum class Storage { contiguous, reversed, padded };
inline const char* storage_name(Storage kind) {
  switch (kind) {
    case Storage::contiguous:
      return "contiguous";
    case Storage::reversed:
      return "reversed";
    case Storage::padded:
      return "padded";
  }
  return "?";
}
constexpr Storage kAllStorages[] = {Storage::contiguous, Storage::reversed, Storage::padded};

// Row-major multi-index of `flat` in `shape`.
inline std::vector<int64_t> unravel(int64_t flat, const Dims& shape) {
  std::vector<int64_t> index(shape.size());
  for (int dim = shape.size() - 1; dim >= 0; --dim) {
    index[dim] = flat % shape[dim];
    flat /= shape[dim];
  }
  return index;
}

inline int64_t ravel(const std::vector<int64_t>& index, const Dims& shape) {
  int64_t flat = 0;
  for (int dim = 0; dim < shape.size(); ++dim) flat = flat * shape[dim] + index[dim];
  return flat;
}

// A tensor of `shape` whose row-major logical values are `values`, stored as `kind`:
// contiguous; reversed (a buffer of the reversed shape viewed through a permute, so every stride
// is out of order; rank 1 becomes a stride-2 view); padded (a buffer one larger on each side of
// every dim, filled with NaN, viewed through narrow, so reading outside the view shows).
inline Tensor make_tensor(const std::vector<float>& values, const Dims& shape, DType dtype,
                          Storage kind) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int rank = shape.size();
  if (kind == Storage::contiguous) return from_vector(values, shape, dtype);
  if (kind == Storage::reversed && rank == 1) {
    std::vector<float> buffer(2 * values.size(), nan);
    for (size_t i = 0; i < values.size(); ++i) buffer[2 * i] = values[i];
    return from_vector(buffer, {shape[0], 2}, dtype).narrow(1, 0, 1).squeeze(1);
  }
  if (kind == Storage::reversed) {
    Dims reversed_shape;
    std::vector<int64_t> order;
    for (int dim = rank - 1; dim >= 0; --dim) {
      reversed_shape.push_back(shape[dim]);
      order.push_back(dim);
    }
    std::vector<float> buffer(values.size());
    for (int64_t flat = 0; flat < static_cast<int64_t>(values.size()); ++flat) {
      std::vector<int64_t> index = unravel(flat, shape);
      std::vector<int64_t> reversed_index(index.rbegin(), index.rend());
      buffer[ravel(reversed_index, reversed_shape)] = values[flat];
    }
    return from_vector(buffer, reversed_shape, dtype).permute(order);
  }
  Dims padded_shape = shape;
  for (int dim = 0; dim < rank; ++dim) padded_shape[dim] += 2;
  std::vector<float> buffer(padded_shape.product(), nan);
  for (int64_t flat = 0; flat < static_cast<int64_t>(values.size()); ++flat) {
    std::vector<int64_t> index = unravel(flat, shape);
    for (int64_t& coordinate : index) coordinate += 1;
    buffer[ravel(index, padded_shape)] = values[flat];
  }
  Tensor tensor = from_vector(buffer, padded_shape, dtype);
  for (int dim = 0; dim < rank; ++dim) tensor = tensor.narrow(dim, 1, shape[dim]);
  return tensor;
}

// The values after a round trip through `dtype` (what a tensor of that dtype holds).
inline std::vector<float> representable(const std::vector<float>& values, DType dtype) {
  return to_f32_vector(from_vector(values, {static_cast<int64_t>(values.size())}, dtype));
}

// |actual - expected| <= absolute + relative * |expected| for every element, NaN only where
// expected is NaN. Reports the first few failures with their flat index.
inline void expect_close(const std::vector<double>& actual, const std::vector<double>& expected,
                         double absolute, double relative, const std::string& context) {
  ASSERT_EQ(actual.size(), expected.size()) << context;
  int failures = 0;
  for (size_t i = 0; i < actual.size() && failures < 5; ++i) {
    bool both_nan = std::isnan(actual[i]) && std::isnan(expected[i]);
    bool close = std::abs(actual[i] - expected[i]) <= absolute + relative * std::abs(expected[i]);
    if (!both_nan && !close) {
      ++failures;
      ADD_FAILURE() << context << ": element " << i << " is " << actual[i] << ", expected "
                    << expected[i];
    }
  }
}

// The message of the fornace::Error that `action` throws, or "" (and a test failure) when it
// throws none.
inline std::string error_message(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a fornace::Error";
  return "";
}

// The tolerances for results computed in f32 and stored in `dtype`.
inline double relative_tolerance(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return 1.0 / 128;
    case DType::f16:
      return 1.0 / 1024;
    default:
      return 2e-5;
  }
}

}  // namespace fornace::test
