// Formats the memory, copy and op time counters that a generation leaves behind.
#include "engine/trace.h"

#include <cstdio>

#include "core/storage.h"
#include "cpu/kernel_choices.h"
#include "io/file_mapping.h"

namespace fornace {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string line(const char* format, auto... values) {
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer), format, values...);
  return buffer;
}

// The paths the weight mappings took to 2 MiB pages, e.g. "page cache, anonymous copy".
std::string huge_page_paths(int paths) {
  std::string names;
  for (HugePagePath path : {HugePagePath::off, HugePagePath::page_cache, HugePagePath::reread,
                            HugePagePath::anonymous_copy}) {
    if (!(paths & (1 << static_cast<int>(path)))) continue;
    names += (names.empty() ? "" : ", ") + std::string(huge_page_path_name(path));
  }
  return names.empty() ? "none mapped" : names;
}

// The wall ms of a phase: prefill's, or the sum of the decode steps.
double phase_ms(const GenerationResult& result, Phase phase) {
  if (phase == Phase::prefill) return result.prefill_ms;
  double total = 0;
  for (const DecodeStep& step : result.steps) total += step.ms;
  return total;
}

// Each op's share of prefill and decode time, longest first, then the time between ops.
std::string format_op_times(const GenerationResult& result) {
  std::vector<OpTime> times = memory::op_times();
  if (times.empty()) return "";
  std::string text =
      "trace: time by op (wall ms on the generating thread, outermost ops; \"between ops\" is "
      "the rest of the phase: sampling, logits and the loop)\n";
  text += line("  %-8s %-16s %10s %7s %8s %10s\n", "phase", "op", "ms", "%", "calls",
               "us/call");
  for (Phase phase : {Phase::prefill, Phase::decode}) {
    const double total = phase_ms(result, phase);
    if (total <= 0) continue;
    double ops_ms = 0;
    for (const OpTime& op : times) {
      if (op.phase != phase) continue;
      ops_ms += op.ms;
      text += line("  %-8s %-16s %10.2f %7.1f %8lld %10.1f\n", phase_name(phase), op.op.c_str(),
                   op.ms, 100.0 * op.ms / total, static_cast<long long>(op.calls),
                   1000.0 * op.ms / static_cast<double>(op.calls));
    }
    text += line("  %-8s %-16s %10.2f %7.1f\n", phase_name(phase), "between ops",
                 total - ops_ms, 100.0 * (total - ops_ms) / total);
  }
  return text;
}

}  // namespace

double bytes_per_run(const CopyBytes& copied) {
  return copied.strided_runs ? static_cast<double>(copied.strided) / copied.strided_runs : 0.0;
}

std::string format_trace(const GenerationResult& result, const LoadReport& load) {
  std::string text = "trace: tensor memory by phase (MiB; weights are mapped, not counted)\n";
  text += line("  %-8s %12s %12s %12s %12s\n", "phase", "allocated", "released", "net", "peak live");
  for (Phase phase : {Phase::load, Phase::prefill, Phase::decode}) {
    PhaseMemory memory = memory::phase_memory(phase);
    text += line("  %-8s %12.1f %12.1f %+12.1f %12.1f\n", phase_name(phase),
                 memory.allocated_bytes / kMiB, memory.released_bytes / kMiB,
                 (memory.allocated_bytes - memory.released_bytes) / kMiB,
                 memory.peak_live_bytes / kMiB);
  }
  text += "trace: kernels: " + cpu::kernel_choices() + "\n";
  text += line("trace: model loaded in %.1f ms\n", load.load_ms);
  text += line("trace: weights mapped %.1f MiB resident, %.0f%% in 2 MiB pages (%s) in %.1f ms: "
               "%.1f MiB re-read from disk in %.1f ms, %.1f MiB copied to anonymous 2 MiB pages "
               "in %.1f ms\n",
               load.mapped_bytes / kMiB, load.huge_page_percent(),
               huge_page_paths(load.huge_page_paths).c_str(), load.mapping_ms,
               load.reread_bytes / kMiB, load.reread_ms, load.copied_bytes / kMiB, load.copy_ms);
  if (load.packed_bytes > 0) {
    text += line("trace: weights packed for the kernels (bf16 panels, interleaved quads) %.1f MiB "
                 "in %.1f ms, %.1f MiB of them mapped from the packed cache (their mapped pages "
                 "released)\n",
                 load.packed_bytes / kMiB, load.pack_ms, load.packed_from_cache_bytes / kMiB);
  }
  if (!load.packed_cache.empty()) {
    text += "trace: packed cache " + load.packed_cache;
    if (load.packed_cache_written_bytes > 0) {
      text += line(": %.1f MiB written in %.1f ms", load.packed_cache_written_bytes / kMiB,
                   load.packed_cache_write_ms);
    }
    if (!load.packed_cache_problem.empty()) text += ": " + load.packed_cache_problem;
    text += "\n";
  }
  std::string formats;
  for (const auto& [format, bytes] : result.weights_read_per_token.bytes) {
    formats += line("%s%s %.1f", formats.empty() ? "" : ", ", format.c_str(), bytes / kMiB);
  }
  text += line("trace: weights read per decode step %.1f MiB (%s)\n",
               result.weights_read_per_token.total() / kMiB, formats.c_str());
  text += line("trace: prefill copied %.2f MiB contiguous, %.2f MiB strided in runs of %.0f B\n",
               result.prefill_copied.contiguous / kMiB, result.prefill_copied.strided / kMiB,
               bytes_per_run(result.prefill_copied));
  text += "trace: per decode step (KiB copied by the copy kernels, strided ones in unbroken runs "
          "of B/run bytes; allocated KiB; KiB of K and V that attention read)\n";
  text += line("  %6s %9s %12s %12s %9s %12s %12s %9s\n", "step", "position", "contiguous",
               "strided", "B/run", "allocated", "kv read", "ms");
  int64_t position = static_cast<int64_t>(result.prompt.size());
  for (size_t index = 0; index < result.steps.size(); ++index) {
    const DecodeStep& step = result.steps[index];
    text += line("  %6zu %9lld %12.1f %12.1f %9.0f %12.1f %12.1f %9.3f\n", index + 1,
                 static_cast<long long>(position + index), step.copied.contiguous / 1024.0,
                 step.copied.strided / 1024.0, bytes_per_run(step.copied),
                 step.allocated_bytes / 1024.0, step.kv_read_bytes / 1024.0, step.ms);
  }
  text += line("trace: freed 2 MiB-page buffers kept for reuse %.1f MiB (at most %.0f)\n",
               reusable_buffer_bytes() / kMiB, kReusableBufferLimit / kMiB);
  text += "trace: ops that allocated most in prefill\n";
  text += line("  %-16s %12s %10s\n", "op", "MiB", "count");
  int shown = 0;
  for (const OpMemory& op : memory::op_memory()) {
    if (op.phase != Phase::prefill) continue;
    text += line("  %-16s %12.1f %10lld\n", op.op.c_str(), op.allocated_bytes / kMiB,
                 static_cast<long long>(op.allocations));
    if (++shown == 8) break;
  }
  return text + format_op_times(result);
}

