// Memory accounting: live and peak bytes, per-phase and per-op allocation counts and op times,
// released bytes, and the copy counters.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "core/memory.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "ops/copy.h"
#include "ops/creation.h"

namespace fornace {
namespace {

const OpMemory* find_op(const std::vector<OpMemory>& ops, const std::string& name, Phase phase) {
  auto found = std::find_if(ops.begin(), ops.end(), [&](const OpMemory& entry) {
    return entry.op == name && entry.phase == phase;
  });
  return found == ops.end() ? nullptr : &*found;
}

// Returns once the steady clock has moved on by `ms` (a lower bound for a timed scope).
void wait_ms(double ms) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
             .count() < ms) {
  }
}

TEST(Memory, LiveAndPeakBytesFollowAllocationsAndReleases) {
  memory::reset_counters();
  DeviceMemory start = memory::device_memory();
  {
    Tensor first = Tensor::empty({1000}, DType::f32);  // 4000 bytes
    EXPECT_EQ(memory::device_memory().live_bytes, start.live_bytes + 4000);
    {
      Tensor second = Tensor::empty({500}, DType::bf16);  // 1000 bytes
      EXPECT_EQ(memory::device_memory().live_bytes, start.live_bytes + 5000);
    }
    EXPECT_EQ(memory::device_memory().live_bytes, start.live_bytes + 4000);
  }
  DeviceMemory end = memory::device_memory();
  EXPECT_EQ(end.live_bytes, start.live_bytes);
  EXPECT_EQ(end.peak_bytes, start.live_bytes + 5000);
  EXPECT_EQ(end.allocated_bytes - start.allocated_bytes, 5000);
}

// A freed buffer of 2 MiB pages serves the next buffer that rounds to its size, and no other;
// while kept, no tensor counts it. (Sizes of their own, so other tests' buffers do not answer.)
TEST(ReusableBuffers, AFreedLargeBufferServesTheNextOfItsSizeOnly) {
  if (!buffers_are_reused()) GTEST_SKIP() << "FORNACE_HUGE_PAGES=0 or a sanitizer build: no reuse";
  const size_t bytes = 13 * kHugePageBytes + 4096;  // 14 pages of 2 MiB
  const DeviceMemory start = memory::device_memory();
  const void* freed = nullptr;
  {
    std::shared_ptr<Storage> storage = Storage::allocate(bytes);
    freed = storage->data();
  }
  EXPECT_EQ(memory::device_memory().live_bytes, start.live_bytes);
  EXPECT_GE(reusable_buffer_bytes(), 14 * kHugePageBytes);
  std::shared_ptr<Storage> larger = Storage::allocate(15 * kHugePageBytes);
  EXPECT_NE(larger->data(), freed);
  std::shared_ptr<Storage> smaller = Storage::allocate(13 * kHugePageBytes + 1);
  EXPECT_EQ(smaller->data(), freed);
}

TEST(ReusableBuffers, TheBytesKeptStayWithinTheLimit) {
  if (!buffers_are_reused()) GTEST_SKIP() << "FORNACE_HUGE_PAGES=0 or a sanitizer build: no reuse";
  std::vector<std::shared_ptr<Storage>> buffers;
  for (size_t pages = 20; pages < 30; ++pages) {
    buffers.push_back(Storage::allocate(pages * kHugePageBytes));
  }
  buffers.clear();  // 490 MiB freed
  EXPECT_LE(reusable_buffer_bytes(), kReusableBufferLimit);
  EXPECT_GE(reusable_buffer_bytes(), kReusableBufferLimit - 29 * kHugePageBytes);
}

TEST(Memory, ViewsAllocateNothing) {
  Tensor base = Tensor::empty({4, 8}, DType::f32);
  int64_t live = memory::device_memory().live_bytes;
  Tensor view = base.transpose(0, 1).narrow(0, 1, 3).unsqueeze(0).broadcast_as({2, 3, 4});
  EXPECT_EQ(memory::device_memory().live_bytes, live);
}

TEST(Memory, PhasesCountAllocatedReleasedAndPeak) {
  memory::reset_counters();
  int64_t baseline = memory::device_memory().live_bytes;
  {
    memory::PhaseScope prefill(Phase::prefill);
    Tensor kept = Tensor::empty({256}, DType::f32);  // 1024 bytes
    {
      Tensor temporary = Tensor::empty({512}, DType::f32);  // 2048 bytes, released in prefill
    }
    memory::PhaseScope decode(Phase::decode);
    Tensor step = Tensor::empty({64}, DType::f32);  // 256 bytes
    EXPECT_EQ(memory::phase(), Phase::decode);
  }  // step is released in decode, kept in prefill (the scopes unwind in reverse order).
  EXPECT_EQ(memory::phase(), Phase::other);
  PhaseMemory prefill = memory::phase_memory(Phase::prefill);
  PhaseMemory decode = memory::phase_memory(Phase::decode);
  EXPECT_EQ(prefill.allocated_bytes, 1024 + 2048);
  EXPECT_EQ(prefill.allocations, 2);
  EXPECT_EQ(prefill.released_bytes, 2048 + 1024);
  EXPECT_EQ(prefill.peak_live_bytes, baseline + 1024 + 2048);
  EXPECT_EQ(decode.allocated_bytes, 256);
  EXPECT_EQ(decode.released_bytes, 256);
  EXPECT_EQ(decode.peak_live_bytes, baseline + 1024 + 256);
  EXPECT_EQ(memory::phase_memory(Phase::load).allocations, 0);
}

