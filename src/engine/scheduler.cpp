// The engine thread of continuous batching: admit queued requests into free slots, prefill one
// prompt chunk, then one decode pass over every decoding slot, and publish each slot's text.
#include "engine/scheduler.h"

#include <algorithm>
#include <cstdio>

#include "nn/sequences.h"

namespace fornace {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

// The decode passes that the recent tok/s covers.
constexpr auto kRecentWindow = std::chrono::seconds(5);

}  // namespace

// --- Completion -----------------------------------------------------------------------------

Completion::Completion(int64_t prompt_tokens)
    : prompt_tokens_(prompt_tokens), submitted_(Clock::now()) {}

std::optional<CompletionUpdate> Completion::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!changed_.wait_for(lock, timeout, [&] { return delivered_ < text_.size() || finished_; })) {
    return std::nullopt;
  }
  CompletionUpdate update;
  update.text = text_.substr(delivered_);
  delivered_ = text_.size();
  update.completion_tokens = static_cast<int64_t>(generated_.size());
  update.cached_tokens = cached_tokens_;
  update.logprobs.assign(logprobs_.begin() + static_cast<int64_t>(delivered_logprobs_),
                         logprobs_.end());
  delivered_logprobs_ = logprobs_.size();
  update.finished = finished_;
  update.finish_reason = finish_reason_;
  return update;
}

void Completion::wait() const {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return finished_; });
}

void Completion::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
}

bool Completion::cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

std::string Completion::text() const {
  std::lock_guard lock(mutex_);
  return text_;
}

int64_t Completion::cached_tokens() const {
  std::lock_guard lock(mutex_);
  return cached_tokens_;
}

void Completion::set_cached_tokens(int64_t tokens) {
  std::lock_guard lock(mutex_);
  cached_tokens_ = tokens;
}

int64_t Completion::completion_tokens() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(generated_.size());
}

std::vector<uint32_t> Completion::generated() const {
  std::lock_guard lock(mutex_);
  return generated_;
}

FinishReason Completion::finish_reason() const {
  std::lock_guard lock(mutex_);
  return finish_reason_;
}

std::vector<std::vector<float>> Completion::logits() const {
  std::lock_guard lock(mutex_);
  return logits_;
}

std::vector<TokenLogprob> Completion::logprobs() const {
  std::lock_guard lock(mutex_);
  return logprobs_;
}

double Completion::time_to_first_token_ms() const {
  std::lock_guard lock(mutex_);
  return first_token_ms_;
}

void Completion::add_token(uint32_t id, const std::string& text, const std::vector<float>* logits,
                           const TokenLogprob* logprob) {
  {
    std::lock_guard lock(mutex_);
    if (generated_.empty()) first_token_ms_ = ms_between(submitted_, Clock::now());
    generated_.push_back(id);
    text_ += text;
    if (logits) logits_.push_back(*logits);
    if (logprob) logprobs_.push_back(*logprob);
  }
  changed_.notify_all();
}

void Completion::finish(FinishReason reason, const std::string& text) {
  {
    std::lock_guard lock(mutex_);
    text_ += text;
    finished_ = true;
    finish_reason_ = reason;
  }
  changed_.notify_all();
}

// --- Scheduler ------------------------------------------------------------------------------

struct Scheduler::Slot {
  Slot(Model& model, int64_t context) : sequence(model, KvCacheKind::prealloc, context) {}

  Sequence sequence;
  bool busy = false;
  int64_t order = 0;      // When it was admitted: the oldest prompt is prefilled first.
  int64_t last_used = 0;  // When its last request left: the least recent cache goes first.
  CompletionRequest request;
  std::shared_ptr<Completion> completion;
  std::optional<IncrementalDecoder> decoder;
  std::optional<StopStrings> stops;

  bool decoding() const { return busy && sequence.decoding(); }
};

