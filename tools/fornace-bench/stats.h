// Summary statistics of repeated measurements: mean, median, minimum and maximum.
#pragma once

#include <cstddef>
#include <vector>

namespace fornace::bench {

struct Stats {
  double mean = 0;
  double median = 0;
  double min = 0;
  double max = 0;
  size_t count = 0;
};

// All zero for an empty input. The median of an even count is the mean of the middle two.
Stats compute_stats(std::vector<double> values);

}  // namespace fornace::bench
