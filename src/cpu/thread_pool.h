// A persistent thread pool: the calling thread and the workers split an index range.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

#include "core/memory.h"

namespace fornace {

class ThreadPool {
 public:
  // The process-wide pool. Starts with one thread per core that the process may use.
  static ThreadPool& global();

  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_; }
  // Restarts the workers with a new count (1 means: run on the caller only).
  void set_threads(int threads);

  // Calls body(begin, end) over [0, count) split into contiguous parts, at most one per thread
  // and each at least `grain` long: part i is [count * i / parts, count * (i + 1) / parts).
  // Each part runs once, on whichever thread claims it first (the caller claims parts too), so
  // a worker that the OS has not scheduled yet never holds the caller up; parts may run one
  // after another on one thread. Returns when all parts are done. Not reentrant: a body that
  // calls run() again runs that inner range inline. Bodies must not throw.
  template <typename Body>
  void run(int64_t count, int64_t grain, Body&& body) {
    run_parts(count, parts_for_grain(count, grain), body);
  }

  // Like run(), but [0, count) is cut into many parts that threads claim one at a time as they
  // finish, guided: each of the first parts is 1 / (2 x threads) of what is left, then parts of
  // `min_part` finish the range. A thread that runs slower (descheduled, or sharing its core)
  // takes fewer parts, and the one that finishes first waits at most for one small part.
  template <typename Body>
  void run_balanced(int64_t count, int64_t min_part, Body&& body) {
    if (count <= 0) return;
    if (threads_ <= 1 || running_) {  // One thread, or called from inside a job: inline.
      body(int64_t{0}, count);
      return;
    }
    guided_ = GuidedParts(count, std::max<int64_t>(1, min_part), threads_);
    run_parts(count, guided_.parts(), body);
    guided_ = GuidedParts();
  }

  // The boundaries of run_balanced's parts (exposed for tests).
  class GuidedParts {
   public:
    GuidedParts() = default;
    GuidedParts(int64_t count, int64_t min_part, int threads);
    int64_t parts() const { return geometric_parts_ + tail_parts_; }
    bool active() const { return count_ > 0; }
    // First index of `part`; begin(parts()) is the count.
    int64_t begin(int64_t part) const;

   private:
    int64_t count_ = 0;
    double ratio_ = 0;  // Of the range left after each geometric part.
    int64_t geometric_parts_ = 0;
    int64_t tail_begin_ = 0;
    int64_t tail_parts_ = 0;
  };

 private:
  using Invoker = void (*)(void* context, int64_t begin, int64_t end);
  template <typename Body>
  void run_parts(int64_t count, int64_t parts, Body& body) {
    dispatch(count, parts, &body, [](void* context, int64_t begin, int64_t end) {
      (*static_cast<Body*>(context))(begin, end);
    });
  }
  int64_t parts_for_grain(int64_t count, int64_t grain) const;
  void dispatch(int64_t count, int64_t parts, void* context, Invoker invoker);
  void start(int threads);
  void stop();
  // Wakes the workers asleep in worker_loop.
  void wake_sleepers();
  // `seen` is the job state when the worker was started; it joins every later job.
  void worker_loop(uint64_t seen);
  // Claims and runs parts of the job in `state` until none is left; returns the last state seen.
  uint64_t claim_parts(uint64_t state);

  int threads_ = 1;
  std::vector<std::thread> workers_;
  // The current job. Written by the caller before it publishes the job in state_, and read by
  // a thread only after it has claimed a part, which the caller waits for.
  void* context_ = nullptr;
  Invoker invoker_ = nullptr;
  int64_t count_ = 0;
  // The caller's run counters, phase and op, which the workers take on while they run its parts.
  memory::ThreadContext caller_context_;
  // Job state: generation (high 32 bits), part count (16 bits), next unclaimed part (16 bits).
  // Claiming a part is a compare-exchange on the whole word, so a stale claim never succeeds.
  std::atomic<uint64_t> state_{0};
  std::atomic<int> done_parts_{0};
  // Workers asleep on wakeups_ (or about to be); dispatch skips the futex wake when zero.
  std::atomic<int> sleepers_{0};
  // Bumped to wake sleeping workers. Workers sleep on this 32-bit word, which libstdc++ waits
  // on with a futex directly, rather than on the 64-bit state_, whose wait goes through a proxy
  // word: once a worker stayed asleep there after stop() changed state_ and notified.
  std::atomic<uint32_t> wakeups_{0};
  std::atomic<bool> stopping_{false};
  bool running_ = false;
  GuidedParts guided_;  // The part boundaries of a run_balanced job; inactive for run().
};

// The number of cores this process may run on.
int available_cores();
// Sets the global pool's thread count; 0 means available_cores().
void set_num_threads(int threads);
int num_threads();

}  // namespace fornace
