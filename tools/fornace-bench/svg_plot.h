// The SVG plot of a bench: ms per decode step against position, one line per cache and prompt.
#pragma once

#include <string>
#include <vector>

#include "records.h"

namespace fornace::bench {

// A line of the plot: the median over the recorded runs of each step's ms, by position.
struct PlotSeries {
  std::string kv_cache;
  std::string prompt;
  std::vector<std::pair<double, double>> points;  // (position, ms), by position.
};

// Groups steps by (cache, prompt) in order of first appearance.
std::vector<PlotSeries> plot_series(const std::vector<StepRecord>& steps);

// Tick marks for an axis over [min, max]: a step of 1, 2 or 5 times a power of ten giving about
// `target` intervals, with both ends rounded outwards to a whole step.
struct AxisTicks {
  double begin = 0;
  double step = 1;
  double end = 1;
};
AxisTicks axis_ticks(double min, double max, int target);

// A standalone SVG document with axes, ticks, labels, a title and a legend.
std::string render_step_plot(const std::vector<StepRecord>& steps, const std::string& title);

}  // namespace fornace::bench
