// Continuous batching: requests run in slots, each with its own KV cache, and one engine thread
// steps every active slot together (one batched decode pass), prefilling new prompts in chunks
// between decode steps; requests beyond the slots wait in a bounded queue.
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
#include "engine/stop_strings.h"
#include "models/model.h"
#include "text/tokenizer.h"

namespace fornace {

enum class FinishReason { stop, length, cancelled };
// "stop", "length" or "cancelled".
const char* finish_reason_name(FinishReason reason);

struct CompletionRequest {
  std::vector<uint32_t> prompt;    // Token ids; not empty.
  int64_t max_tokens = 16;         // At least 1; prompt + max_tokens may exceed the context,
                                   // and the completion then ends with `length` when it is full.
  SamplerOptions sampling;         // Greedy by default.
  std::vector<std::string> stop;   // The text ends before the first of these (not included).
  bool ignore_eos = false;
  bool keep_logits = false;        // Keep the logits of every step (tests).
};

// What a completion has produced since the last call to Completion::next.
struct CompletionUpdate {
  std::string text;                // New text: whole UTF-8 characters, stop strings held back.
  int64_t completion_tokens = 0;   // Tokens generated so far.
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
  // After wait(): the whole text, the ids, why it ended and the logits (when kept).
  std::string text() const;
  std::vector<uint32_t> generated() const;
  int64_t completion_tokens() const;
  FinishReason finish_reason() const;
  std::vector<std::vector<float>> logits() const;
  // Milliseconds from submit to the first generated token (0 before it), and to the end.
  double time_to_first_token_ms() const;
  double total_ms() const;

 private:
  friend class Scheduler;
  // Engine side.
  void add_token(uint32_t id, const std::string& text, std::vector<float>* logits);
  void finish(FinishReason reason, const std::string& text);

  const int64_t prompt_tokens_;
  const std::chrono::steady_clock::time_point submitted_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::string text_;               // All text so far.
  size_t delivered_ = 0;           // Bytes of text_ that next() has handed out.
  std::vector<uint32_t> generated_;
  std::vector<std::vector<float>> logits_;
  bool finished_ = false;
  bool cancelled_ = false;
  FinishReason finish_reason_ = FinishReason::length;
  double first_token_ms_ = 0;
  double total_ms_ = 0;
};

struct SchedulerOptions {
  int64_t slots = 4;            // Requests that run at once.
  int64_t context = 4096;       // Positions each slot's KV cache holds (prompt + completion).
  int64_t queue_limit = 64;     // Requests that may wait for a slot (0: only free slots take them).
  // Prompt tokens one prefill pass runs while other slots are decoding (their next step waits
  // for it); a prompt alone runs in chunks of up to `prefill_chunk_alone`.
  int64_t prefill_chunk = 64;
  int64_t prefill_chunk_alone = 512;
  std::vector<uint32_t> eos_ids;
};

// Counters since start and gauges now, for /metrics.
struct SchedulerStats {
  int64_t slots = 0;
  int64_t active_slots = 0;
  int64_t queue_length = 0;
  int64_t requests_submitted = 0;
  int64_t requests_finished = 0;
  int64_t prompt_tokens = 0;        // Prompt tokens prefilled.
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
  void prefill(Slot& slot, bool others_decoding);
  void decode(std::vector<Slot*>& slots);
  // Samples from `logits`, feeds the completion, and frees the slot when it is done.
  void accept(Slot& slot, std::vector<float>& logits);
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
  std::thread engine_;
};

}  // namespace fornace
