// The persistent thread pool: workers spin briefly for the next job, then sleep on a futex.
#include "cpu/thread_pool.h"

#include <sched.h>

#include <chrono>

#include "core/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define FORNACE_PAUSE() _mm_pause()
#else
#define FORNACE_PAUSE() std::this_thread::yield()
#endif

namespace fornace {

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& ThreadPool::global() {
  static ThreadPool* pool = new ThreadPool(available_cores());  // Outlives other statics.
  return *pool;
}

ThreadPool::ThreadPool(int threads) { start(threads); }
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
  // Read before the threads start, so a job dispatched before a worker first runs is not missed.
  const uint64_t seen = generation_.load(std::memory_order_acquire);
  for (int index = 1; index < threads; ++index) {
    workers_.emplace_back([this, index, seen] { worker_loop(index, seen); });
  }
}

void ThreadPool::stop() {
  stopping_ = true;
  generation_.fetch_add(1);
  generation_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

void ThreadPool::worker_loop(int index, uint64_t seen) {
  while (true) {
    // Spin for about a millisecond so that back-to-back ops in a decode step do not sleep.
    auto spin_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
    uint64_t current = generation_.load(std::memory_order_acquire);
    while (current == seen) {
      for (int i = 0; i < 64 && current == seen; ++i) {
        FORNACE_PAUSE();
        current = generation_.load(std::memory_order_acquire);
      }
      if (current != seen || std::chrono::steady_clock::now() > spin_until) break;
    }
    if (current == seen) {
      // Counted before the wait re-checks the generation: a dispatcher that bumps the
      // generation either sees this sleeper and wakes it, or this wait sees the new generation.
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      generation_.wait(seen, std::memory_order_seq_cst);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      current = generation_.load(std::memory_order_acquire);
    }
    seen = current;
    if (stopping_.load()) return;
    if (index < parts_) {
      int64_t begin = count_ * index / parts_;
      int64_t end = count_ * (index + 1) / parts_;
      invoker_(context_, begin, end);
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::dispatch(int64_t count, int64_t grain, void* context, Invoker invoker) {
  if (count <= 0) return;
  int64_t max_parts = grain > 0 ? std::max<int64_t>(1, count / grain) : count;
  int parts = static_cast<int>(std::min<int64_t>(threads_, max_parts));
  if (parts <= 1 || running_) {
    invoker(context, 0, count);
    return;
  }
  running_ = true;
  context_ = context;
  invoker_ = invoker;
  count_ = count;
  parts_ = parts;
  pending_.store(threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  // Spinning workers see the new generation by themselves; only sleepers need the syscall.
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
  invoker(context, 0, count / parts);
  while (pending_.load(std::memory_order_acquire) != 0) FORNACE_PAUSE();
  running_ = false;
}

void set_num_threads(int threads) {
  ThreadPool::global().set_threads(threads == 0 ? available_cores() : threads);
}

int num_threads() { return ThreadPool::global().threads(); }

}  // namespace fornace
