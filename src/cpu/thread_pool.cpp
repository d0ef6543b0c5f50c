// The persistent thread pool: workers spin briefly for the next job, then sleep on a futex;
// parts of a job are claimed with a compare-exchange by the caller and the workers alike.
#include "cpu/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <chrono>

#include "core/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define FORNACE_PAUSE() _mm_pause()
#else
#define FORNACE_PAUSE() std::this_thread::yield()
#endif

namespace fornace {
namespace {

constexpr uint64_t kGenerationUnit = uint64_t{1} << 32;
constexpr int kMaxParts = 0xffff;

uint64_t next_part(uint64_t state) { return state & 0xffff; }
uint64_t part_count(uint64_t state) { return (state >> 16) & 0xffff; }

}  // namespace

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& ThreadPool::global() {
  static ThreadPool* pool = new ThreadPool(available_cores());  // Outlives other statics.
  return *pool;
}

ThreadPool::ThreadPool(int threads) {
  if (threads < 1) fail("thread pool: thread count must be at least 1, got ", threads);
  start(threads);
}
ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::set_threads(int threads) {
  if (threads < 1) fail("thread pool: thread count must be at least 1, got ", threads);
  if (threads == threads_) return;
  stop();
  start(threads);
}

void ThreadPool::start(int threads) {
  threads_ = threads;
  stopping_ = false;
  const uint64_t seen = state_.load(std::memory_order_acquire);
  for (int index = 1; index < threads; ++index) {
    workers_.emplace_back([this, seen] { worker_loop(seen); });
  }
}

void ThreadPool::wake_sleepers() {
  wakeups_.fetch_add(1, std::memory_order_seq_cst);
  wakeups_.notify_all();
}

void ThreadPool::stop() {
  stopping_ = true;
  state_.fetch_add(kGenerationUnit, std::memory_order_seq_cst);
  wake_sleepers();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

uint64_t ThreadPool::claim_parts(uint64_t state) {
  while (next_part(state) < part_count(state)) {
    if (!state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;  // `state` now holds the current word; check it again.
    }
    memory::set_thread_context(caller_context_);
    const int64_t part = static_cast<int64_t>(next_part(state));
    const int64_t parts = static_cast<int64_t>(part_count(state));
    if (guided_.active()) {
      invoker_(context_, guided_.begin(part), guided_.begin(part + 1));
    } else {
      invoker_(context_, count_ * part / parts, count_ * (part + 1) / parts);
    }
    done_parts_.fetch_add(1, std::memory_order_release);
    state = state_.load(std::memory_order_acquire);
  }
  return state;
}

void ThreadPool::worker_loop(uint64_t seen) {
  while (true) {
    // Spin for about a millisecond so that back-to-back ops in a decode step do not sleep.
    auto spin_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
    uint64_t current = state_.load(std::memory_order_acquire);
    while (current == seen) {
      for (int i = 0; i < 64 && current == seen; ++i) {
        FORNACE_PAUSE();
        current = state_.load(std::memory_order_acquire);
      }
      if (current != seen || std::chrono::steady_clock::now() > spin_until) break;
    }
    if (current == seen) {
      // Counted before the state is checked again: a caller that publishes a job after that
      // check sees this sleeper and bumps wakeups_, so the wait returns at once or is woken.
      const uint32_t wakeups = wakeups_.load(std::memory_order_seq_cst);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      if (state_.load(std::memory_order_seq_cst) == seen) {
        wakeups_.wait(wakeups, std::memory_order_seq_cst);
      }
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      current = state_.load(std::memory_order_acquire);
    }
    if (stopping_.load()) return;
    seen = claim_parts(current);
    memory::set_thread_context({});
  }
}

ThreadPool::GuidedParts::GuidedParts(int64_t count, int64_t min_part, int threads)
    : count_(count), ratio_(1.0 - 1.0 / (2.0 * threads)) {
  // Geometric parts while they stay above min_part: part i leaves count * ratio^(i + 1).
  double left = static_cast<double>(count);
  while (left * (1.0 - ratio_) >= static_cast<double>(min_part) &&
         geometric_parts_ + 1 < kMaxParts / 2) {
    left *= ratio_;
    ++geometric_parts_;
  }
  tail_begin_ = begin(geometric_parts_);
  // Tail parts of min_part to 2 x min_part - 1.
  tail_parts_ = std::clamp<int64_t>((count - tail_begin_) / min_part, 1, kMaxParts / 2);
  if (tail_begin_ == count) tail_parts_ = 0;
}

int64_t ThreadPool::GuidedParts::begin(int64_t part) const {
  if (part <= geometric_parts_) {
    return count_ - static_cast<int64_t>(
                        std::llround(static_cast<double>(count_) * std::pow(ratio_, part)));
  }
  const int64_t tail_part = part - geometric_parts_;
  return tail_begin_ + (count_ - tail_begin_) * tail_part / tail_parts_;
}

int64_t ThreadPool::parts_for_grain(int64_t count, int64_t grain) const {
  int64_t max_parts = grain > 0 ? std::max<int64_t>(1, count / grain) : count;
  return std::min<int64_t>(threads_, max_parts);
}

void ThreadPool::dispatch(int64_t count, int64_t requested_parts, void* context,
                          Invoker invoker) {
  if (count <= 0) return;
  int parts = static_cast<int>(std::min<int64_t>({requested_parts, count, kMaxParts}));
  if (parts <= 1 || running_) {
    invoker(context, 0, count);
    return;
  }
  running_ = true;
  caller_context_ = memory::thread_context();
  context_ = context;
  invoker_ = invoker;
  count_ = count;
  done_parts_.store(0, std::memory_order_relaxed);
  const uint64_t generation = (state_.load(std::memory_order_relaxed) >> 32) + 1;
  const uint64_t state = (generation << 32) | (static_cast<uint64_t>(parts) << 16);
  state_.store(state, std::memory_order_seq_cst);
  // Spinning workers see the new state by themselves; only sleepers need the syscall.
  if (sleepers_.load(std::memory_order_seq_cst) > 0) wake_sleepers();
  claim_parts(state);
  // Only parts that a worker has claimed (and so is running) can still be outstanding.
  while (done_parts_.load(std::memory_order_acquire) != parts) FORNACE_PAUSE();
  running_ = false;
}

void set_num_threads(int threads) {
  ThreadPool::global().set_threads(threads == 0 ? available_cores() : threads);
}

int num_threads() { return ThreadPool::global().threads(); }

}  // namespace fornace