nlohmann::json trace_to_json(const GenerationResult& result, const LoadReport& load) {
  nlohmann::json phases = nlohmann::json::object();
  for (Phase phase : {Phase::load, Phase::prefill, Phase::decode}) {
    PhaseMemory memory = memory::phase_memory(phase);
    phases[phase_name(phase)] = {{"allocated_bytes", memory.allocated_bytes},
                                 {"released_bytes", memory.released_bytes},
                                 {"peak_live_bytes", memory.peak_live_bytes}};
  }
  nlohmann::json steps = nlohmann::json::array();
  for (const DecodeStep& step : result.steps) {
    steps.push_back({{"contiguous_bytes", step.copied.contiguous},
                     {"strided_bytes", step.copied.strided},
                     {"strided_runs", step.copied.strided_runs},
                     {"kv_read_bytes", step.kv_read_bytes},
                     {"allocated_bytes", step.allocated_bytes}});
  }
  nlohmann::json ops = nlohmann::json::array();
  for (const OpMemory& op : memory::op_memory()) {
    ops.push_back({{"op", op.op},
                   {"phase", phase_name(op.phase)},
                   {"allocated_bytes", op.allocated_bytes},
                   {"allocations", op.allocations}});
  }
  nlohmann::json op_times = nlohmann::json::array();
  for (const OpTime& op : memory::op_times()) {
    op_times.push_back(
        {{"op", op.op}, {"phase", phase_name(op.phase)}, {"ms", op.ms}, {"calls", op.calls}});
  }
  return {{"phases", phases},
          {"weights_read_per_token", result.weights_read_per_token.bytes},
          {"weights_mapped", {{"resident_bytes", load.mapped_bytes},
                              {"huge_page_bytes", load.huge_page_bytes},
                              {"huge_page_path", huge_page_paths(load.huge_page_paths)},
                              {"reread_bytes", load.reread_bytes},
                              {"reread_ms", load.reread_ms},
                              {"copied_bytes", load.copied_bytes},
                              {"copy_ms", load.copy_ms},
                              {"packed_bytes", load.packed_bytes},
                              {"pack_ms", load.pack_ms},
                              {"setup_ms", load.mapping_ms},
                              {"load_ms", load.load_ms}}},
          {"prefill_copied", {{"contiguous_bytes", result.prefill_copied.contiguous},
                              {"strided_bytes", result.prefill_copied.strided},
                              {"strided_runs", result.prefill_copied.strided_runs}}},
          {"reusable_buffer_bytes", reusable_buffer_bytes()},
          {"decode_steps", steps},
          {"ops", ops},
          {"op_times", op_times}};
}

std::string format_kv_cache_trace(const Model& model, int64_t context) {
  const int64_t layers = model.config().num_hidden_layers;
  const KvCacheShape shape = model.kv_cache_shape(context);
  return line(
      "trace: kv cache %s: %lld bytes of K+V per position (%lld layers), %lld bytes "
      "(%.2f MiB) for %lld positions\n",
      kv_cache_type_name(shape.type()), static_cast<long long>(layers * shape.bytes_per_position()),
      static_cast<long long>(layers),
      static_cast<long long>(KvCacheSet::prealloc_bytes(layers, shape)),
      static_cast<double>(KvCacheSet::prealloc_bytes(layers, shape)) / (1024.0 * 1024.0),
      static_cast<long long>(context));
}

}  // namespace fornace