Scheduler::Scheduler(Model& model, const Tokenizer& tokenizer, const SchedulerOptions& options)
    : model_(model), tokenizer_(tokenizer), options_(options) {
  if (options.slots < 1 || options.slots > Sequences::kMaxBatch) {
    fail("scheduler: slots must be in [1, ", Sequences::kMaxBatch, "], not ", options.slots);
  }
  if (options.context < 2) fail("scheduler: a context of ", options.context, " is too small");
  if (options.queue_limit < 0) fail("scheduler: the queue limit must be >= 0");
  if (options.prefill_chunk < 1 || options.prefill_chunk_alone < 1) {
    fail("scheduler: prefill chunks must be >= 1");
  }
  for (int64_t index = 0; index < options.slots; ++index) {
    slots_.push_back(std::make_unique<Slot>(model, options.context));
  }
  stats_.slots = options.slots;
  engine_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { stop(); }

std::shared_ptr<Completion> Scheduler::submit(CompletionRequest request) {
  const int64_t prompt_length = static_cast<int64_t>(request.prompt.size());
  if (prompt_length == 0) fail("the prompt is empty");
  for (uint32_t id : request.prompt) {
    if (id >= static_cast<uint64_t>(model_.config().vocab_size)) {
      fail("prompt id ", id, " is out of the vocabulary of ", model_.config().vocab_size);
    }
  }
  if (prompt_length >= options_.context) {
    fail("the prompt has ", prompt_length, " tokens, which leaves no room for a completion in ",
         "the context of ", options_.context);
  }
  if (request.max_tokens < 1) fail("max_tokens must be at least 1, not ", request.max_tokens);
  Sampler check(request.sampling);  // Throws Error for bad sampling options.
  auto completion = std::make_shared<Completion>(prompt_length);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) fail("the server is shutting down");
    // Requests that a free slot takes at the next step do not count as waiting.
    const int64_t free_slots = options_.slots - stats_.active_slots;
    if (static_cast<int64_t>(queue_.size()) >= options_.queue_limit + free_slots) {
      throw QueueFull(concat("all ", options_.slots, " slots are busy and ", queue_.size(),
                             " requests wait"));
    }
    queue_.push_back(Queued{std::move(request), completion});
    ++stats_.requests_submitted;
    stats_.queue_length = static_cast<int64_t>(queue_.size());
  }
  work_.notify_one();
  return completion;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(mutex_);
  SchedulerStats stats = stats_;
  int64_t tokens = 0;
  double seconds = 0;
  for (const RecentStep& step : recent_steps_) {
    if (Clock::now() - step.end > kRecentWindow) continue;
    tokens += step.tokens;
    seconds += step.seconds;
  }
  stats.recent_decode_tokens_per_second = seconds > 0 ? static_cast<double>(tokens) / seconds : 0;
  return stats;
}

void Scheduler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  if (engine_.joinable()) engine_.join();
}

Scheduler::Slot* Scheduler::free_slot_for(const std::vector<uint32_t>& prompt) {
  Slot* best = nullptr;
  int64_t best_shared = 0;
  for (auto& slot : slots_) {
    if (slot->busy) continue;
    const int64_t shared = options_.cache_prompt ? slot->sequence.shared_prefix(prompt) : 0;
    if (!best || shared > best_shared ||
        (shared == best_shared && slot->last_used < best->last_used)) {
      best = slot.get();
      best_shared = shared;
    }
  }
  return best;
}

void Scheduler::admit_locked() {
  while (!queue_.empty()) {
    if (queue_.front().completion->cancelled()) {
      queue_.front().completion->finish(FinishReason::cancelled, "");
      queue_.pop_front();
      ++stats_.requests_finished;
      continue;
    }
    Slot* free = free_slot_for(queue_.front().request.prompt);
    if (!free) break;
    Queued queued = std::move(queue_.front());
    queue_.pop_front();
    free->busy = true;
    free->order = admitted_++;
    free->request = std::move(queued.request);
    free->completion = std::move(queued.completion);
    free->decoder.emplace(tokenizer_, true);
    free->stops.emplace(free->request.stop);
    const int64_t prompt_length = static_cast<int64_t>(free->request.prompt.size());
    SequenceLimits limits{std::min(free->request.max_tokens, options_.context - prompt_length),
                          free->request.ignore_eos, options_.eos_ids, free->request.keep_logits,
                          free->request.top_logprobs};
    const int64_t reused =
        free->sequence.start(free->request.prompt, free->request.sampling, limits,
                             options_.cache_prompt && free->request.cache_prompt);
    free->completion->set_cached_tokens(reused);
    stats_.reused_prompt_tokens += reused;
  }
  stats_.queue_length = static_cast<int64_t>(queue_.size());
  stats_.active_slots = std::count_if(slots_.begin(), slots_.end(),
                                      [](const auto& slot) { return slot->busy; });
}

void Scheduler::run() {
  while (true) {
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] {
        return stopping_ || !queue_.empty() ||
               std::any_of(slots_.begin(), slots_.end(), [](const auto& slot) { return slot->busy; });
      });
      if (stopping_) break;
      admit_locked();
    }
    try {
      step();
    } catch (const std::exception& error) {
      // A failed pass ends the requests it ran; the engine keeps serving the next ones.
      std::fprintf(stderr, "error: engine step failed: %s\n", error.what());
      // A pass that failed part way leaves caches that no later request may reuse.
      for (auto& slot : slots_) {
        slot->sequence.cache().clear();
        if (slot->busy) release(*slot, FinishReason::cancelled);
      }
    }
  }
  for (auto& slot : slots_) {
    if (slot->busy) release(*slot, FinishReason::cancelled);
  }
  std::lock_guard lock(mutex_);
  for (Queued& queued : queue_) {
    queued.completion->finish(FinishReason::cancelled, "");
    ++stats_.requests_finished;
  }
  queue_.clear();
  stats_.queue_length = 0;
}

