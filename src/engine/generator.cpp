// Prefill and decode of one sequence with per-step timing, copy and allocation counts.
#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "core/error.h"

namespace fornace {
namespace {

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

CopyBytes difference(const CopyBytes& after, const CopyBytes& before) {
  return CopyBytes{after.contiguous - before.contiguous, after.strided - before.strided,
                   after.strided_runs - before.strided_runs};
}

}  // namespace

double GenerationResult::prefill_tokens_per_second() const {
  return prefill_ms > 0 ? 1000.0 * static_cast<double>(prompt.size()) / prefill_ms : 0;
}

double GenerationResult::decode_tokens_per_second() const {
  double total = 0;
  for (const DecodeStep& step : steps) total += step.ms;
  return total > 0 ? 1000.0 * static_cast<double>(steps.size()) / total : 0;
}

double GenerationResult::mean_step_ms_last(int64_t count) const {
  if (steps.empty()) return 0;
  size_t first = steps.size() > static_cast<size_t>(count) ? steps.size() - count : 0;
  double total = 0;
  for (size_t i = first; i < steps.size(); ++i) total += steps[i].ms;
  return total / static_cast<double>(steps.size() - first);
}

Generator::Generator(Model& model, KvCacheKind kind, int64_t max_context,
                     const SamplerOptions& sampling)
    : model_(model), sequence_(model, kind, max_context), sampling_(sampling) {}

GenerationResult Generator::generate(const std::vector<uint32_t>& prompt,
                                     const GenerationOptions& options,
                                     const std::function<void(uint32_t)>& on_token) {
  if (prompt.empty()) fail("generate: empty prompt");
  int64_t needed = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
  if (needed > cache().max_length()) {
    fail("generate: ", prompt.size(), " prompt tokens + ", options.max_new_tokens,
         " new tokens exceed the context of ", cache().max_length());
  }
  GenerationResult result;
  result.prompt = prompt;
  // The bytes only: the regions and their owners stay with the model.
  result.weights_read_per_token.bytes = model_.weights_read_per_token().bytes;
  SequenceLimits limits{options.max_new_tokens, options.ignore_eos, options.eos_ids,
                        options.keep_logits};
  memory::RunCounters run;
  memory::RunScope counting(run);
  auto finish = [&] {
    result.generated = sequence_.generated();
    result.stopped_at_eos = sequence_.end() == SequenceEnd::eos;
    result.logits = std::move(sequence_.kept_logits());
    return result;
  };
  auto emit_last = [&] {
    if (on_token) on_token(sequence_.tokens().back());
  };

  {
    memory::PhaseScope phase(Phase::prefill);
    auto start = std::chrono::steady_clock::now();
    result.reused_tokens = sequence_.start(prompt, sampling_, limits, options.reuse_cache);
    const int64_t total = sequence_.prompt_length();
    const bool chunked = sequence_.prompt_remaining() >= 2 * options.prefill_chunk &&
                         options.prefill_chunk > 0;
    if (options.on_prefill_progress && chunked) {
      options.on_prefill_progress(result.reused_tokens, total);
    }
    while (sequence_.prefilling()) {
      sequence_.prefill(model_, options.prefill_chunk);
      if (options.on_prefill_progress) {
        options.on_prefill_progress(total - sequence_.prompt_remaining(), total);
      }
    }
    result.prefill_ms = elapsed_ms(start);
    result.prefill_copied = run.copied();
    if (options.max_new_tokens == 0) return finish();
    emit_last();
  }

  memory::PhaseScope phase(Phase::decode);
  result.steps.reserve(options.max_new_tokens);
  while (sequence_.decoding() && !(options.should_stop && options.should_stop())) {
    const CopyBytes copies_before = run.copied();
    const int64_t kv_read_before = run.attention_read_bytes;
    const int64_t allocated_before = run.allocated_bytes;
    auto start = std::chrono::steady_clock::now();
    sequence_.decode(model_);
    DecodeStep step;
    step.ms = elapsed_ms(start);
    step.copied = difference(run.copied(), copies_before);
    step.allocated_bytes = run.allocated_bytes - allocated_before;
    step.kv_read_bytes = run.attention_read_bytes - kv_read_before;
    result.steps.push_back(step);
    emit_last();
  }
  return finish();
}

}  // namespace fornace