TEST(Memory, OpsTagTheirOwnAllocations) {
  // contiguous() of a strided view allocates under its own name.
  Tensor strided = zeros({8, 4}).transpose(0, 1);
  memory::reset_counters();
  Tensor copy = contiguous(strided);
  std::vector<OpMemory> ops = memory::op_memory();
  const OpMemory* contiguous_entry = find_op(ops, "contiguous", Phase::other);
  ASSERT_NE(contiguous_entry, nullptr);
  EXPECT_EQ(contiguous_entry->allocated_bytes, 8 * 4 * 4);
  EXPECT_EQ(contiguous_entry->allocations, 1);
}

TEST(Memory, OpScopeAggregatesPerPhaseLargestFirst) {
  memory::reset_counters();
  {
    memory::PhaseScope phase(Phase::prefill);
    memory::OpScope outer("attention_block");
    Tensor scratch = Tensor::empty({100}, DType::f32);
    memory::OpScope inner("softmax");  // Nested: still charged to attention_block.
    Tensor nested = Tensor::empty({50}, DType::f32);
  }
  {
    memory::PhaseScope phase(Phase::decode);
    memory::OpScope op("attention_block");
    Tensor small = Tensor::empty({10}, DType::f32);
  }
  std::vector<OpMemory> ops = memory::op_memory();
  const OpMemory* prefill = find_op(ops, "attention_block", Phase::prefill);
  const OpMemory* decode = find_op(ops, "attention_block", Phase::decode);
  ASSERT_NE(prefill, nullptr);
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(prefill->allocated_bytes, 600);
  EXPECT_EQ(prefill->allocations, 2);
  EXPECT_EQ(decode->allocated_bytes, 40);
  EXPECT_EQ(find_op(ops, "softmax", Phase::prefill), nullptr);
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end(), [](const OpMemory& a, const OpMemory& b) {
    return a.allocated_bytes > b.allocated_bytes;
  }));
  EXPECT_STREQ(memory::current_op(), "other");
}

TEST(Memory, OpTimingChargesTheOutermostScopeWhileOn) {
  memory::reset_counters();
  { memory::OpScope untimed("untimed_op"); }
  EXPECT_TRUE(memory::op_times().empty());
  memory::set_op_timing(true);
  {
    memory::PhaseScope phase(Phase::decode);
    for (int call = 0; call < 3; ++call) {
      memory::OpScope outer("timed_op");
      memory::OpScope inner("inner_op");  // Nested: its time is the outer op's.
      wait_ms(2);
    }
  }
  memory::set_op_timing(false);
  { memory::OpScope after("after_op"); }
  std::vector<OpTime> times = memory::op_times();
  ASSERT_EQ(times.size(), 1u);
  EXPECT_EQ(times[0].op, "timed_op");
  EXPECT_EQ(times[0].phase, Phase::decode);
  EXPECT_EQ(times[0].calls, 3);
  EXPECT_GE(times[0].ms, 6.0);
  memory::reset_counters();
  EXPECT_TRUE(memory::op_times().empty());
}

TEST(Memory, CopyCountersSplitContiguousAndStridedBytes) {
  Tensor source = zeros({16, 8});
  memory::reset_counters();
  Tensor destination = Tensor::empty({16, 8}, DType::f32);
  copy_into(destination, source);
  EXPECT_EQ(memory::copy_bytes().contiguous, 16 * 8 * 4);
  EXPECT_EQ(memory::copy_bytes().strided, 0);
  copy_into(destination.transpose(0, 1), zeros({8, 16}));
  EXPECT_EQ(memory::copy_bytes().strided, 16 * 8 * 4);
  memory::reset_counters();
  EXPECT_EQ(memory::copy_bytes().contiguous, 0);
  EXPECT_EQ(memory::copy_bytes().strided, 0);
}

TEST(Memory, ResetCountersKeepsLiveBytesAndRestartsPeak) {
  Tensor kept = Tensor::empty({1000}, DType::f32);
  {
    Tensor freed = Tensor::empty({1000}, DType::f32);
  }
  memory::reset_counters();
  DeviceMemory after = memory::device_memory();
  EXPECT_EQ(after.peak_bytes, after.live_bytes);
  EXPECT_EQ(memory::phase_memory(Phase::other).allocations, 0);
  EXPECT_TRUE(memory::op_memory().empty());
}

TEST(Memory, ResidentSetSizeIsReported) {
  // Current first: the peak read after it covers it even when memory grows in between.
  const int64_t current = current_rss_bytes();
  EXPECT_GT(current, 0);
  EXPECT_GE(peak_rss_bytes(), current);
}

}  // namespace
}  // namespace fornace
