// The thread pool: every index runs once in contiguous parts, workers wake from sleep, a job
// dispatched right after the workers restart is not lost, nested runs stay inline, and workers
// count into the caller's run.
#include "cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace fornace {
namespace {

// Runs [0, count) and returns the parts that the body saw, sorted by begin.
std::vector<std::pair<int64_t, int64_t>> parts_of(ThreadPool& pool, int64_t count, int64_t grain,
                                                  std::vector<int>& hits) {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> parts;
  hits.assign(count, 0);
  pool.run(count, grain, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) ++hits[index];
    std::lock_guard<std::mutex> lock(mutex);
    parts.emplace_back(begin, end);
  });
  std::sort(parts.begin(), parts.end());
  return parts;
}

TEST(ThreadPool, RunsEveryIndexOnceInOneContiguousPartPerThread) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t count : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{1000}}) {
      std::vector<int> hits;
      auto parts = parts_of(pool, count, 1, hits);
      for (int64_t index = 0; index < count; ++index) ASSERT_EQ(hits[index], 1) << index;
      EXPECT_EQ(static_cast<int64_t>(parts.size()), std::min<int64_t>(threads, count));
      int64_t expected_begin = 0;
      for (auto [begin, end] : parts) {
        EXPECT_EQ(begin, expected_begin);
        EXPECT_LT(begin, end);
        expected_begin = end;
      }
      EXPECT_EQ(expected_begin, count);
    }
  }
}

TEST(ThreadPool, GrainBoundsThePartCount) {
  ThreadPool pool(2);
  std::vector<int> hits;
  EXPECT_EQ(parts_of(pool, 10, 6, hits).size(), 1u);
  EXPECT_EQ(parts_of(pool, 12, 6, hits).size(), 2u);
  EXPECT_EQ(parts_of(pool, 0, 1, hits).size(), 0u);
}

TEST(ThreadPool, ManyBackToBackJobsAllComplete) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int job = 0; job < 1000; ++job) {
    pool.run(64, 1, [&](int64_t begin, int64_t end) { total += end - begin; });
  }
  EXPECT_EQ(total.load(), int64_t{1000} * 64);
}

TEST(ThreadPool, WakesWorkersThatWentToSleep) {
  ThreadPool pool(2);
  for (int round = 0; round < 5; ++round) {
    // Longer than the workers' spin, so they sleep on the futex.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<int> hits;
    EXPECT_EQ(parts_of(pool, 100, 1, hits).size(), 2u);
  }
}

TEST(ThreadPool, AJobRightAfterRestartingTheWorkersIsNotLost) {
  ThreadPool pool(1);
  for (int round = 0; round < 50; ++round) {
    pool.set_threads(round % 2 == 0 ? 2 : 3);
    std::vector<int> hits;
    parts_of(pool, 50, 1, hits);
    for (int hit : hits) ASSERT_EQ(hit, 1);
    pool.set_threads(1);
  }
}

TEST(ThreadPool, NestedRunsExecuteInlineOnTheCallingPart) {
  ThreadPool pool(2);
  std::atomic<int64_t> inner_total{0};
  pool.run(2, 1, [&](int64_t begin, int64_t end) {
    for (int64_t index = begin; index < end; ++index) {
      pool.run(10, 1, [&](int64_t inner_begin, int64_t inner_end) {
        inner_total += inner_end - inner_begin;
      });
    }
  });
  EXPECT_EQ(inner_total.load(), 20);
}

TEST(ThreadPool, BalancedRunsCoverEveryIndexOnceInShrinkingParts) {
  ThreadPool pool(2);
  for (int64_t count : {1, 3, 17, 100, 4864, 151936}) {
    for (int64_t min_part : {1, 4, 36}) {
      std::mutex mutex;
      std::vector<std::pair<int64_t, int64_t>> parts;
      std::vector<int> hits(count, 0);
      pool.run_balanced(count, min_part, [&](int64_t begin, int64_t end) {
        for (int64_t index = begin; index < end; ++index) ++hits[index];
        std::lock_guard<std::mutex> lock(mutex);
        parts.emplace_back(begin, end);
      });
      std::string context = "count " + std::to_string(count) + ", min part " +
                            std::to_string(min_part);
      EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), count) << context;
      std::sort(parts.begin(), parts.end());
      ASSERT_FALSE(parts.empty()) << context;
      // The first part is at most a quarter of the range (1 / (2 x 2 threads)), or a tail part.
      EXPECT_LE(parts.front().second - parts.front().first,
                std::max<int64_t>(2 * min_part - 1, (count + 3) / 4))
          << context;
      // The last part is about min_part: a thread waits at most that long for the other.
      EXPECT_LE(parts.back().second - parts.back().first, 2 * min_part) << context;
    }
  }
}

TEST(ThreadPool, GuidedPartsShrinkGeometricallyThenStayAtTheMinimum) {
  ThreadPool::GuidedParts guided(1000, 10, 2);
  ASSERT_GT(guided.parts(), 4);
  EXPECT_EQ(guided.begin(0), 0);
  EXPECT_EQ(guided.begin(1), 250);  // A quarter of 1,000.
  EXPECT_EQ(guided.begin(2), 437);  // And a quarter of the 750 left: 562.5 left, rounded up.
  EXPECT_EQ(guided.begin(guided.parts()), 1000);
  for (int64_t part = 0; part < guided.parts(); ++part) {
    int64_t size = guided.begin(part + 1) - guided.begin(part);
    EXPECT_GE(size, 10) << "part " << part;
    EXPECT_LE(size, 250) << "part " << part;
  }
  EXPECT_LT(guided.begin(guided.parts()) - guided.begin(guided.parts() - 1), 20);
}

TEST(ThreadPool, WorkersCountIntoTheCallersRunAndPhase) {
  ThreadPool pool(3);
  memory::RunCounters run;
  std::atomic<int> parts_in_decode{0};
  std::atomic<int> parts{0};
  std::set<std::thread::id> threads;
  std::mutex mutex;
  // Another thread copies at the same time, outside the run.
  std::atomic<bool> done{false};
  std::thread other([&] {
    while (!done) memory::record_copy(1000, false);
  });
  {
    memory::RunScope counting(run);
    memory::PhaseScope phase(Phase::decode);
    for (int job = 0; job < 50; ++job) {
      std::atomic<int> started{0};
      pool.run(3, 1, [&](int64_t begin, int64_t end) {
        // Each part waits for the other two: three threads run them, two of them workers.
        started += 1;
        while (started < 3) std::this_thread::yield();
        for (int64_t index = begin; index < end; ++index) {
          memory::record_copy(10, false);
          memory::record_copy(7, true, 2);
          memory::record_attention_read(5);
        }
        parts += 1;
        if (memory::phase() == Phase::decode) parts_in_decode += 1;
        std::lock_guard lock(mutex);
        threads.insert(std::this_thread::get_id());
      });
    }
  }
  done = true;
  other.join();
  EXPECT_EQ(run.copied().contiguous, 50 * 3 * 10);
  EXPECT_EQ(run.copied().strided, 50 * 3 * 7);
  EXPECT_EQ(run.copied().strided_runs, 50 * 3 * 2);
  EXPECT_EQ(run.attention_read_bytes.load(), 50 * 3 * 5);
  EXPECT_EQ(parts_in_decode.load(), parts.load());
  EXPECT_EQ(threads.size(), 3u);
  EXPECT_EQ(memory::phase(), Phase::other);
}

TEST(ThreadPool, RejectsAThreadCountBelowOne) { EXPECT_ANY_THROW(ThreadPool(1).set_threads(0)); }

}  // namespace
}  // namespace fornace
