// Summary tables: per model and prompt, a row per attention path and cache with tok/s of each
// run, their mean, ranges, strided copies and the roofline.
#include "summary.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "roofs/probes.h"
#include "format.h"
#include "stats.h"

namespace fornace::bench {
namespace {

// The instruction of the GEMM peak, by the level the kernels line names ("isa avx2; ...") and
// whether its bf16 GEMM ran on AMX tiles: vdpbf16ps for files without one, which measured it
// alone.
std::string peak_instruction(const BenchContext& context) {
  const std::string prefix = "isa ";
  if (context.kernels.rfind(prefix, 0) == 0) {
    const std::string level =
        context.kernels.substr(prefix.size(), context.kernels.find(';') - prefix.size());
    try {
      return roofs::gemm_peak_name(cpu::parse_isa(level.c_str()),
                                   context.kernels.find(" on AMX tiles") != std::string::npos);
    } catch (const Error&) {
    }
  }
  return "vdpbf16ps";
}

// Characters on screen: UTF-8 continuation bytes do not count.
size_t display_width(const std::string& text) {
  size_t width = 0;
  for (unsigned char byte : text) width += (byte & 0xC0) != 0x80;
  return width;
}

std::string markdown_table(const std::vector<std::string>& header,
                           const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(header.size(), 3);
  auto widen = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i)
      widths[i] = std::max(widths[i], display_width(cells[i]));
  };
  widen(header);
  for (const auto& row : rows) widen(row);
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text = "|";
    for (size_t i = 0; i < cells.size(); ++i) {
      text += " " + cells[i] + std::string(widths[i] - display_width(cells[i]), ' ') + " |";
    }
    return text + "\n";
  };
  std::string text = line(header);
  std::vector<std::string> rule;
  for (size_t width : widths) rule.push_back(std::string(width, '-'));
  text += line(rule);
  for (const auto& row : rows) text += line(row);
  return text;
}

}  // namespace

double bytes_read_per_token(const RunRecord& run) {
  if (run.kv_bytes_per_token > 0) {
    return static_cast<double>(run.weight_bytes) + run.kv_bytes_per_token;
  }
  // Older files: step i reads prompt_tokens + i + 1 positions of every layer, so the mean over
  // the steps is prompt_tokens + (steps + 1) / 2.
  double mean_positions =
      static_cast<double>(run.prompt_tokens) + static_cast<double>(run.decode_steps + 1) / 2.0;
  return static_cast<double>(run.weight_bytes) +
         static_cast<double>(run.kv_bytes_per_position) * mean_positions;
}

