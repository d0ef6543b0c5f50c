// The generation loop of one sequence: chunked prefill, then one token per decode step, each timed
// and counted (copies, allocations, KV bytes read) for this run alone.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/memory.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "models/model.h"
#include "nn/kv_cache.h"

namespace fornace {

struct GenerationOptions {
  int64_t max_new_tokens = 128;
  bool ignore_eos = false;
  std::vector<int64_t> eos_ids;
  bool keep_logits = false;  // Keep the last-position logits of every forward pass.
  // The prompt runs through the model in equal chunks of this many tokens up to twice as many,
  // so prefill's activations stay bounded whatever the prompt length; 0 runs it in one pass.
  int64_t prefill_chunk = 512;
  // Called after each prompt chunk with the prompt tokens done and their total.
  std::function<void(int64_t done, int64_t total)> on_prefill_progress;
  // Keep the positions that the cache holds from the previous generation and that this prompt
  // begins with, and prefill only the rest (a conversation's earlier turns).
  bool reuse_cache = false;
  // Checked before each decode step: returning true ends the generation there (the tokens so far
  // stay in the result and the cache).
  std::function<bool()> should_stop;
};

struct DecodeStep {
  double ms = 0;
  CopyBytes copied;             // Bytes the copy kernels moved in this step.
  int64_t allocated_bytes = 0;  // Bytes allocated in this step.
  int64_t kv_read_bytes = 0;    // Bytes of K and V that attention read in this step.
};

struct GenerationResult {
  std::vector<uint32_t> prompt;
  int64_t reused_tokens = 0;  // Prompt tokens whose keys and values the cache already held.
  std::vector<uint32_t> generated;
  double prefill_ms = 0;
  CopyBytes prefill_copied;
  std::vector<DecodeStep> steps;  // One per decode forward (the first token comes from prefill).
  std::vector<std::vector<float>> logits;
  bool stopped_at_eos = false;
  // The model's weight bytes read per decode step, by storage format.
  WeightTally weights_read_per_token;

  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
  // Mean ms of the last `count` decode steps (all of them when there are fewer).
  double mean_step_ms_last(int64_t count) const;
};

class Generator {
 public:
  Generator(Model& model, KvCacheKind kind, int64_t max_context, const SamplerOptions& sampling);
  // Runs prefill over `prompt` and decodes until max_new_tokens or an eos id. Calls `on_token`
  // after each new id.
  GenerationResult generate(const std::vector<uint32_t>& prompt, const GenerationOptions& options,
                            const std::function<void(uint32_t)>& on_token = {});
  KvCacheSet& cache() { return sequence_.cache(); }

 private:
  Model& model_;
  Sequence sequence_;
  SamplerOptions sampling_;
};

}  // namespace fornace
