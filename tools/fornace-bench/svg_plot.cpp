// Renders ms per decode step against position as a self-contained SVG line chart.
#include "svg_plot.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "format.h"
#include "stats.h"

namespace fornace::bench {
namespace {

constexpr double kWidth = 960;
constexpr double kHeight = 540;
constexpr double kLeft = 80;    // Room for the y tick labels and title.
constexpr double kRight = 300;  // Room for the legend.
constexpr double kTop = 50;
constexpr double kBottom = 60;  // Room for the x tick labels and title.

const char* const kColors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd",
                               "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
const char* const kDashes[] = {"", "8 4", "2 3", "12 4 2 4"};

std::string escape_xml(const std::string& text) {
  std::string escaped;
  for (char character : text) {
    switch (character) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      default:
        escaped += character;
    }
  }
  return escaped;
}

// A tick label: no decimals for whole steps, else as many as the step needs.
std::string tick_label(double value, double step) {
  int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  std::string text = format_fixed(value, decimals);
  return step >= 1 ? group_thousands(text) : text;
}

template <typename Key>
size_t index_of(std::vector<Key>& keys, const Key& key) {
  auto found = std::find(keys.begin(), keys.end(), key);
  if (found != keys.end()) return static_cast<size_t>(found - keys.begin());
  keys.push_back(key);
  return keys.size() - 1;
}

}  // namespace

std::vector<PlotSeries> plot_series(const std::vector<StepRecord>& steps) {
  std::vector<std::pair<std::string, std::string>> keys;
  std::vector<std::map<int64_t, std::vector<double>>> values;  // Per series: position -> ms.
  for (const StepRecord& step : steps) {
    size_t index = index_of(keys, {step.kv_cache, step.prompt});
    if (index == values.size()) values.emplace_back();
    values[index][step.position].push_back(step.ms);
  }
  std::vector<PlotSeries> series;
  for (size_t i = 0; i < keys.size(); ++i) {
    PlotSeries line{keys[i].first, keys[i].second, {}};
    for (const auto& [position, ms] : values[i]) {
      line.points.emplace_back(static_cast<double>(position), compute_stats(ms).median);
    }
    series.push_back(std::move(line));
  }
  return series;
}

AxisTicks axis_ticks(double min, double max, int target) {
  if (!(max > min)) {
    double begin = std::floor(min);
    return AxisTicks{begin, 1, begin + 1};
  }
  double rough = (max - min) / target;
  double magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  double step = magnitude * 10;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (magnitude * factor >= rough) {
      step = magnitude * factor;
      break;
    }
  }
  return AxisTicks{std::floor(min / step + 1e-9) * step, step, std::ceil(max / step - 1e-9) * step};
}

