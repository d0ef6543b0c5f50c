// Continuous batching: each request gets, batched with others, the logits and tokens it gets
// alone from the Generator; stop strings, lengths, cancellation, the queue and bad requests.
#include <gtest/gtest.h>

#include <thread>

#include "common/relative_error.h"
#include "common/test_models.h"
#include "engine/generator.h"
#include "engine/scheduler.h"

namespace fornace {
namespace {

struct TinyModel {
  std::string directory = tiny_model_directory(DType::f32);
  std::unique_ptr<Model> model = load_model(directory);
  Tokenizer tokenizer = Tokenizer::load(directory);
  int64_t vocab() const { return model->config().vocab_size; }
};

TinyModel& tiny() {
  static TinyModel model;
  return model;
}

SamplerOptions greedy() {
  SamplerOptions options;
  options.repeat_penalty = 1.0;
  return options;
}

CompletionRequest request(std::vector<uint32_t> prompt, int64_t max_tokens) {
  CompletionRequest request;
  request.prompt = std::move(prompt);
  request.max_tokens = max_tokens;
  request.sampling = greedy();
  request.ignore_eos = true;
  return request;
}

SchedulerOptions slots_of(int64_t slots, int64_t context) {
  SchedulerOptions options;
  options.slots = slots;
  options.context = context;
  return options;
}

TEST(Scheduler, BatchedRequestsGetTheLogitsAndTokensTheyGetAlone) {
  TinyModel& tiny_model = tiny();
  constexpr int64_t kTokens = 12;
  std::vector<std::vector<uint32_t>> prompts;
  for (int64_t length : {3, 17, 9, 30, 5, 12}) {
    prompts.push_back(test_prompt_ids(length, tiny_model.vocab()));
    prompts.back()[0] = static_cast<uint32_t>(length);  // Different prompts.
  }
  // Six requests on four slots: two wait, then join running batches.
  SchedulerOptions options = slots_of(4, 64);
  options.prefill_chunk = 4;  // Prompts prefill in chunks between decode steps.
  Scheduler scheduler(*tiny_model.model, tiny_model.tokenizer, options);
  std::vector<std::shared_ptr<Completion>> completions;
  for (const auto& prompt : prompts) {
    CompletionRequest batched = request(prompt, kTokens);
    batched.keep_logits = true;
    completions.push_back(scheduler.submit(batched));
  }
  // All done before the references run: the model serves one thread at a time.
  for (const auto& completion : completions) completion->wait();
  for (size_t index = 0; index < prompts.size(); ++index) {
    Generator alone(*tiny_model.model, KvCacheKind::prealloc, 64, greedy());
    GenerationOptions generation;
    generation.max_new_tokens = kTokens;
    generation.ignore_eos = true;
    generation.keep_logits = true;
    GenerationResult expected = alone.generate(prompts[index], generation);
    EXPECT_EQ(completions[index]->generated(), expected.generated) << "request " << index;
    std::vector<std::vector<float>> logits = completions[index]->logits();
    ASSERT_EQ(logits.size(), expected.logits.size());
    for (size_t step = 0; step < logits.size(); ++step) {
      EXPECT_LE(relative_l2(logits[step], expected.logits[step]), 1e-5)
          << "request " << index << " step " << step;
    }
    EXPECT_EQ(completions[index]->finish_reason(), FinishReason::length);
    EXPECT_EQ(completions[index]->text(),
              tiny_model.tokenizer.decode(expected.generated, true));
  }
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.requests_finished, 6);
  EXPECT_EQ(stats.active_slots, 0);
  EXPECT_EQ(stats.completion_tokens, 6 * kTokens);
  int64_t prompt_tokens = 0;
  for (const auto& prompt : prompts) prompt_tokens += static_cast<int64_t>(prompt.size());
  EXPECT_EQ(stats.prompt_tokens, prompt_tokens);
}

TEST(Scheduler, StreamedUpdatesAddUpToTheTextAndEndWithAStopString) {
  TinyModel& tiny_model = tiny();
  SchedulerOptions options = slots_of(2, 64);
  Scheduler scheduler(*tiny_model.model, tiny_model.tokenizer, options);
  std::vector<uint32_t> prompt = test_prompt_ids(5, tiny_model.vocab());
  std::shared_ptr<Completion> free_run = scheduler.submit(request(prompt, 20));
  free_run->wait();
  const std::string text = free_run->text();
  ASSERT_GE(text.size(), 6u);
  // A stop string taken from the middle of the free run's text ends the same run there.
  const std::string stop = text.substr(text.size() / 2, 3);
  CompletionRequest stopped = request(prompt, 20);
  stopped.stop = {stop};
  std::shared_ptr<Completion> completion = scheduler.submit(stopped);
  std::string streamed;
  while (true) {
    std::optional<CompletionUpdate> update = completion->next(std::chrono::seconds(30));
    ASSERT_TRUE(update.has_value());
    streamed += update->text;
    if (update->finished) {
      EXPECT_EQ(update->finish_reason, FinishReason::stop);
      break;
    }
  }
  EXPECT_EQ(streamed, text.substr(0, text.find(stop)));
  EXPECT_EQ(completion->text(), streamed);
}

TEST(Scheduler, ACompletionEndsWithLengthWhenTheContextIsFull) {
  TinyModel& tiny_model = tiny();
  SchedulerOptions options = slots_of(1, 16);
  Scheduler scheduler(*tiny_model.model, tiny_model.tokenizer, options);
  std::shared_ptr<Completion> completion =
      scheduler.submit(request(test_prompt_ids(13, tiny_model.vocab()), 100));
  completion->wait();
  EXPECT_EQ(completion->generated().size(), 3u);  // 13 + 3 fill the 16 positions.
  EXPECT_EQ(completion->finish_reason(), FinishReason::length);
}

TEST(Scheduler, ACancelledCompletionFreesItsSlot) {
  TinyModel& tiny_model = tiny();
  SchedulerOptions options = slots_of(1, 4096);
  options.queue_limit = 1;
  Scheduler scheduler(*tiny_model.model, tiny_model.tokenizer, options);
  std::vector<uint32_t> prompt = test_prompt_ids(4, tiny_model.vocab());
  std::shared_ptr<Completion> running = scheduler.submit(request(prompt, 4000));
  ASSERT_TRUE(running->next(std::chrono::seconds(30)).has_value());  // It holds the slot.
  std::shared_ptr<Completion> waiting = scheduler.submit(request(prompt, 2));
  EXPECT_THROW(scheduler.submit(request(prompt, 2)), QueueFull);
  running->cancel();
  running->wait();
  EXPECT_EQ(running->finish_reason(), FinishReason::cancelled);
  EXPECT_LT(running->generated().size(), 4000u);
  waiting->wait();  // The freed slot runs the waiting request.
  EXPECT_EQ(waiting->finish_reason(), FinishReason::length);
  EXPECT_EQ(waiting->generated().size(), 2u);
  EXPECT_EQ(scheduler.stats().active_slots, 0);
}

TEST(Scheduler, FreeSlotsTakeRequestsBeyondTheQueueLimit) {
  TinyModel& tiny_model = tiny();
  SchedulerOptions options = slots_of(2, 4096);
  options.queue_limit = 0;
  Scheduler scheduler(*tiny_model.model, tiny_model.tokenizer, options);
  std::vector<uint32_t> prompt = test_prompt_ids(4, tiny_model.vocab());
  // Submitted at once, before the engine admits either: both have a slot.
  std::shared_ptr<Completion> first = scheduler.submit(request(prompt, 4000));
  std::shared_ptr<Completion> second = scheduler.submit(request(prompt, 4000));
  ASSERT_TRUE(first->next(std::chrono::seconds(30)).has_value());
  ASSERT_TRUE(second->next(std::chrono::seconds(30)).has_value());
  EXPECT_THROW(scheduler.submit(request(prompt, 2)), QueueFull);
  first->cancel();
  second->cancel();
  first->wait();
  second->wait();
  EXPECT_GT(first->completion_tokens(), 0);
}

TEST(Scheduler, StopCancelsRunningAndQueuedRequestsAndRefusesNewOnes) {
  TinyModel& tiny_model = tiny();
  SchedulerOptions options = slots_of(1, 4096);
  Scheduler scheduler(*tiny_model.model, tiny_model.tokenizer, options);
  std::vector<uint32_t> prompt = test_prompt_ids(4, tiny_model.vocab());
  std::shared_ptr<Completion> running = scheduler.submit(request(prompt, 4000));
  std::shared_ptr<Completion> queued = scheduler.submit(request(prompt, 4000));
  ASSERT_TRUE(running->next(std::chrono::seconds(30)).has_value());
  scheduler.stop();
  EXPECT_EQ(running->finish_reason(), FinishReason::cancelled);
  EXPECT_EQ(queued->finish_reason(), FinishReason::cancelled);
  EXPECT_TRUE(queued->generated().empty());
  EXPECT_THROW(scheduler.submit(request(prompt, 2)), Error);
}

// The expected run of `prompt` alone, with a fresh cache.
GenerationResult alone(const std::vector<uint32_t>& prompt, int64_t tokens) {
  Generator generator(*tiny().model, KvCacheKind::prealloc, 64, greedy());
  GenerationOptions generation;
  generation.max_new_tokens = tokens;
  generation.ignore_eos = true;
  generation.keep_logits = true;
  return generator.generate(prompt, generation);
}

TEST(Scheduler, ARequestGoesToTheSlotWhoseCacheSharesTheLongestPrefixAndPrefillsTheRest) {
  TinyModel& tiny_model = tiny();
  Scheduler scheduler(*tiny_model.model, tiny_model.tokenizer, slots_of(2, 64));
  std::vector<uint32_t> first = test_prompt_ids(10, tiny_model.vocab());
  std::vector<uint32_t> other = first;
  other[0] = (other[0] + 1) % tiny_model.vocab();
  std::shared_ptr<Completion> a = scheduler.submit(request(first, 5));
  std::shared_ptr<Completion> b = scheduler.submit(request(other, 5));
  a->wait();
  b->wait();
  EXPECT_EQ(a->cached_tokens(), 0);
  EXPECT_EQ(b->cached_tokens(), 0);

  // The next turn of the first conversation: its prompt, the answer and new tokens.
  std::vector<uint32_t> turn = first;
  for (uint32_t id : a->generated()) turn.push_back(id);
  for (uint32_t id : test_prompt_ids(7, tiny_model.vocab())) turn.push_back((id + 3) % 97);
  CompletionRequest next = request(turn, 6);
  next.keep_logits = true;
  std::shared_ptr<Completion> c = scheduler.submit(next);
  c->wait();
  // The slot held the prompt and all generated tokens but the last.
  EXPECT_EQ(c->cached_tokens(), 10 + 4);
  GenerationResult expected = alone(turn, 6);
  EXPECT_EQ(c->generated(), expected.generated);
  std::vector<std::vector<float>> logits = c->logits();
  ASSERT_EQ(logits.size(), expected.logits.size());
  for (size_t step = 0; step < logits.size(); ++step) {
    EXPECT_LE(relative_l2(logits[step], expected.logits[step]), 1e-5) << "step " << step;
  }
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.reused_prompt_tokens, 14);
  EXPECT_EQ(stats.prompt_tokens, 10 + 10 + static_cast<int64_t>(turn.size()) - 14);