std::vector<PromptSummary> summarize_runs(const BenchData& data) {
  const bool with_type = several_cache_types(data.runs);
  std::vector<PromptSummary> prompts;
  std::vector<std::vector<std::vector<const RunRecord*>>> grouped;  // [table][row][run]
  for (const RunRecord& run : data.runs) {
    auto prompt = std::find_if(prompts.begin(), prompts.end(), [&](const PromptSummary& p) {
      return p.model == run.model && p.prompt == run.prompt;
    });
    if (prompt == prompts.end()) {
      prompts.push_back(
          PromptSummary{run.model, run.prompt, run.prompt_tokens, run.decode_steps + 1, {}});
      grouped.emplace_back();
      prompt = prompts.end() - 1;
    }
    size_t prompt_index = static_cast<size_t>(prompt - prompts.begin());
    auto cache =
        std::find_if(prompt->caches.begin(), prompt->caches.end(), [&](const CacheSummary& c) {
          return c.attention == run.attention && c.kv_cache == cache_label(run, with_type);
        });
    if (cache == prompt->caches.end()) {
      prompt->caches.push_back(CacheSummary{});
      prompt->caches.back().attention = run.attention;
      prompt->caches.back().kv_cache = cache_label(run, with_type);
      grouped[prompt_index].emplace_back();
      cache = prompt->caches.end() - 1;
    }
    grouped[prompt_index][static_cast<size_t>(cache - prompt->caches.begin())].push_back(&run);
  }
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (size_t c = 0; c < prompts[p].caches.size(); ++c) {
      CacheSummary& summary = prompts[p].caches[c];
      std::vector<const RunRecord*>& runs = grouped[p][c];
      std::stable_sort(runs.begin(), runs.end(),
                       [](const RunRecord* a, const RunRecord* b) { return a->run < b->run; });
      std::vector<double> tok_s, mean_ms, peak, prefill, bytes, read_gbs, bandwidth_share,
          prefill_gflops, peak_share, strided_mib, bytes_per_run, linear_read_share,
          linear_peak_share;
      bool strided_recorded = true;
      for (const RunRecord* run : runs) {
        tok_s.push_back(run->decode_tok_s);
        mean_ms.push_back(run->mean_ms_last64);
        peak.push_back(run->peak_mib);
        prefill.push_back(run->prefill_ms > 0
                              ? 1000.0 * static_cast<double>(run->prompt_tokens) / run->prefill_ms
                              : 0.0);
        bytes.push_back(bytes_read_per_token(*run));
        double run_read_gbs = run->read_gbs > 0 ? run->read_gbs : data.context.read_gbs;
        read_gbs.push_back(run_read_gbs);
        if (run_read_gbs > 0) {
          bandwidth_share.push_back(100.0 * bytes.back() * run->decode_tok_s / 1e9 / run_read_gbs);
        }
        if (run_read_gbs > 0 && run->decode_linear_ms.value_or(0) > 0) {
          const double linear_gbs = static_cast<double>(run->weight_bytes) *
                                    static_cast<double>(run->decode_steps) /
                                    (*run->decode_linear_ms / 1000.0) / 1e9;
          linear_read_share.push_back(100.0 * linear_gbs / run_read_gbs);
        }
        double run_peak = run->peak_gflops > 0 ? run->peak_gflops : data.context.peak_gflops;
        if (run->prefill_gflop > 0 && run->prefill_ms > 0) {
          prefill_gflops.push_back(run->prefill_gflop / (run->prefill_ms / 1000.0));
          if (run_peak > 0) peak_share.push_back(100.0 * prefill_gflops.back() / run_peak);
        }
        if (run_peak > 0 && run->prefill_linear_gflop > 0 &&
            run->prefill_linear_ms.value_or(0) > 0) {
          linear_peak_share.push_back(100.0 * run->prefill_linear_gflop /
                                      (*run->prefill_linear_ms / 1000.0) / run_peak);
        }
        strided_recorded = strided_recorded && run->mean_strided_bytes_last64.has_value() &&
                           run->bytes_per_run_last64.has_value();
        if (strided_recorded) {
          strided_mib.push_back(*run->mean_strided_bytes_last64 / (1024.0 * 1024.0));
          bytes_per_run.push_back(*run->bytes_per_run_last64);
        }
      }
      if (strided_recorded) {
        summary.strided_mib_per_step = compute_stats(strided_mib).mean;
        summary.bytes_per_run = compute_stats(bytes_per_run).mean;
      }
      summary.decode_tok_s = tok_s;
      summary.mean_tok_s = compute_stats(tok_s).mean;
      Stats mean_ms_stats = compute_stats(mean_ms);
      summary.min_mean_ms_last64 = mean_ms_stats.min;
      summary.max_mean_ms_last64 = mean_ms_stats.max;
      Stats peak_stats = compute_stats(peak);
      summary.min_peak_mib = peak_stats.min;
      summary.max_peak_mib = peak_stats.max;
      summary.mean_prefill_tok_s = compute_stats(prefill).mean;
      summary.bytes_per_token = compute_stats(bytes).mean;
      summary.achieved_gbs = summary.bytes_per_token * summary.mean_tok_s / 1e9;
      Stats read_stats = compute_stats(read_gbs);
      summary.min_read_gbs = read_stats.min;
      summary.max_read_gbs = read_stats.max;
      summary.percent_of_bandwidth = compute_stats(bandwidth_share).mean;
      summary.mean_prefill_gflops = compute_stats(prefill_gflops).mean;
      summary.percent_of_peak = compute_stats(peak_share).mean;
      summary.linear_percent_of_read = compute_stats(linear_read_share).mean;
      summary.linear_percent_of_peak = compute_stats(linear_peak_share).mean;
    }
  }
  return prompts;
}

