// The SVG plot of a bench: ms per decode step against position, one panel per model and prompt.
#pragma once

#include <string>
#include <vector>

#include "records.h"

namespace fornace::bench {

// A line of the plot: the median over the recorded runs of each step's ms, by position.
struct PlotSeries {
  std::string model;
  std::string attention;
  std::string kv_cache;
  std::string prompt;
  std::vector<std::pair<double, double>> points;  // (position, ms), by position.
};

// Groups steps by (model, attention path, cache, prompt) in order of first appearance.
std::vector<PlotSeries> plot_series(const std::vector<StepRecord>& steps);

// Tick marks for an axis over [min, max]: a step of 1, 2 or 5 times a power of ten giving about
// `target` intervals, with both ends rounded outwards to a whole step.
struct AxisTicks {
  double begin = 0;
  double step = 1;
  double end = 1;
};
AxisTicks axis_ticks(double min, double max, int target);

// The first decode step of one recorded run, drawn as a marker of its own.
struct FirstStep {
  std::string attention;
  std::string kv_cache;
  int64_t run = 0;
  double position = 0;
  double ms = 0;
};

// The panel of one prompt on one model: its x axis spans exactly its positions. The first step of
// each run is a marker of its own, and the lines (the median of the runs) start at the second step.
// The y axis comes from the lines (the steady state), so that outliers above it are clipped to the
// top and drawn as markers with their value instead of flattening the lines.
struct PlotPanel {
  std::string model;  // Empty in files that did not record it.
  std::string prompt;
  double first_position = 0;
  double last_position = 0;
  AxisTicks y;
  std::vector<PlotSeries> series;      // One per (path, cache), in order of first appearance.
  std::vector<FirstStep> first_steps;  // Step 0 of every recorded run.
};

// Panels in order of the (model, prompt) pairs' first appearance.
std::vector<PlotPanel> plot_panels(const std::vector<StepRecord>& steps);

// A standalone SVG document: the title (wrapped at commas when long), a legend with an entry per
// (attention path, cache) and the markers, and one panel per (model, prompt) with its axes,
// ticks and labels. A cache keeps its colour and a path its dash pattern across panels; entries
// name the path only when a path other than fused was measured.
std::string render_step_plot(const std::vector<StepRecord>& steps, const std::string& title);

}  // namespace fornace::bench