bool Scheduler::step() {
  for (auto& slot : slots_) {
    if (slot->busy && slot->completion->cancelled()) release(*slot, FinishReason::cancelled);
  }
  Slot* prefilling = nullptr;
  bool others_decoding = false;
  for (auto& slot : slots_) {
    if (slot->decoding()) {
      others_decoding = true;
    } else if (slot->busy && (!prefilling || slot->order < prefilling->order)) {
      prefilling = slot.get();
    }
  }
  if (prefilling) prefill(*prefilling, others_decoding);
  std::vector<Slot*> decoding;
  for (auto& slot : slots_) {
    if (slot->decoding()) decoding.push_back(slot.get());
  }
  if (!decoding.empty()) decode(decoding);
  return prefilling || !decoding.empty();
}

void Scheduler::prefill(Slot& slot, bool others_decoding) {
  const auto start = Clock::now();
  const int64_t chunk = others_decoding ? options_.prefill_chunk : options_.prefill_chunk_alone;
  const int64_t count = slot.sequence.prefill(model_, chunk);
  {
    std::lock_guard lock(mutex_);
    stats_.prompt_tokens += count;
    stats_.prefill_seconds += ms_between(start, Clock::now()) / 1000.0;
  }
  if (!slot.sequence.prefilling()) publish(slot);
}

void Scheduler::decode(std::vector<Slot*>& slots) {
  const auto start = Clock::now();
  if (slots.size() == 1) {
    // One sequence takes the path `fornace` decodes with.
    slots[0]->sequence.decode(model_);
  } else {
    std::vector<uint32_t> ids;
    std::vector<KvCacheSet*> caches;
    for (Slot* slot : slots) {
      ids.push_back(slot->sequence.next_input());
      caches.push_back(&slot->sequence.cache());
    }
    Tensor logits = model_.forward_batch(ids, caches);
    for (size_t index = 0; index < slots.size(); ++index) {
      slots[index]->sequence.accept(logits.narrow(0, static_cast<int64_t>(index), 1));
    }
  }
  const auto end = Clock::now();
  {
    std::lock_guard lock(mutex_);
    ++stats_.decode_steps;
    const double seconds = ms_between(start, end) / 1000.0;
    stats_.decode_seconds += seconds;
    recent_steps_.push_back(RecentStep{end, static_cast<int64_t>(slots.size()), seconds});
    while (!recent_steps_.empty() && end - recent_steps_.front().end > kRecentWindow) {
      recent_steps_.pop_front();
    }
  }
  for (Slot* slot : slots) publish(*slot);
}

void Scheduler::publish(Slot& slot) {
  Sequence& sequence = slot.sequence;
  const uint32_t id = sequence.tokens().back();
  std::string text = slot.stops->push(slot.decoder->push(id));
  {
    std::lock_guard lock(mutex_);
    ++stats_.completion_tokens;
  }
  const std::vector<std::vector<float>>& kept = sequence.kept_logits();
  const std::vector<TokenLogprob>& logprobs = sequence.logprobs();
  slot.completion->add_token(id, text, kept.empty() ? nullptr : &kept.back(),
                             logprobs.empty() ? nullptr : &logprobs.back());
  if (slot.stops->stopped() || sequence.end() == SequenceEnd::eos) {
    release(slot, FinishReason::stop);
  } else if (sequence.end() == SequenceEnd::length) {
    release(slot, FinishReason::length);
  }
}

void Scheduler::release(Slot& slot, FinishReason reason) {
  // What the decoder and the stop strings still hold is text, unless a stop string ended it.
  std::string rest;
  if (!slot.stops->stopped()) {
    rest = slot.stops->push(slot.decoder->flush());
    rest += slot.stops->flush();
  }
  std::shared_ptr<Completion> completion = std::move(slot.completion);
  slot.busy = false;
  // The cache stays for the next request that shares its prefix.
  if (!options_.cache_prompt) slot.sequence.cache().clear();
  {
    std::lock_guard lock(mutex_);
    slot.last_used = ++released_;
    ++stats_.requests_finished;
    stats_.active_slots = std::count_if(slots_.begin(), slots_.end(),
                                        [](const auto& other) { return other->busy; });
  }
  // Last: whoever waits on the completion sees the slot already free in stats().
  completion->finish(reason, rest);
}

}  // namespace fornace
