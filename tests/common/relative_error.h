// The relative L2 error of a result against its reference, in double precision.
#pragma once

#include <cmath>
#include <vector>

namespace fornace {

inline double relative_l2(const std::vector<float>& actual, const std::vector<float>& expected) {
  double error = 0;
  double norm = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    double difference = double(actual[i]) - double(expected[i]);
    error += difference * difference;
    norm += double(expected[i]) * double(expected[i]);
  }
  return std::sqrt(error / norm);
}

}  // namespace fornace
