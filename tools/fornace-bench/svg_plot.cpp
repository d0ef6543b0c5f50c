// Renders ms per decode step against position as a self-contained SVG, one panel per prompt.
#include "svg_plot.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "format.h"
#include "stats.h"

namespace fornace::bench {
namespace {

constexpr double kWidth = 960;
constexpr double kLeft = 80;  // Room for the y tick labels and title.
constexpr double kRight = 30;
constexpr double kPlotWidth = kWidth - kLeft - kRight;
constexpr double kInset = 8;  // Keeps the markers at either end clear of the axes.
constexpr double kTitleLineHeight = 20;
constexpr size_t kTitleLineChars = 100;  // About the plot's width at 16 px.
constexpr double kLegendHeight = 30;
constexpr double kPanelHeader = 28;  // The panel's own title above its plot area.
constexpr double kPlotHeight = 230;
constexpr double kPanelFooter = 52;  // Room for the x tick labels and title.
constexpr double kPanelHeight = kPanelHeader + kPlotHeight + kPanelFooter;
constexpr double kEmptyHeight = 240;
// The y axis ends this share of the steady state's spread above its 99th percentile.
constexpr double kHeadroom = 0.1;
constexpr double kLabelGap = 40;  // Minimum px between clipped-value labels on one row.

const char* const kColors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd",
                               "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

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

std::string number(double value) { return format_fixed(value, 1); }

std::string position_text(double position) { return group_thousands(format_fixed(position, 0)); }

template <typename Key>
size_t index_of(std::vector<Key>& keys, const Key& key) {
  auto found = std::find(keys.begin(), keys.end(), key);
  if (found != keys.end()) return static_cast<size_t>(found - keys.begin());
  keys.push_back(key);
  return keys.size() - 1;
}

// Linear interpolation between the closest ranks of a sorted, non-empty list.
double quantile(const std::vector<double>& sorted, double fraction) {
  double rank = fraction * static_cast<double>(sorted.size() - 1);
  size_t below = static_cast<size_t>(std::floor(rank));
  size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (rank - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

// From the lowest value drawn to a little above the 99th percentile of the lines (the steady
// state); from zero when that is near enough that zooming in would gain little.
AxisTicks steady_state_range(const PlotPanel& panel) {
  std::vector<double> steady;
  for (const PlotSeries& line : panel.series) {
    for (const auto& point : line.points) steady.push_back(point.second);
  }
  std::vector<double> first_ms;
  for (const FirstStep& first : panel.first_steps) first_ms.push_back(first.ms);
  if (steady.empty()) steady = first_ms;
  std::sort(steady.begin(), steady.end());
  double lowest = steady.front();
  for (double ms : first_ms) lowest = std::min(lowest, ms);
  double high = quantile(steady, 0.99);
  double spread = std::max(high - lowest, high * 0.05);
  double top = high + kHeadroom * spread;
  double bottom = std::max(0.0, lowest - kHeadroom * spread);
  if (bottom < 0.3 * top) bottom = 0;
  return axis_ticks(bottom, top, 5);
}

// Splits a long title after the commas outside parentheses, so that each line holds about
// `limit` characters.
std::vector<std::string> wrap_title(const std::string& title, size_t limit) {
  std::vector<std::string> pieces(1);
  int depth = 0;
  for (size_t i = 0; i < title.size(); ++i) {
    depth += title[i] == '(' ? 1 : title[i] == ')' ? -1 : 0;
    pieces.back() += title[i];
    if (title[i] == ',' && depth == 0 && i + 1 < title.size() && title[i + 1] == ' ') {
      pieces.emplace_back();
      ++i;  // The space after the comma ends the piece.
    }
  }
  std::vector<std::string> lines(1);
  for (const std::string& piece : pieces) {
    if (!lines.back().empty() && lines.back().size() + 1 + piece.size() > limit) {
      lines.emplace_back();
    }
    lines.back() += (lines.back().empty() ? "" : " ") + piece;
  }
  return lines;
}

// A value above the panel's y axis: a triangle at the top edge and the value in ms.
struct ClippedMarker {
  double x = 0;
  double ms = 0;
  const char* color = "";
  bool first_step = false;
};

std::string render_panel(const PlotPanel& panel, double top, std::vector<std::string>& caches) {
  const double plot_top = top + kPanelHeader;
  const double plot_bottom = plot_top + kPlotHeight;
  const double x_span = panel.last_position - panel.first_position;
  auto x_of = [&](double position) {
    if (x_span <= 0) return kLeft + kPlotWidth / 2;
    return kLeft + kInset + (position - panel.first_position) / x_span * (kPlotWidth - 2 * kInset);
  };
  const AxisTicks& y = panel.y;
  auto y_of = [&](double ms) {
    return plot_bottom - (std::min(ms, y.end) - y.begin) / (y.end - y.begin) * kPlotHeight;
  };

  std::string svg = "<g class=\"panel\" data-prompt=\"" + escape_xml(panel.prompt) +
                    "\" data-first-position=\"" + format_fixed(panel.first_position, 0) +
                    "\" data-last-position=\"" + format_fixed(panel.last_position, 0) + "\">\n";
  std::string heading = path_file_name(panel.prompt);
  if (!panel.first_steps.empty()) {
    heading += " \u00b7 " + position_text(panel.first_steps.front().position) + "-token prompt";
  }
  heading += " \u00b7 decode positions " + position_text(panel.first_position) + "\u2013" +
             position_text(panel.last_position);
  svg += "<text x=\"" + number(kLeft) + "\" y=\"" + number(top + 16) +
         "\" font-size=\"14\" font-weight=\"bold\">" + escape_xml(heading) + "</text>\n";

  // x ticks: both ends of the prompt's positions and the whole steps between them.
  std::vector<double> x_values = {panel.first_position};
  if (x_span > 0) {
    AxisTicks x_ticks = axis_ticks(panel.first_position, panel.last_position, 8);
    for (double x = x_ticks.begin; x <= x_ticks.end + x_ticks.step / 2; x += x_ticks.step) {
      if (x - panel.first_position >= x_ticks.step / 2 &&
          panel.last_position - x >= x_ticks.step / 2) {
        x_values.push_back(x);
      }
    }
    x_values.push_back(panel.last_position);
  }
  std::vector<double> y_values;
  for (double value = y.begin; value <= y.end + y.step / 2; value += y.step) {
    y_values.push_back(value);
  }

  svg += "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  for (double x : x_values) {
    svg += "<line x1=\"" + number(x_of(x)) + "\" y1=\"" + number(plot_top) + "\" x2=\"" +
           number(x_of(x)) + "\" y2=\"" + number(plot_bottom) + "\"/>\n";
  }
  for (double value : y_values) {
    svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(y_of(value)) + "\" x2=\"" +
           number(kLeft + kPlotWidth) + "\" y2=\"" + number(y_of(value)) + "\"/>\n";
  }
  svg += "</g>\n<g fill=\"#333333\">\n";
  for (double x : x_values) {
    svg += "<text class=\"x-tick\" x=\"" + number(x_of(x)) + "\" y=\"" + number(plot_bottom + 18) +
           "\" text-anchor=\"middle\">" + position_text(x) + "</text>\n";
  }
  for (double value : y_values) {
    svg += "<text class=\"y-tick\" x=\"" + number(kLeft - 8) + "\" y=\"" + number(y_of(value) + 4) +
           "\" text-anchor=\"end\">" + tick_label(value, y.step) + "</text>\n";
  }
  svg += "</g>\n";

  svg += "<g stroke=\"#333333\" stroke-width=\"1.5\">\n";
  svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(plot_bottom) + "\" x2=\"" +
         number(kLeft + kPlotWidth) + "\" y2=\"" + number(plot_bottom) + "\"/>\n";
  svg += "<line x1=\"" + number(kLeft) + "\" y1=\"" + number(plot_top) + "\" x2=\"" +
         number(kLeft) + "\" y2=\"" + number(plot_bottom) + "\"/>\n";
  svg += "</g>\n";
  svg += "<text x=\"" + number(kLeft + kPlotWidth / 2) + "\" y=\"" + number(plot_bottom + 40) +
         "\" text-anchor=\"middle\">position of the decoded token (tokens already in the KV "
         "cache)</text>\n";
  svg += "<text transform=\"translate(24 " + number(plot_top + kPlotHeight / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">ms per decode step (median)</text>\n";

  // The lines, clipped at the top; a run of consecutive clipped points gets one marker.
  std::vector<ClippedMarker> clipped;
  for (const PlotSeries& line : panel.series) {
    const char* color = kColors[index_of(caches, line.kv_cache) % std::size(kColors)];
    std::string points;
    bool in_clipped_run = false;
    for (const auto& [position, ms] : line.points) {
      if (!points.empty()) points += ' ';
      points += number(x_of(position)) + "," + number(y_of(ms));
      if (ms <= y.end) {
        in_clipped_run = false;
      } else if (!in_clipped_run) {
        clipped.push_back({x_of(position), ms, color, false});
        in_clipped_run = true;
      } else if (ms > clipped.back().ms) {
        clipped.back().x = x_of(position);
        clipped.back().ms = ms;
      }
    }
    std::string label = line.kv_cache + " \u00b7 " + path_file_name(line.prompt);
    svg += std::string("<polyline fill=\"none\" stroke=\"") + color +
           "\" stroke-width=\"1.5\" stroke-linejoin=\"round\" points=\"" + points + "\"><title>" +
           escape_xml(label) + "</title></polyline>\n";
  }
  for (const FirstStep& first : panel.first_steps) {
    const char* color = kColors[index_of(caches, first.kv_cache) % std::size(kColors)];
    if (first.ms > y.end) {
      clipped.push_back({x_of(first.position), first.ms, color, true});
      continue;
    }
    svg += std::string("<circle class=\"first-step\" cx=\"") + number(x_of(first.position)) +
           "\" cy=\"" + number(y_of(first.ms)) + "\" r=\"3.5\" fill=\"white\" stroke=\"" + color +
           "\" stroke-width=\"1.5\"><title>" + escape_xml(first.kv_cache) + ", run " +
           std::to_string(first.run) + ", first step: " + format_fixed(first.ms, 1) +
           " ms</title></circle>\n";
  }

  // Clipped values: labels go down a row where they would overlap the one before.
  std::stable_sort(clipped.begin(), clipped.end(),
                   [](const ClippedMarker& a, const ClippedMarker& b) { return a.x < b.x; });
  std::vector<double> row_ends;
  for (const ClippedMarker& marker : clipped) {
    size_t row = 0;
    while (row < row_ends.size() && marker.x < row_ends[row] + kLabelGap) ++row;
    if (row == row_ends.size()) row_ends.push_back(0);
    row_ends[row] = marker.x;
    std::string triangle = number(marker.x) + "," + number(plot_top) + " " +
                           number(marker.x - 4.5) + "," + number(plot_top + 8) + " " +
                           number(marker.x + 4.5) + "," + number(plot_top + 8);
    std::string fill = marker.first_step ? "white" : marker.color;
    svg += std::string("<polygon class=\"clipped") + (marker.first_step ? " first-step" : "") +
           "\" points=\"" + triangle + "\" fill=\"" + fill + "\" stroke=\"" + marker.color +
           "\" stroke-width=\"1.5\"/>\n";
    double label_x = std::min(marker.x + 7, kLeft + kPlotWidth - 2);
    svg += std::string("<text class=\"clipped-value\" x=\"") + number(label_x) + "\" y=\"" +
           number(plot_top + 10 + 12 * static_cast<double>(row)) + "\" font-size=\"10\" fill=\"" +
           marker.color + "\"" + (label_x < marker.x + 7 ? " text-anchor=\"end\"" : "") + ">" +
           format_fixed(marker.ms, 1) + "</text>\n";
  }
  svg += "</g>\n";
  return svg;
}

// One entry per cache (colour), then the two kinds of marker.
std::string render_legend(const std::vector<std::string>& caches, double y) {
  std::string svg = "<g class=\"legend\">\n";
  double x = kLeft;
  for (size_t i = 0; i < caches.size(); ++i) {
    const char* color = kColors[i % std::size(kColors)];
    svg += std::string("<line x1=\"") + number(x) + "\" y1=\"" + number(y - 4) + "\" x2=\"" +
           number(x + 24) + "\" y2=\"" + number(y - 4) + "\" stroke=\"" + color +
           "\" stroke-width=\"2.5\"/>\n";
    svg += "<text x=\"" + number(x + 30) + "\" y=\"" + number(y) + "\">" + escape_xml(caches[i]) +
           "</text>\n";
    x += 30 + 7.5 * static_cast<double>(caches[i].size()) + 24;
  }
  svg += "</g>\n<g class=\"legend-markers\" fill=\"#333333\">\n";
  x += 8;
  svg += "<circle cx=\"" + number(x + 4) + "\" cy=\"" + number(y - 4) +
         "\" r=\"3.5\" fill=\"white\" stroke=\"#333333\" stroke-width=\"1.5\"/>\n";
  svg += "<text x=\"" + number(x + 14) + "\" y=\"" + number(y) + "\">first step of a run</text>\n";
  x += 14 + 7 * 19 + 24;
  svg += "<polygon points=\"" + number(x + 4) + "," + number(y - 9) + " " + number(x - 0.5) + "," +
         number(y - 1) + " " + number(x + 8.5) + "," + number(y - 1) + "\"/>\n";
  svg += "<text x=\"" + number(x + 14) + "\" y=\"" + number(y) +
         "\">above the axis, with its ms (hollow: a first step)</text>\n";
  svg += "</g>\n";
  return svg;
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

std::vector<PlotPanel> plot_panels(const std::vector<StepRecord>& steps) {
  std::vector<std::string> prompts;
  std::vector<PlotPanel> panels;
  std::vector<StepRecord> later_steps;
  for (const StepRecord& step : steps) {
    size_t index = index_of(prompts, step.prompt);
    if (index == panels.size()) {
      panels.push_back(PlotPanel{step.prompt, INFINITY, -INFINITY, {}, {}, {}});
    }
    PlotPanel& panel = panels[index];
    double position = static_cast<double>(step.position);
    panel.first_position = std::min(panel.first_position, position);
    panel.last_position = std::max(panel.last_position, position);
    if (step.step == 0) {
      panel.first_steps.push_back({step.kv_cache, step.run, position, step.ms});
    } else {
      later_steps.push_back(step);
    }
  }
  for (PlotSeries& line : plot_series(later_steps)) {
    panels[index_of(prompts, line.prompt)].series.push_back(std::move(line));
  }
  for (PlotPanel& panel : panels) panel.y = steady_state_range(panel);
  return panels;
}

std::string render_step_plot(const std::vector<StepRecord>& steps, const std::string& title) {
  std::vector<PlotPanel> panels = plot_panels(steps);
  std::vector<std::string> title_lines = wrap_title(title, kTitleLineChars);
  const double legend_y = 28 + kTitleLineHeight * static_cast<double>(title_lines.size());
  const double panels_top = legend_y + kLegendHeight - 12;
  const double height =
      panels_top +
      (panels.empty() ? kEmptyHeight : kPanelHeight * static_cast<double>(panels.size()));

  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(kWidth) + "\" height=\"" +
         number(height) + "\" viewBox=\"0 0 " + number(kWidth) + " " + number(height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text class=\"title\" x=\"" + number(kLeft) + "\" y=\"28\" font-size=\"16\">";
  for (size_t i = 0; i < title_lines.size(); ++i) {
    svg += "<tspan x=\"" + number(kLeft) + "\" dy=\"" + (i == 0 ? "0" : number(kTitleLineHeight)) +
           "\">" + escape_xml(title_lines[i]) + "</tspan>";
  }
  svg += "</text>\n";

  std::vector<std::string> caches;  // Colours follow the caches' first appearance.
  std::string body;
  for (size_t i = 0; i < panels.size(); ++i) {
    body += render_panel(panels[i], panels_top + kPanelHeight * static_cast<double>(i), caches);
  }
  if (panels.empty()) {
    body += "<text x=\"" + number(kLeft + kPlotWidth / 2) + "\" y=\"" +
            number(panels_top + kEmptyHeight / 2) +
            "\" text-anchor=\"middle\">no decode steps</text>\n";
  }
  if (!panels.empty()) svg += render_legend(caches, legend_y);
  svg += body + "</svg>\n";
  return svg;
}

}  // namespace fornace::bench
