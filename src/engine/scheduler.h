// Continuous batching: requests run in slots, each a Sequence with its own KV cache, and one
// engine thread steps every active slot together (one batched decode pass), prefilling new
// prompts in chunks between decode steps; requests beyond the slots wait in a bounded queue. A
// slot keeps its cache after a request, and a new request goes to the free slot whose cached
// tokens share the longest prefix with its prompt, which then prefills only the rest.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "engine/stop_strings.h"
#include "models/model.h"
#include "text/tokenizer.h"

namespace fornace {

enum class FinishReason { stop, length, cancelled };

struct CompletionRequest {
  std::vector<uint32_t> prompt;    // Token ids; not empty.
  int64_t max_tokens = 16;         // At least 1; prompt + max_tokens may exceed the context,
                                   // and the completion then ends with `length` when it is full.
  SamplerOptions sampling;         // Greedy by default.
  std::vector<std::string> stop;   // The text ends before the first of these (not included).
  bool ignore_eos = false;
  bool keep_logits = false;        // Keep the logits of every step (tests).
  int64_t top_logprobs = -1;       // Each token's logprob and the top N's (-1: none).
  // Reuse the cached positions of an earlier request that the prompt begins with (when the
  // scheduler's cache_prompt is on too).
  bool cache_prompt = true;
};

// What a completion has produced since the last call to Completion::next.
struct CompletionUpdate {
  std::string text;                // New text: whole UTF-8 characters, stop strings held back.
  int64_t completion_tokens = 0;   // Tokens generated so far.
  int64_t cached_tokens = 0;       // Prompt tokens reused from a slot's cache.
  std::vector<TokenLogprob> logprobs;  // Of the tokens generated since the last update.
  bool finished = false;
  FinishReason finish_reason = FinishReason::length;
};

// One request's progress, shared by the engine thread (which writes it) and the request's
// handler (which reads it and may cancel).
class Completion {
 public:
  explicit Completion(int64_t prompt_tokens);

  // Waits up to `timeout` for new text or the end; nullopt when nothing came. After the update
  // that says `finished`, further calls return that same final state with no text.
  std::optional<CompletionUpdate> next(std::chrono::milliseconds timeout);
  // Blocks until the completion ends.
  void wait() const;
  // Asks the engine to stop this completion; its slot is freed at the next step.
  void cancel();
  bool cancelled() const;

  int64_t prompt_tokens() const { return prompt_tokens_; }
  // Prompt tokens whose keys and values a slot's cache already held (known once it has a slot).
  int64_t cached_tokens() const;
  // After wait(): the whole text, the ids, why it ended and the logits (when kept).
  std::string text() const;
  std::vector<uint32_t> generated() const;
  int64_t completion_tokens() const;
  FinishReason finish_reason() const;
  std::vector<std::vector<float>> logits() const;
  std::vector<TokenLogprob> logprobs() const;  // One per token, when the request asked.
  // Milliseconds from submit to the first generated token (0 before it).
  double time_to_first_token_ms() const;

 private:
  friend class Scheduler;
  // Engine side.
  void set_cached_tokens(int64_t tokens);
  void add_token(uint32_t id, const std::string& text, const std::vector<float>* logits,
                 const TokenLogprob* logprob);
  void finish(FinishReason reason, const std::string& text);

  const int64_t prompt_tokens_;
  const std::chrono::steady_clock::time_point submitted_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::string text_;               // All text so far.
  size_t delivered_ = 0;           // Bytes of text_ that next() has handed out.
  size_t delivered_logprobs_ = 0;  // Entries of logprobs_ that next() has handed out.
  std::vector<uint32_t> generated_;
  std::vector<std::vector<float>> logits_;
  std::vector<TokenLogprob> logprobs_;
  int64_t cached_tokens_ = 0;
  bool finished_ = false;
  bool cancelled_ = false;
  FinishReason finish_reason_ = FinishReason::length;
  double first_token_ms_ = 0;
};

struct SchedulerOptions {
  int64_t slots = 4;            // Requests that run at once.
  int64_t context = 4096;       // Positions each slot's KV cache holds (prompt + completion).
  int64_t queue_limit = 64;     // Requests that may wait for a slot (0: only free slots take them).
  // Prompt tokens one prefill pass runs while other slots are decoding (their next step waits
  // for it); a prompt alone runs in chunks of up to `prefill_chunk_alone`.
  int64_t prefill_chunk = 64;
  int64_t prefill_chunk_alone = 512;
  std::vector<int64_t> eos_ids;
  // Slots keep their caches between requests for prompt reuse.
  bool cache_prompt = true;
};

// Counters since start and gauges now, for /metrics.
struct SchedulerStats {
  int64_t slots = 0;
  int64_t active_slots = 0;
  int64_t queue_length = 0;
  int64_t requests_submitted = 0;
  int64_t requests_finished = 0;
  int64_t prompt_tokens = 0;        // Prompt tokens prefilled.
  int64_t reused_prompt_tokens = 0; // Prompt tokens taken from a slot's cache, not prefilled.
  int64_t completion_tokens = 0;    // Tokens generated.
  int64_t decode_steps = 0;         // Decode passes (each over all decoding slots).
  double decode_seconds = 0;        // Time in decode passes.
  double prefill_seconds = 0;       // Time in prefill passes.
  // Tokens per second of the decode passes of the last few seconds (all slots together).
  double recent_decode_tokens_per_second = 0;
};

// Thrown by submit() when the queue is full.
class QueueFull : public Error {
 public:
  using Error::Error;
};

class Scheduler {
 public:
  // Preallocates a KV cache of `options.context` positions per slot and starts the engine
  // thread. `model` and `tokenizer` must outlive the scheduler.
  Scheduler(Model& model, const Tokenizer& tokenizer, const SchedulerOptions& options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Throws QueueFull when queue_limit requests already wait, and Error for a
  // request it cannot run (empty prompt, ids out of the vocabulary, a prompt that leaves no
  // room in the context, max_tokens < 1, bad sampling options) or after stop().
  std::shared_ptr<Completion> submit(CompletionRequest request);
  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return options_; }
  // Takes no more requests, ends queued and running ones as cancelled, and joins the engine
  // thread. Idempotent.
  void stop();

 private:
  struct Slot;
  struct Queued {
    CompletionRequest request;
    std::shared_ptr<Completion> completion;
  };
  void run();
  // One engine iteration: admit, drop cancelled, one prefill chunk, one decode pass.
  void admit_locked();
  bool step();
  // The free slot for `prompt`: the one whose cache shares the longest prefix with it, else the
  // one used least recently; nullptr when none is free.
  Slot* free_slot_for(const std::vector<uint32_t>& prompt);
  void prefill(Slot& slot, bool others_decoding);
  void decode(std::vector<Slot*>& slots);
  // Hands the slot's newest token to its completion, and frees the slot when it is done.
  void publish(Slot& slot);
  void release(Slot& slot, FinishReason reason);

  Model& model_;
  const Tokenizer& tokenizer_;
  const SchedulerOptions options_;
  std::vector<std::unique_ptr<Slot>> slots_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::deque<Queued> queue_;
  bool stopping_ = false;
  SchedulerStats stats_;
  struct RecentStep {
    std::chrono::steady_clock::time_point end;
    int64_t tokens;
    double seconds;
  };
  std::deque<RecentStep> recent_steps_;  // Decode passes of the last few seconds.
  int64_t admitted_ = 0;                 // Requests given a slot so far (their order).
  int64_t released_ = 0;                 // Requests that left a slot so far (their order).
  std::thread engine_;
};

}  // namespace fornace
