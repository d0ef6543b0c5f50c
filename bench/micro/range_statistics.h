// The smallest and largest of a benchmark's repetitions, as statistics beside Google Benchmark's
// mean, median and standard deviation (ComputeStatistics("min", minimum), "max", maximum).
#pragma once

#include <algorithm>
#include <vector>

namespace fornace::micro {

inline double minimum(const std::vector<double>& values) {
  return *std::min_element(values.begin(), values.end());
}

inline double maximum(const std::vector<double>& values) {
  return *std::max_element(values.begin(), values.end());
}

}  // namespace fornace::micro