  // A request that asks for no reuse prefills the whole prompt.
  CompletionRequest whole = request(turn, 2);
  whole.cache_prompt = false;
  std::shared_ptr<Completion> d = scheduler.submit(whole);
  d->wait();
  EXPECT_EQ(d->cached_tokens(), 0);
  EXPECT_EQ(d->generated(), std::vector<uint32_t>(expected.generated.begin(),
                                                  expected.generated.begin() + 2));
}

TEST(Scheduler, WithoutPromptCachingNoRequestReuses) {
  TinyModel& tiny_model = tiny();
  SchedulerOptions options = slots_of(1, 64);
  options.cache_prompt = false;
  Scheduler scheduler(*tiny_model.model, tiny_model.tokenizer, options);
  std::vector<uint32_t> prompt = test_prompt_ids(10, tiny_model.vocab());
  scheduler.submit(request(prompt, 3))->wait();
  std::shared_ptr<Completion> again = scheduler.submit(request(prompt, 3));
  again->wait();
  EXPECT_EQ(again->cached_tokens(), 0);
  EXPECT_EQ(scheduler.stats().prompt_tokens, 20);
  EXPECT_EQ(again->generated(), alone(prompt, 3).generated);
}

TEST(Scheduler, RefusesRequestsItCannotRun) {
  TinyModel& tiny_model = tiny();
  SchedulerOptions options = slots_of(1, 8);
  Scheduler scheduler(*tiny_model.model, tiny_model.tokenizer, options);
  EXPECT_THROW(scheduler.submit(request({}, 4)), Error);
  EXPECT_THROW(scheduler.submit(request({static_cast<uint32_t>(tiny_model.vocab())}, 4)), Error);
  EXPECT_THROW(scheduler.submit(request(test_prompt_ids(8, tiny_model.vocab()), 4)), Error);
  EXPECT_THROW(scheduler.submit(request({1, 2}, 0)), Error);
  CompletionRequest hot = request({1, 2}, 4);
  hot.sampling.temperature = -1;
  EXPECT_THROW(scheduler.submit(hot), Error);
  SchedulerOptions no_slots = options;
  no_slots.slots = 0;
  EXPECT_THROW(Scheduler(*tiny_model.model, tiny_model.tokenizer, no_slots), Error);
}

}  // namespace
}  // namespace fornace
