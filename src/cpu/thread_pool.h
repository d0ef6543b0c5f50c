// A persistent thread pool: the calling thread and the workers split an index range.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

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

  // Calls body(begin, end) over [0, count) split into one contiguous part per thread (at most
  // count parts, each at least `grain` long). The caller runs the first part and returns when
  // all are done. Not reentrant: a body must not call run() again.
  template <typename Body>
  void run(int64_t count, int64_t grain, Body&& body) {
    using BodyType = std::remove_reference_t<Body>;
    dispatch(count, grain, &body, [](void* context, int64_t begin, int64_t end) {
      (*static_cast<BodyType*>(context))(begin, end);
    });
  }

 private:
  using Invoker = void (*)(void* context, int64_t begin, int64_t end);
  void dispatch(int64_t count, int64_t grain, void* context, Invoker invoker);
  void start(int threads);
  void stop();
  // `seen` is the job generation when the worker was started; it runs every later one.
  void worker_loop(int index, uint64_t seen);

  int threads_ = 1;
  std::vector<std::thread> workers_;
  // The job currently published to the workers.
  void* context_ = nullptr;
  Invoker invoker_ = nullptr;
  int64_t count_ = 0;
  int parts_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  // Workers asleep on generation_ (or about to be); dispatch skips the futex wake when zero.
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  bool running_ = false;
};

// The number of cores this process may run on.
int available_cores();
// Sets the global pool's thread count; 0 means available_cores().
void set_num_threads(int threads);
int num_threads();

}  // namespace fornace
