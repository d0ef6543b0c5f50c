// Tests of the bench plot's layout: a panel per model and prompt, a legend entry per attention
// path and cache, steady-state y axes, marked outliers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

// The definitions are compiled into this executable by bench_units_test.cpp.
#include "../../tools/fornace-bench/machine.h"
#include "../../tools/fornace-bench/records.h"
#include "../../tools/fornace-bench/svg_plot.h"

namespace fornace::bench {
namespace {

// Steps of two caches and three runs over four positions after a prompt of `prompt_tokens`,
// with `ms(cache_index, run, step)` for each.
template <typename Milliseconds>
void add_steps(std::vector<StepRecord>& steps, const std::string& prompt, int64_t prompt_tokens,
               int64_t step_count, Milliseconds ms) {
  const char* caches[] = {"cat", "prealloc"};
  for (int cache = 0; cache < 2; ++cache) {
    for (int64_t run = 1; run <= 3; ++run) {
      for (int64_t step = 0; step < step_count; ++step) {
        StepRecord record;
        record.kv_cache = caches[cache];
        record.prompt = prompt;
        record.run = run;
        record.step = step;
        record.position = prompt_tokens + step;
        record.ms = ms(cache, run, step);
        steps.push_back(record);
      }
    }
  }
}

std::vector<StepRecord> two_prompt_steps() {
  std::vector<StepRecord> steps;
  auto steady = [](int cache, int64_t run, int64_t step) {
    return 20.0 + cache + 0.25 * static_cast<double>(run) + 0.01 * static_cast<double>(step);
  };
  add_steps(steps, "bench/prompts/alice-512.txt", 513, 127, steady);
  add_steps(steps, "bench/prompts/alice-2048.txt", 2049, 127, steady);
  return steps;
}

// The parts of `svg` that open with `<g class="panel"`, each up to the next.
std::vector<std::string> panel_texts(const std::string& svg) {
  const std::string opening = "<g class=\"panel\"";
  std::vector<std::string> panels;
  size_t begin = svg.find(opening);
  while (begin != std::string::npos) {
    size_t next = svg.find(opening, begin + opening.size());
    panels.push_back(svg.substr(begin, next == std::string::npos ? next : next - begin));
    begin = next;
  }
  return panels;
}

// The numbers of the elements with `class="<name>"` in `text`, thousands separators dropped.
std::vector<double> labelled_values(const std::string& text, const std::string& name) {
  std::vector<double> values;
  const std::string marker = "class=\"" + name + "\"";
  for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) {
    size_t begin = text.find('>', at) + 1;
    std::string label = text.substr(begin, text.find('<', begin) - begin);
    std::erase(label, ',');
    values.push_back(std::stod(label));
  }
  return values;
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

// The legend's group of line entries (the markers are a group of their own); empty if none.
std::string legend_entries(const std::string& svg) {
  size_t legend = svg.find("<g class=\"legend\">");
  if (legend == std::string::npos) return "";
  return svg.substr(legend, svg.find("</g>", legend) - legend);
}

TEST(BenchPlotPanels, OnePanelPerPromptSpanningOnlyThatPromptsPositions) {
  std::vector<PlotPanel> panels = plot_panels(two_prompt_steps());
  ASSERT_EQ(panels.size(), 2u);
  EXPECT_EQ(panels[0].prompt, "bench/prompts/alice-512.txt");
  EXPECT_DOUBLE_EQ(panels[0].first_position, 513);
  EXPECT_DOUBLE_EQ(panels[0].last_position, 639);
  EXPECT_EQ(panels[1].prompt, "bench/prompts/alice-2048.txt");
  EXPECT_DOUBLE_EQ(panels[1].first_position, 2049);
  EXPECT_DOUBLE_EQ(panels[1].last_position, 2175);
  for (const PlotPanel& panel : panels) {
    ASSERT_EQ(panel.series.size(), 2u);
    EXPECT_EQ(panel.series[0].kv_cache, "cat");
    EXPECT_EQ(panel.series[1].kv_cache, "prealloc");
    for (const PlotSeries& line : panel.series) EXPECT_EQ(line.prompt, panel.prompt);
    EXPECT_EQ(panel.first_steps.size(), 6u);  // Two caches, three runs.
  }
}

TEST(BenchPlotPanels, SvgDrawsEachPromptOnItsOwnXAxis) {
  std::string svg = render_step_plot(two_prompt_steps(), "title");
  std::vector<std::string> panels = panel_texts(svg);
  ASSERT_EQ(panels.size(), 2u);
  const double ranges[2][2] = {{513, 639}, {2049, 2175}};
  for (size_t i = 0; i < panels.size(); ++i) {
    std::vector<double> ticks = labelled_values(panels[i], "x-tick");
    ASSERT_GE(ticks.size(), 3u) << panels[i];
    EXPECT_DOUBLE_EQ(ticks.front(), ranges[i][0]);
    EXPECT_DOUBLE_EQ(ticks.back(), ranges[i][1]);
    for (double tick : ticks) {
      EXPECT_GE(tick, ranges[i][0]);
      EXPECT_LE(tick, ranges[i][1]);
    }
    EXPECT_EQ(count_of(panels[i], "<polyline"), 2u);
  }
  EXPECT_NE(panels[0].find("alice-512.txt \u00b7 513-token prompt"), std::string::npos);
  EXPECT_NE(panels[1].find("alice-2048.txt \u00b7 2,049-token prompt"), std::string::npos);
}

TEST(BenchPlotPanels, YAxisFollowsTheSteadyStateAndSpikesAreClippedWithTheirValue) {
  std::vector<StepRecord> steps;
  // Steady near 20-22 ms; every first step takes 60 ms, and step 50 of every run takes 80 ms.
  add_steps(steps, "p.txt", 513, 127, [](int cache, int64_t, int64_t step) {
    if (step == 0) return 60.0;
    if (step == 50) return 80.0;
    return 20.0 + cache + 0.01 * static_cast<double>(step);
  });
  std::vector<PlotPanel> panels = plot_panels(steps);
  ASSERT_EQ(panels.size(), 1u);
  EXPECT_GE(panels[0].y.end, 22.27);  // The steady state fits.
  EXPECT_LE(panels[0].y.end, 30);     // The spikes do not stretch the axis.
  EXPECT_GT(panels[0].y.begin, 0);    // Zoomed in on 20-22 ms.

  std::string svg = render_step_plot(steps, "title");
  // Step 50 of each cache's median line, and the six first steps (hollow).
  EXPECT_EQ(count_of(svg, "class=\"clipped\""), 2u);
  EXPECT_EQ(count_of(svg, "class=\"clipped first-step\""), 6u);
  std::vector<double> values = labelled_values(svg, "clipped-value");
  EXPECT_EQ(std::count(values.begin(), values.end(), 80.0), 2);
  EXPECT_EQ(std::count(values.begin(), values.end(), 60.0), 6);
}

TEST(BenchPlotPanels, FirstStepOfEveryRunIsAMarkerOfItsOwn) {
  std::string svg = render_step_plot(two_prompt_steps(), "title");
  for (const std::string& panel : panel_texts(svg)) {
    EXPECT_EQ(count_of(panel, "<circle class=\"first-step\""), 6u);
    EXPECT_EQ(count_of(panel, "class=\"clipped"), 0u);  // Nothing here stands out.
  }
}

TEST(BenchPlotPanels, LegendHasOneEntryPerCacheKindAndTheMarkers) {
  std::string svg = render_step_plot(two_prompt_steps(), "title");
  std::string entries = legend_entries(svg);
  EXPECT_EQ(count_of(entries, "<text"), 2u);
  EXPECT_NE(entries.find(">cat<"), std::string::npos);
  EXPECT_NE(entries.find(">prealloc<"), std::string::npos);
  EXPECT_NE(svg.find("first step of a run"), std::string::npos);
}

TEST(BenchPlotPanels, TitleNamesTheCpuFamilyAndModelAndWrapsWhenLong) {
  BenchContext context;
  context.cpu = "AMD EPYC 9R14 96-Core Processor";
  context.cpu_family = "25";
  context.cpu_model = "17";
  std::string title =
      "fornace-bench 2026-11-29, commit abc1234, bf16, 2 threads, " + cpu_description(context);
  std::string svg = render_step_plot(two_prompt_steps(), title);
  size_t begin = svg.find("<text class=\"title\"");
  ASSERT_NE(begin, std::string::npos);
  std::string title_text = svg.substr(begin, svg.find("</text>", begin) - begin);
  // Too long for one line, it breaks after a comma but not inside the parentheses.
  EXPECT_EQ(count_of(title_text, "<tspan"), 2u);
  EXPECT_NE(title_text.find(">AMD EPYC 9R14 96-Core Processor (family 25, model 17)</tspan>"),
            std::string::npos);
}

// Two models, both attention paths, the caches of add_steps, one prompt.
std::vector<StepRecord> two_model_two_path_steps() {
  std::vector<StepRecord> steps;
  for (const char* model : {"tiny", "tiny-llama"}) {
    for (const char* attention : {"fused", "candle"}) {
      std::vector<StepRecord> part;
      add_steps(part, "p.ids", 10, 20, [](int cache, int64_t run, int64_t) {
        return 5.0 + cache + 0.1 * static_cast<double>(run);
      });
      for (StepRecord& step : part) {
        step.model = model;
        step.attention = attention;
        steps.push_back(step);
      }
    }
  }
  return steps;
}

// The value of `name="..."` in the first element of `text` that has it.
std::string attribute(const std::string& text, const std::string& name) {
  size_t at = text.find(" " + name + "=\"");
  if (at == std::string::npos) return "";
  size_t begin = at + name.size() + 3;
  return text.substr(begin, text.find('"', begin) - begin);
}

TEST(BenchPlotPanels, OnePanelPerModelAndPromptWithALinePerPathAndCache) {
  std::vector<PlotPanel> panels = plot_panels(two_model_two_path_steps());
  ASSERT_EQ(panels.size(), 2u);
  EXPECT_EQ(panels[0].model, "tiny");
  EXPECT_EQ(panels[1].model, "tiny-llama");
  for (const PlotPanel& panel : panels) {
    EXPECT_EQ(panel.prompt, "p.ids");
    ASSERT_EQ(panel.series.size(), 4u);
    EXPECT_EQ(panel.series[2].attention + " " + panel.series[2].kv_cache, "candle cat");
    for (const PlotSeries& line : panel.series) EXPECT_EQ(line.model, panel.model);
    EXPECT_EQ(panel.first_steps.size(), 12u);  // Two paths, two caches, three runs.
  }
  std::string svg = render_step_plot(two_model_two_path_steps(), "title");
  std::vector<std::string> texts = panel_texts(svg);
  ASSERT_EQ(texts.size(), 2u);
  EXPECT_NE(texts[1].find("data-model=\"tiny-llama\""), std::string::npos);
  EXPECT_NE(texts[1].find("tiny-llama \u00b7 p.ids \u00b7 10-token prompt"), std::string::npos);
  EXPECT_EQ(count_of(texts[0], "<polyline"), 4u);
}

TEST(BenchPlotPanels, LegendHasAnEntryPerPathAndCacheAndAPathKeepsItsDashes) {
  std::string svg = render_step_plot(two_model_two_path_steps(), "title");
  std::string entries = legend_entries(svg);
  EXPECT_EQ(count_of(entries, "<text"), 4u);
  for (const char* label : {">fused \u00b7 cat<", ">fused \u00b7 prealloc<", ">candle \u00b7 cat<",
                            ">candle \u00b7 prealloc<"}) {
    EXPECT_NE(entries.find(label), std::string::npos) << label;
  }
  // A cache has one colour on both paths; the candle lines are dashed, the fused ones solid.
  std::string panel = panel_texts(svg)[0];
  auto line_of = [&](const std::string& title) {
    size_t end = panel.find("<title>" + title);
    return panel.substr(panel.rfind("<polyline", end), end - panel.rfind("<polyline", end));
  };
  std::string fused_cat = line_of("tiny \u00b7 fused \u00b7 cat \u00b7 p.ids");
  std::string candle_cat = line_of("tiny \u00b7 candle \u00b7 cat \u00b7 p.ids");
  std::string candle_prealloc = line_of("tiny \u00b7 candle \u00b7 prealloc \u00b7 p.ids");
  EXPECT_EQ(attribute(fused_cat, "stroke"), attribute(candle_cat, "stroke"));
  EXPECT_NE(attribute(candle_cat, "stroke"), attribute(candle_prealloc, "stroke"));
  EXPECT_EQ(attribute(fused_cat, "stroke-dasharray"), "");
  EXPECT_NE(attribute(candle_cat, "stroke-dasharray"), "");
  // Each path's entries fill a row of their own, and the markers one more, above the panels.
  std::vector<double> rows;
  const size_t legend = svg.find("<g class=\"legend\">");
  for (size_t at = svg.find("<text x=", legend); at < svg.find("<g class=\"panel\"");
       at = svg.find("<text x=", at + 1)) {
    double y = std::stod(attribute(svg.substr(at), "y"));
    if (std::find(rows.begin(), rows.end(), y) == rows.end()) rows.push_back(y);
  }
  EXPECT_EQ(rows.size(), 3u);
}

TEST(BenchMachine, CpuIdentityComesFromTheFirstProcessor) {
  std::string cpuinfo =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
      "model name\t: AMD EPYC 9R14 96-Core Processor\nstepping\t: 1\n\n"
      "processor\t: 1\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: Other\n";
  CpuIdentity identity = parse_cpu_identity(cpuinfo);
  EXPECT_EQ(identity.model_name, "AMD EPYC 9R14 96-Core Processor");
  EXPECT_EQ(identity.family, "25");
  EXPECT_EQ(identity.model, "17");
  CpuIdentity bare = parse_cpu_identity("processor\t: 0\nBogoMIPS\t: 50.00\n");
  EXPECT_EQ(bare.model_name, "unknown");
  EXPECT_EQ(bare.family, "");
  EXPECT_EQ(bare.model, "");
}

}  // namespace
}  // namespace fornace::bench
