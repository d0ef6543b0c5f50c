// Mean, median and range of a set of measurements.
#include "stats.h"

#include <algorithm>
#include <numeric>

namespace fornace::bench {

Stats compute_stats(std::vector<double> values) {
  Stats stats;
  stats.count = values.size();
  if (values.empty()) return stats;
  std::sort(values.begin(), values.end());
  stats.min = values.front();
  stats.max = values.back();
  stats.mean =
      std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  size_t middle = values.size() / 2;
  stats.median =
      values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
  return stats;
}

}  // namespace fornace::bench