std::string render_step_plot(const std::vector<StepRecord>& steps, const std::string& title) {
  std::vector<PlotSeries> series = plot_series(steps);
  double min_position = series.empty() ? 0 : series[0].points.front().first;
  double max_position = 0;
  double max_ms = 0;
  for (const PlotSeries& line : series) {
    for (const auto& [position, ms] : line.points) {
      min_position = std::min(min_position, position);
      max_position = std::max(max_position, position);
      max_ms = std::max(max_ms, ms);
    }
  }
  // Positions start near the shortest prompt; ms start at zero so heights compare honestly.
  AxisTicks x_ticks = axis_ticks(min_position, max_position, 8);
  AxisTicks y_ticks = axis_ticks(0, max_ms, 6);
  const double plot_width = kWidth - kLeft - kRight;
  const double plot_height = kHeight - kTop - kBottom;
  auto x_of = [&](double position) {
    return kLeft + (position - x_ticks.begin) / (x_ticks.end - x_ticks.begin) * plot_width;
  };
  auto y_of = [&](double ms) { return kTop + plot_height - ms / y_ticks.end * plot_height; };
  auto number = [](double value) { return format_fixed(value, 1); };

  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(kWidth) + "\" height=\"" +
         number(kHeight) + "\" viewBox=\"0 0 " + number(kWidth) + " " + number(kHeight) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + number(kLeft) + "\" y=\"28\" font-size=\"16\">" + escape_xml(title) +
         "</text>\n";

  // Grid, ticks and tick labels.
  svg += "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  for (double x = x_ticks.begin; x <= x_ticks.end + x_ticks.step / 2; x += x_ticks.step) {
    svg += "<line x1=\"" + number(x_of(x)) + "\" y1=\"" + number(kTop) + "\" x2=\"" +
           number(x_of(x)) + "\" y2=\"" + number(kTop + plot_height) + "\"/>\n";
  }
  for (double y = 0; y <= y_ticks.end + y_ticks.step / 2; y += y_ticks.step) {
    svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(y_of(y)) + "\" x2=\"" +
           number(kLeft + plot_width) + "\" y2=\"" + number(y_of(y)) + "\"/>\n";
  }
  svg += "</g>\n<g fill=\"#333333\">\n";
  for (double x = x_ticks.begin; x <= x_ticks.end + x_ticks.step / 2; x += x_ticks.step) {
    svg += "<text x=\"" + number(x_of(x)) + "\" y=\"" + number(kTop + plot_height + 18) +
           "\" text-anchor=\"middle\">" + tick_label(x, x_ticks.step) + "</text>\n";
  }
  for (double y = 0; y <= y_ticks.end + y_ticks.step / 2; y += y_ticks.step) {
    svg += "<text x=\"" + number(kLeft - 8) + "\" y=\"" + number(y_of(y) + 4) +
           "\" text-anchor=\"end\">" + tick_label(y, y_ticks.step) + "</text>\n";
  }
  svg += "</g>\n";

  // Axes and their titles.
  svg += "<g stroke=\"#333333\" stroke-width=\"1.5\">\n";
  svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(kTop + plot_height) + "\" x2=\"" +
         number(kLeft + plot_width) + "\" y2=\"" + number(kTop + plot_height) + "\"/>\n";
  svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(kTop) + "\" x2=\"" + number(kLeft) +
         "\" y2=\"" + number(kTop + plot_height) + "\"/>\n";
  svg += "</g>\n";
  svg += "<text x=\"" + number(kLeft + plot_width / 2) + "\" y=\"" + number(kHeight - 14) +
         "\" text-anchor=\"middle\">position of the decoded token (tokens already in the KV "
         "cache)</text>\n";
  svg += "<text transform=\"translate(22 " + number(kTop + plot_height / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">ms per decode step (median of the runs)</text>\n";

  // One polyline per series: colour by cache, dash pattern by prompt.
  std::vector<std::string> caches;
  std::vector<std::string> prompts;
  std::string legend;
  double legend_y = kTop + 10;
  for (const PlotSeries& line : series) {
    size_t color = index_of(caches, line.kv_cache) % std::size(kColors);
    size_t dash = index_of(prompts, line.prompt) % std::size(kDashes);
    std::string style =
        std::string("fill=\"none\" stroke=\"") + kColors[color] + "\" stroke-width=\"1.5\"" +
        (kDashes[dash][0] ? std::string(" stroke-dasharray=\"") + kDashes[dash] + "\""
                          : std::string());
    std::string points;
    for (const auto& [position, ms] : line.points) {
      if (!points.empty()) points += ' ';
      points += number(x_of(position)) + "," + number(y_of(ms));
    }
    std::string label = line.kv_cache + " \u00b7 " + path_file_name(line.prompt);
    svg += "<polyline " + style + " points=\"" + points + "\"><title>" + escape_xml(label) +
           "</title></polyline>\n";
    double legend_x = kLeft + plot_width + 20;
    legend += "<line x1=\"" + number(legend_x) + "\" y1=\"" + number(legend_y) + "\" x2=\"" +
              number(legend_x + 30) + "\" y2=\"" + number(legend_y) + "\" " + style + "/>\n";
    legend += "<text x=\"" + number(legend_x + 38) + "\" y=\"" + number(legend_y + 4) + "\">" +
              escape_xml(label) + "</text>\n";
    legend_y += 20;
  }
  if (series.empty()) {
    svg += "<text x=\"" + number(kLeft + plot_width / 2) + "\" y=\"" +
           number(kTop + plot_height / 2) + "\" text-anchor=\"middle\">no decode steps</text>\n";
  }
  svg += "<g class=\"legend\">\n" + legend + "</g>\n";
  svg += "</svg>\n";
  return svg;
}

}  // namespace fornace::bench
