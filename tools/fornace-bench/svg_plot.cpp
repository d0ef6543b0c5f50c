// Renders ms per decode step against position as a self-contained SVG, one panel per model and
// prompt.
#include "svg_plot.h"

#include <algorithm>
#include <array>
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
constexpr double kLegendRowHeight = 18;
constexpr double kLegendMargin = 10;  // A legend row may reach this close to the right edge.
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
// Attention paths in order of first appearance: solid, dashed, dotted.
const char* const kDashes[] = {"", "7 4", "2 3", "9 3 2 3"};

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

// The colour of each cache and the dash pattern of each attention path, and which (path, cache)
// pairs the legend lists, all in order of first appearance in the panels.
struct LineStyles {
  std::vector<std::string> kv_caches;
  std::vector<std::string> attentions;
  std::vector<std::pair<std::string, std::string>> entries;  // (attention, cache)

  explicit LineStyles(const std::vector<PlotPanel>& panels) {
    for (const PlotPanel& panel : panels) {
      for (const PlotSeries& line : panel.series) add(line.attention, line.kv_cache);
      for (const FirstStep& first : panel.first_steps) add(first.attention, first.kv_cache);
    }
    // Grouped by path, so that a legend row holds one path's caches.
    std::stable_sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) {
      return index_of(attentions, a.first) < index_of(attentions, b.first);
    });
  }
  void add(const std::string& attention, const std::string& kv_cache) {
    index_of(kv_caches, kv_cache);
    index_of(attentions, attention);
    index_of(entries, std::pair(attention, kv_cache));
  }
  const char* color(const std::string& kv_cache) {
    return kColors[index_of(kv_caches, kv_cache) % std::size(kColors)];
  }
  // The stroke-dasharray attribute of a path's lines, empty for the first (solid).
  std::string dash_attribute(const std::string& attention) {
    const char* dash = kDashes[index_of(attentions, attention) % std::size(kDashes)];
    return *dash ? std::string(" stroke-dasharray=\"") + dash + "\"" : std::string();
  }
  // Names the path too unless fused is the only one (so one-path plots read as they always did).
  bool names_attention() const { return !(attentions.size() == 1 && attentions[0] == "fused"); }
  std::string label(const std::string& attention, const std::string& kv_cache) const {
    return names_attention() ? attention + " \u00b7 " + kv_cache : kv_cache;
  }
};

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

