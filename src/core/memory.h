// Memory accounting: live and peak bytes per device, per-phase and per-op allocation counts and
// op times, and the bytes that copy kernels move, split into contiguous and strided.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace fornace {

enum class Device : uint8_t { cpu };
constexpr int kNumDevices = 1;
const char* device_name(Device device);

enum class Phase : uint8_t { other, load, prefill, decode };
constexpr int kNumPhases = 4;
const char* phase_name(Phase phase);

struct PhaseMemory {
  int64_t allocated_bytes = 0;  // Bytes allocated while this phase was current.
  int64_t released_bytes = 0;   // Bytes released while this phase was current.
  int64_t peak_live_bytes = 0;  // Highest live bytes seen while this phase was current.
  int64_t allocations = 0;
};

struct OpMemory {
  std::string op;
  Phase phase;
  int64_t allocated_bytes = 0;
  int64_t allocations = 0;
};

// Wall time of the outermost ops on the threads that called them, per (op, phase).
struct OpTime {
  std::string op;
  Phase phase;
  double ms = 0;
  int64_t calls = 0;
};

struct DeviceMemory {
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t allocated_bytes = 0;  // Total ever allocated.
};

struct CopyBytes {
  int64_t contiguous = 0;
  int64_t strided = 0;
  // Unbroken stretches (contiguous on both sides) that the strided bytes were copied in: a
  // strided copy of 128-byte runs costs far more than one of a few long runs.
  int64_t strided_runs = 0;
};

// Process-wide counters. Allocation is counted by Storage; copies by the copy kernels.
namespace memory {

// The counters of one run (a generation, a server's engine): what the threads working for it
// copied, read from the KV cache and allocated, whatever else the process runs at the time.
struct RunCounters {
  std::atomic<int64_t> contiguous_copy_bytes{0};
  std::atomic<int64_t> strided_copy_bytes{0};
  std::atomic<int64_t> strided_copy_runs{0};
  std::atomic<int64_t> attention_read_bytes{0};
  std::atomic<int64_t> allocated_bytes{0};

  CopyBytes copied() const;
};

// What a thread works for: its run's counters (none: process-wide counters only), its phase and
// its op. The thread pool hands the caller's context to the workers that run its parts.
struct ThreadContext {
  RunCounters* run = nullptr;
  Phase phase = Phase::other;
  const char* op = nullptr;
};
ThreadContext thread_context();
void set_thread_context(const ThreadContext& context);

// The phase of this thread (and of the pool's workers while they run its parts).
void set_phase(Phase phase);
Phase phase();
// The op name that allocations on this thread are tagged with (a string literal).
const char* current_op();

void record_allocation(Device device, int64_t bytes);
void record_release(Device device, int64_t bytes);
// `runs`: the unbroken stretches a strided copy moved `bytes` in (ignored for contiguous copies).
void record_copy(int64_t bytes, bool strided, int64_t runs = 1);
// Bytes of keys and values that attention read (what the KV cache hands it).
void record_attention_read(int64_t bytes);
int64_t attention_read_bytes();

DeviceMemory device_memory(Device device = Device::cpu);
PhaseMemory phase_memory(Phase phase);
// Allocations grouped by (op, phase), largest first.
std::vector<OpMemory> op_memory();
CopyBytes copy_bytes();
// Starts or stops timing the outermost OpScopes (two clock reads an op; off by default).
void set_op_timing(bool enabled);
// Op times grouped by (op, phase), longest first.
std::vector<OpTime> op_times();
// Zeroes phase, op and copy counters and sets peak to the current live bytes.
void reset_counters();

// Tags allocations made on this thread with an op name for its lifetime, and times it while
// op timing is on. Nested scopes keep the outermost name, so an op that calls other ops is
// charged for their allocations and their time.
class OpScope {
 public:
  explicit OpScope(const char* op);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const char* previous_;
  int64_t start_ns_ = -1;  // Set when this scope is outermost and timed.
};

// Counts what this thread (and the pool's workers on its behalf) does into `run` as well, for
// its lifetime.
class RunScope {
 public:
  explicit RunScope(RunCounters& run);
  ~RunScope();
  RunScope(const RunScope&) = delete;
  RunScope& operator=(const RunScope&) = delete;

 private:
  RunCounters* previous_;
};

// Sets the phase for its lifetime and restores the previous one after.
class PhaseScope {
 public:
  explicit PhaseScope(Phase phase);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Phase previous_;
};

}  // namespace memory

// The process high-water mark of resident memory (VmHWM) in bytes, or -1 when unknown.
int64_t peak_rss_bytes();
int64_t current_rss_bytes();

}  // namespace fornace