std::string format_tables(const BenchData& data) {
  // The machine first, so that tables from different machines compare.
  std::string text = "Machine: " + cpu_description(data.context) + ", " +
                     std::to_string(data.context.cores) + " cores\n" +
                     kernels_description(data.context) + "\n\n";
  auto percent = [](double value) {
    return value > 0 ? format_fixed(value, 0) + " %" : std::string("n/a");
  };
  auto if_recorded = [](const std::optional<double>& value, int decimals) {
    return value ? group_thousands(format_fixed(*value, decimals)) : std::string("n/a");
  };
  for (const PromptSummary& prompt : summarize_runs(data)) {
    text += "### " + (prompt.model.empty() ? "" : prompt.model + " \u00b7 ") +
            path_file_name(prompt.prompt) + ": " + with_thousands(prompt.prompt_tokens) +
            " prompt tokens, " + with_thousands(prompt.new_tokens) + " new tokens\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const CacheSummary& cache : prompt.caches) {
      std::string runs;
      for (double tok_s : cache.decode_tok_s) {
        if (!runs.empty()) runs += ", ";
        runs += format_fixed(tok_s, 1);
      }
      rows.push_back(
          {"`" + cache.attention + "`", "`" + cache.kv_cache + "`", runs,
           format_fixed(cache.mean_tok_s, 1),
           format_range(cache.min_mean_ms_last64, cache.max_mean_ms_last64, 1),
           if_recorded(cache.strided_mib_per_step, 2), if_recorded(cache.bytes_per_run, 0),
           format_range(cache.min_peak_mib, cache.max_peak_mib, 0, true) + " MiB",
           group_thousands(format_fixed(cache.bytes_per_token / 1e6, 0)),
           format_fixed(cache.achieved_gbs, 1),
           cache.max_read_gbs > 0 ? format_range(cache.min_read_gbs, cache.max_read_gbs, 1)
                                  : std::string("n/a"),
           percent(cache.percent_of_bandwidth), percent(cache.linear_percent_of_read),
           group_thousands(format_fixed(cache.mean_prefill_tok_s, 0)),
           cache.mean_prefill_gflops > 0 ? format_fixed(cache.mean_prefill_gflops, 0)
                                         : std::string("n/a"),
           percent(cache.percent_of_peak), percent(cache.linear_percent_of_peak)});
    }
    // The child's mean covers the last 64 decode steps, or all of them when fewer ran.
    const int64_t mean_steps = std::min<int64_t>(prompt.new_tokens - 1, 64);
    const std::string mean_header = "Mean ms, last " + std::to_string(mean_steps) + " steps";
    text += markdown_table(
        {"Attention", "KV cache", "Decode tok/s (runs)", "Mean", mean_header, "Strided MiB/step",
         "B/run", "Peak memory", "MB read/token", "GB/s", "Read GB/s", "% of read",
         "Linear % of read", "Prefill tok/s", "Prefill GFLOP/s", "% of peak", "Linear % of peak"},
        rows);
    text += "\n";
  }
  if (data.runs.empty()) text += "(no recorded runs)\n\n";
  return text;
}

std::string format_markdown_report(const BenchData& data, const std::string& title,
                                   const std::string& svg_name) {
  const BenchContext& context = data.context;
  std::string text = "# " + title + "\n\n";
  text += "| | |\n| --- | --- |\n";
  text += "| Date | " + context.date + " |\n";
  text += "| Machine | " + cpu_description(context) + ", " + std::to_string(context.cores) +
          " cores |\n";
  text += "| Kernels | " + (context.kernels.empty() ? "not recorded" : context.kernels) + " |\n";
  text += "| Threads | " + std::to_string(context.threads) + " |\n";
  text += "| Weights | " + context.dtype + " |\n";
  std::vector<std::string> models;
  for (const RunRecord& run : data.runs) {
    if (run.model.empty()) continue;
    std::string model = "`" + run.model + "`" +
                        (run.model_directory.empty() || run.model_directory == run.model
                             ? ""
                             : " (" + run.model_directory + ")");
    if (std::find(models.begin(), models.end(), model) == models.end()) models.push_back(model);
  }
  if (!models.empty()) {
    std::string list;
    for (const std::string& model : models) list += (list.empty() ? "" : ", ") + model;
    text += "| Models | " + list + " |\n";
  }
  text += "| Commit | `" + context.commit + "`" + (context.dirty ? " (working tree dirty)" : "") +
          " |\n";
  text += "| Read bandwidth | " +
          (context.read_gbs > 0
               ? format_fixed(context.read_gbs, 1) + " GB/s, measured by the bench at its start"
               : std::string("not measured")) +
          " |\n";
  text += "| GEMM peak | " +
          (context.peak_gflops > 0 ? format_fixed(context.peak_gflops, 0) +
                                         " GFLOP/s, register-only " + peak_instruction(context) +
                                         " on every thread, measured by the bench at its start"
                                   : std::string("not measured")) +
          " |\n\n";
  text += format_tables(data);
  text +=
      "Attention is the path a run took: `fused` (Fornace's attention kernel) or `candle` "
      "(Candle's op sequence with repeat_kv). Decode tok/s is decode steps over their total time "
      "(the first token comes from prefill). Strided MiB/step is what the strided copies moved "
      "per decode step and B/run the bytes of their unbroken runs, both over the steps of the mean "
      "ms. Peak memory is the child process's high-water mark (VmHWM) when the run ended, so it "
      "includes the model, prefill and earlier prompts. MB read/token counts every weight once "
      "plus the KV cache attention reads at each step (a sliding-window layer its window), "
      "averaged over the run; GB/s is that times the mean "
      "tok/s. Read GB/s is the streaming read bandwidth over the weights where the kernels read "
      "them (the mapped files, or the copies packed at load), measured just "
      "before and just after each run and averaged (the machine's bandwidth drifts), and % of "
      "read is each run's GB/s over it, averaged. Prefill GFLOP/s counts the projections, causal "
      "attention and one lm_head row; % of peak is each run's GFLOP/s over the register-only "
      "rate of the GEMM's arithmetic (vdpbf16ps at the avx512 level, 256-bit FMA at avx2) "
      "measured around it the same way (the bench's start-up figure "
      "for files without one), averaged.\n";
  if (!svg_name.empty()) text += "\n![ms per decode step against position](" + svg_name + ")\n";
  return text;
}

}  // namespace fornace::bench