std::string render_panel(const PlotPanel& panel, double top, LineStyles& styles) {
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

  std::string svg = "<g class=\"panel\" data-model=\"" + escape_xml(panel.model) +
                    "\" data-prompt=\"" + escape_xml(panel.prompt) + "\" data-first-position=\"" +
                    format_fixed(panel.first_position, 0) + "\" data-last-position=\"" +
                    format_fixed(panel.last_position, 0) + "\">\n";
  const std::string model_prefix = panel.model.empty() ? "" : panel.model + " \u00b7 ";
  std::string heading = model_prefix + path_file_name(panel.prompt);
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
      // Positions are whole numbers: a step below one would repeat labels.
      if (x - panel.first_position >= x_ticks.step / 2 &&
          panel.last_position - x >= x_ticks.step / 2 && x == std::floor(x)) {
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
    const char* color = styles.color(line.kv_cache);
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
    std::string label = model_prefix + styles.label(line.attention, line.kv_cache) + " \u00b7 " +
                        path_file_name(line.prompt);
    svg += std::string("<polyline fill=\"none\" stroke=\"") + color + "\"" +
           styles.dash_attribute(line.attention) +
           " stroke-width=\"1.5\" stroke-linejoin=\"round\" points=\"" + points + "\"><title>" +
           escape_xml(label) + "</title></polyline>\n";
  }
  for (const FirstStep& first : panel.first_steps) {
    const char* color = styles.color(first.kv_cache);
    if (first.ms > y.end) {
      clipped.push_back({x_of(first.position), first.ms, color, true});
      continue;
    }
    svg += std::string("<circle class=\"first-step\" cx=\"") + number(x_of(first.position)) +
           "\" cy=\"" + number(y_of(first.ms)) + "\" r=\"3.5\" fill=\"white\" stroke=\"" + color +
           "\" stroke-width=\"1.5\"><title>" +
           escape_xml(styles.label(first.attention, first.kv_cache)) + ", run " +
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

// Places legend items left to right from the plot's left edge, wrapping to a new row where one
// would pass the right edge; a new path starts a new row.
class LegendLayout {
 public:
  explicit LegendLayout(double first_row_y) : y_(first_row_y) {}
  // The x of an item `width` wide, wrapping first if needed (or if `new_row`).
  double place(double width, bool new_row = false) {
    if (x_ > kLeft && (new_row || x_ + width > kWidth - kLegendMargin)) {
      x_ = kLeft;
      y_ += kLegendRowHeight;
      ++rows_;
    }
    double at = x_;
    x_ += width;
    return at;
  }
  double y() const { return y_; }
  int rows() const { return rows_; }

 private:
  double x_ = kLeft;
  double y_;
  int rows_ = 1;
};

// Width of a label at the legend's 12 px, about 6.5 px a character in a sans-serif font.
double text_width(const std::string& text) { return 6.5 * static_cast<double>(text.size()); }

// One entry per (attention path, cache): a line in its colour and dash pattern; then the two kinds
// of marker. Returns the SVG and sets `rows` to the rows it takes.
std::string render_legend(LineStyles& styles, double y, int& rows) {
  LegendLayout layout(y);
  std::string svg = "<g class=\"legend\">\n";
  std::string previous_attention;
  for (const auto& [attention, kv_cache] : styles.entries) {
    std::string label = styles.label(attention, kv_cache);
    bool new_path =
        styles.names_attention() && !previous_attention.empty() && attention != previous_attention;
    previous_attention = attention;
    double x = layout.place(30 + text_width(label) + 24, new_path);
    double row_y = layout.y();
    svg += std::string("<line x1=\"") + number(x) + "\" y1=\"" + number(row_y - 4) + "\" x2=\"" +
           number(x + 24) + "\" y2=\"" + number(row_y - 4) + "\" stroke=\"" +
           styles.color(kv_cache) + "\"" + styles.dash_attribute(attention) +
           " stroke-width=\"2.5\"/>\n";
    svg += "<text x=\"" + number(x + 30) + "\" y=\"" + number(row_y) + "\">" + escape_xml(label) +
           "</text>\n";
  }
  svg += "</g>\n<g class=\"legend-markers\" fill=\"#333333\">\n";
  // Under a legend of several paths, the markers take a row of their own.
  const std::string first_label = "first step of a run";
  double x = layout.place(8 + 14 + text_width(first_label) + 24, layout.rows() > 1) + 8;
  double row_y = layout.y();
  svg += "<circle cx=\"" + number(x + 4) + "\" cy=\"" + number(row_y - 4) +
         "\" r=\"3.5\" fill=\"white\" stroke=\"#333333\" stroke-width=\"1.5\"/>\n";
  svg +=
      "<text x=\"" + number(x + 14) + "\" y=\"" + number(row_y) + "\">" + first_label + "</text>\n";
  const std::string clipped_label = "above the axis, with its ms (hollow: a first step)";
  x = layout.place(14 + text_width(clipped_label));
  row_y = layout.y();
  svg += "<polygon points=\"" + number(x + 4) + "," + number(row_y - 9) + " " + number(x - 0.5) +
         "," + number(row_y - 1) + " " + number(x + 8.5) + "," + number(row_y - 1) + "\"/>\n";
  svg += "<text x=\"" + number(x + 14) + "\" y=\"" + number(row_y) + "\">" + clipped_label +
         "</text>\n";
  svg += "</g>\n";
  rows = layout.rows();
  return svg;
}

}  // namespace

std::vector<PlotSeries> plot_series(const std::vector<StepRecord>& steps) {
  const bool with_type = several_cache_types(steps);
  std::vector<std::array<std::string, 4>> keys;                // model, attention, cache, prompt
  std::vector<std::map<int64_t, std::vector<double>>> values;  // Per series: position -> ms.
  for (const StepRecord& step : steps) {
    size_t index =
        index_of(keys, {step.model, step.attention, cache_label(step, with_type), step.prompt});
    if (index == values.size()) values.emplace_back();
    values[index][step.position].push_back(step.ms);
  }
  std::vector<PlotSeries> series;
  for (size_t i = 0; i < keys.size(); ++i) {
    PlotSeries line{keys[i][0], keys[i][1], keys[i][2], keys[i][3], {}};
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
  const bool with_type = several_cache_types(steps);
  std::vector<std::pair<std::string, std::string>> keys;  // (model, prompt) of each panel
  std::vector<PlotPanel> panels;
  std::vector<StepRecord> later_steps;
  for (const StepRecord& step : steps) {
    size_t index = index_of(keys, {step.model, step.prompt});
    if (index == panels.size()) {
      panels.push_back(PlotPanel{step.model, step.prompt, INFINITY, -INFINITY, {}, {}, {}});
    }
    PlotPanel& panel = panels[index];
    double position = static_cast<double>(step.position);
    panel.first_position = std::min(panel.first_position, position);
    panel.last_position = std::max(panel.last_position, position);
    if (step.step == 0) {
      panel.first_steps.push_back(
          {step.attention, cache_label(step, with_type), step.run, position, step.ms});
    } else {
      later_steps.push_back(step);
    }
  }
  for (PlotSeries& line : plot_series(later_steps)) {
    panels[index_of(keys, {line.model, line.prompt})].series.push_back(std::move(line));
  }
  for (PlotPanel& panel : panels) panel.y = steady_state_range(panel);
  return panels;
}

std::string render_step_plot(const std::vector<StepRecord>& steps, const std::string& title) {
  std::vector<PlotPanel> panels = plot_panels(steps);
  std::vector<std::string> title_lines = wrap_title(title, kTitleLineChars);
  const double legend_y = 28 + kTitleLineHeight * static_cast<double>(title_lines.size());
  LineStyles styles(panels);
  int legend_rows = 0;
  std::string legend = render_legend(styles, legend_y, legend_rows);
  const double panels_top = legend_y + kLegendRowHeight * legend_rows;
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

  std::string body;
  for (size_t i = 0; i < panels.size(); ++i) {
    body += render_panel(panels[i], panels_top + kPanelHeight * static_cast<double>(i), styles);
  }
  if (panels.empty()) {
    body += "<text x=\"" + number(kLeft + kPlotWidth / 2) + "\" y=\"" +
            number(panels_top + kEmptyHeight / 2) +
            "\" text-anchor=\"middle\">no decode steps</text>\n";
  }
  if (!panels.empty()) svg += legend;
  svg += body + "</svg>\n";
  return svg;
}

}  // namespace fornace::bench
