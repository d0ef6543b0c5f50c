// One sequence's generation as a state machine, which the generator (one sequence, timed step by
// step) and the scheduler (many, decoded together) both drive: prompt reuse against what its KV
// cache holds, chunked prefill, sampling, and the end at an eos id or the token limit.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/logprobs.h"
#include "engine/sampler.h"
#include "models/model.h"
#include "nn/kv_cache.h"

namespace fornace {

struct SequenceLimits {
  int64_t max_new_tokens = 128;
  bool ignore_eos = false;
  std::vector<int64_t> eos_ids;
  bool keep_logits = false;  // Keep the logits that every new token was sampled from.
  // Keep each new token's log-probability and those of the `top_logprobs` most likely tokens
  // (-1: none).
  int64_t top_logprobs = -1;
};

// Why a sequence stopped: not yet, at an eos id, or at max_new_tokens.
enum class SequenceEnd { none, eos, length };

// Prompt tokens one prefill pass runs, of `remaining`: equal chunks of `chunk` to 2 * chunk - 1
// tokens, so that no pass is a sliver that packs every weight for the GEMM again for a few rows
// (513 tokens run as one pass, 2,049 as 512 + 512 + 512 + 513); all of them when chunk is 0.
int64_t prefill_chunk_length(int64_t remaining, int64_t chunk);

class Sequence {
 public:
  // A sequence with a KV cache of `kind` holding `context` positions of `model`.
  Sequence(const Model& model, KvCacheKind kind, int64_t context);

  // Starts a generation after `prompt` (not empty; ids below the vocabulary). With `reuse`, the
  // positions that the cache holds from earlier generations and that `prompt` begins with stay
  // (all but the prompt's last token, which runs again for its logits); otherwise the cache is
  // cleared. Returns the prompt tokens reused.
  int64_t start(std::vector<uint32_t> prompt, const SamplerOptions& sampling,
                const SequenceLimits& limits, bool reuse);

  // How many of the positions that the cache holds `prompt` begins with.
  int64_t shared_prefix(const std::vector<uint32_t>& prompt) const;

  bool prefilling() const { return started_ && prefilled_ < prompt_length(); }
  bool decoding() const { return started_ && !prefilling() && end_ == SequenceEnd::none; }
  SequenceEnd end() const { return end_; }
  int64_t prompt_length() const { return static_cast<int64_t>(prompt_length_); }
  int64_t prompt_remaining() const { return prompt_length() - prefilled_; }
  int64_t reused() const { return reused_; }

  // Runs the next prompt chunk (prefill_chunk_length of what remains) through `model`; after the
  // last one, samples the first new token. Returns the tokens run.
  int64_t prefill(Model& model, int64_t chunk);
  // Runs one decode step of this sequence alone and samples its next token.
  uint32_t decode(Model& model);
  // The token that the next decode step feeds (the last one sampled).
  uint32_t next_input() const { return tokens_.back(); }
  // Samples the next token from `logits` (f32 [1, vocab], any layout), the output of the forward
  // pass that ran this sequence's last token, and checks the end. Returns the token. Contiguous
  // f32 logits that are neither kept nor needed for logprobs are penalized in place.
  uint32_t accept(const Tensor& logits);

  std::vector<uint32_t> prompt() const;
  std::vector<uint32_t> generated() const;
  const std::vector<uint32_t>& tokens() const { return tokens_; }  // Prompt, then generated.
  std::vector<std::vector<float>>& kept_logits() { return kept_logits_; }
  // One per generated token, when limits.top_logprobs >= 0.
  const std::vector<TokenLogprob>& logprobs() const { return logprobs_; }
  KvCacheSet& cache() { return cache_; }

 private:
  KvCacheSet cache_;
  std::vector<uint32_t> tokens_;  // The prompt, then the generated ids; the cache holds all but
                                  // the last once prefill is done.
  size_t prompt_length_ = 0;
  int64_t prefilled_ = 0;
  int64_t reused_ = 0;
  bool started_ = false;
  SequenceEnd end_ = SequenceEnd::none;
  SequenceLimits limits_;
  std::optional<Sampler> sampler_;
  std::vector<float> logits_;
  std::vector<std::vector<float>> kept_logits_;
  std::vector<float> raw_logits_;  // Before the sampler's penalties, for the logprobs.
  std::vector<TokenLogprob> logprobs_;
  Tensor decode_input_;  // The one-token input of a decode step, written in place.
};

}  // namespace fornace
