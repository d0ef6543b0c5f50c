// Prefill and decode with per-step timing, copy and allocation counts.
#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "core/error.h"
#include "cpu/copy_kernels.h"
#include "ops/creation.h"

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
    : model_(model),
      cache_(kind, model.config().num_hidden_layers, model.kv_cache_shape(max_context)),
      sampler_(sampling) {}

GenerationResult Generator::generate(const std::vector<uint32_t>& prompt,
                                     const GenerationOptions& options,
                                     const std::function<void(uint32_t)>& on_token) {
  if (prompt.empty()) fail("generate: empty prompt");
  int64_t needed = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
  if (needed > cache_.max_length()) {
    fail("generate: ", prompt.size(), " prompt tokens + ", options.max_new_tokens,
         " new tokens exceed the context of ", cache_.max_length());
  }
  cache_.clear();
  GenerationResult result;
  result.prompt = prompt;
  // The bytes only: the regions and their owners stay with the model.
  result.weights_read_per_token.bytes = model_.weights_read_per_token().bytes;
  std::vector<uint32_t> history = prompt;
  std::vector<float> logits;

  auto copy_logits = [&](const Tensor& output) {
    logits.resize(output.numel());
    cpu::strided_to_contiguous(logits.data(), DType::f32, output.storage()->data(),
                               output.dtype(), output.layout());
    if (options.keep_logits) result.logits.push_back(logits);
  };
  auto is_eos = [&](uint32_t id) {
    return std::find(options.eos_ids.begin(), options.eos_ids.end(), id) != options.eos_ids.end();
  };
  auto accept = [&](uint32_t id) {
    result.generated.push_back(id);
    history.push_back(id);
    if (on_token) on_token(id);
    return !options.ignore_eos && is_eos(id);
  };

  {
    memory::PhaseScope phase(Phase::prefill);
    CopyBytes before = memory::copy_bytes();
    auto start = std::chrono::steady_clock::now();
    int64_t total = static_cast<int64_t>(prompt.size());
    // Equal chunks of prefill_chunk to 2 * prefill_chunk - 1 tokens: a short last chunk would
    // pack every weight for the GEMM again for a few rows (513 tokens run as one pass, 2,049
    // as 512 + 512 + 512 + 513). Only the last chunk computes logits.
    int64_t chunks = options.prefill_chunk > 0 ? std::max<int64_t>(1, total / options.prefill_chunk)
                                               : 1;
    if (options.on_prefill_progress && chunks > 1) options.on_prefill_progress(0, total);
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      int64_t begin = total * chunk / chunks;
      int64_t end = total * (chunk + 1) / chunks;
      std::vector<int32_t> values(prompt.begin() + begin, prompt.begin() + end);
      bool last = chunk + 1 == chunks;
      Tensor output = model_.forward(from_ids(values, {1, end - begin}), cache_,
                                     last ? Logits::last : Logits::none);
      if (last) copy_logits(output);
      if (options.on_prefill_progress) options.on_prefill_progress(end, total);
    }
    uint32_t first = options.max_new_tokens > 0 ? sampler_.sample(logits, history) : 0;
    result.prefill_ms = elapsed_ms(start);
    result.prefill_copied = difference(memory::copy_bytes(), before);
    if (options.max_new_tokens == 0) return result;
    result.stopped_at_eos = accept(first);
  }

  memory::PhaseScope phase(Phase::decode);
  result.steps.reserve(options.max_new_tokens);
  // The one-token input of every decode step, written in place.
  Tensor next = [] {
    memory::OpScope scope("decode_input");
    return Tensor::empty({1, 1}, DType::u32);
  }();
  while (!result.stopped_at_eos &&
         static_cast<int64_t>(result.generated.size()) < options.max_new_tokens) {
    CopyBytes copies_before = memory::copy_bytes();
    int64_t kv_read_before = memory::attention_read_bytes();
    int64_t allocated_before = memory::phase_memory(Phase::decode).allocated_bytes;
    auto start = std::chrono::steady_clock::now();
    next.data<uint32_t>()[0] = result.generated.back();
    copy_logits(model_.forward(next, cache_, Logits::last));
    uint32_t id = sampler_.sample(logits, history);
    DecodeStep step;
    step.ms = elapsed_ms(start);
    step.copied = difference(memory::copy_bytes(), copies_before);
    step.allocated_bytes = memory::phase_memory(Phase::decode).allocated_bytes - allocated_before;
    step.kv_read_bytes = memory::attention_read_bytes() - kv_read_before;
    result.steps.push_back(step);
    result.stopped_at_eos = accept(id);
  }
  return result;
}

}  // namespace fornace
