// The process-wide memory and copy counters behind memory.h.
#include "core/memory.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>

namespace fornace {

const char* device_name(Device device) {
  switch (device) {
    case Device::cpu:
      return "cpu";
  }
  return "?";
}

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::other:
      return "other";
    case Phase::load:
      return "load";
    case Phase::prefill:
      return "prefill";
    case Phase::decode:
      return "decode";
  }
  return "?";
}

namespace memory {
namespace {

struct OpSlot {
  const char* op;
  std::array<int64_t, kNumPhases> bytes{};
  std::array<int64_t, kNumPhases> count{};
  std::array<int64_t, kNumPhases> nanoseconds{};
  std::array<int64_t, kNumPhases> calls{};
};

struct Counters {
  std::mutex mutex;
  std::array<DeviceMemory, kNumDevices> devices{};
  std::array<PhaseMemory, kNumPhases> phases{};
  std::vector<OpSlot> ops;
  std::atomic<bool> op_timing{false};
  std::atomic<int64_t> contiguous_copy_bytes{0};
  std::atomic<int64_t> strided_copy_bytes{0};
  std::atomic<int64_t> strided_copy_runs{0};
  std::atomic<int64_t> attention_read_bytes{0};
};

Counters& counters() {
  static Counters* instance = new Counters();  // Never destroyed: storages may outlive statics.
  return *instance;
}

thread_local ThreadContext this_thread;

OpSlot& slot_for(Counters& state, const char* op) {
  for (OpSlot& slot : state.ops) {
    if (slot.op == op || std::strcmp(slot.op, op) == 0) return slot;
  }
  state.ops.push_back(OpSlot{op});
  return state.ops.back();
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void record_op_time(const char* op, int64_t nanoseconds) {
  Counters& state = counters();
  std::lock_guard lock(state.mutex);
  int phase_index = static_cast<int>(this_thread.phase);
  OpSlot& slot = slot_for(state, op);
  slot.nanoseconds[phase_index] += nanoseconds;
  slot.calls[phase_index] += 1;
}

}  // namespace

CopyBytes RunCounters::copied() const {
  return CopyBytes{contiguous_copy_bytes.load(), strided_copy_bytes.load(),
                   strided_copy_runs.load()};
}

ThreadContext thread_context() { return this_thread; }
void set_thread_context(const ThreadContext& context) { this_thread = context; }

void set_phase(Phase phase) { this_thread.phase = phase; }
Phase phase() { return this_thread.phase; }
const char* current_op() { return this_thread.op ? this_thread.op : "other"; }

void record_allocation(Device device, int64_t bytes) {
  if (this_thread.run) this_thread.run->allocated_bytes.fetch_add(bytes, std::memory_order_relaxed);
  Counters& state = counters();
  std::lock_guard lock(state.mutex);
  DeviceMemory& memory = state.devices[static_cast<int>(device)];
  memory.live_bytes += bytes;
  memory.allocated_bytes += bytes;
  memory.peak_bytes = std::max(memory.peak_bytes, memory.live_bytes);
  int phase_index = static_cast<int>(this_thread.phase);
  PhaseMemory& phase = state.phases[phase_index];
  phase.allocated_bytes += bytes;
  phase.allocations += 1;
  phase.peak_live_bytes = std::max(phase.peak_live_bytes, memory.live_bytes);
  OpSlot& slot = slot_for(state, current_op());
  slot.bytes[phase_index] += bytes;
  slot.count[phase_index] += 1;
}

void record_release(Device device, int64_t bytes) {
  Counters& state = counters();
  std::lock_guard lock(state.mutex);
  state.devices[static_cast<int>(device)].live_bytes -= bytes;
  state.phases[static_cast<int>(this_thread.phase)].released_bytes += bytes;
}

void record_copy(int64_t bytes, bool strided, int64_t runs) {
  if (RunCounters* run = this_thread.run) {
    if (strided) {
      run->strided_copy_bytes.fetch_add(bytes, std::memory_order_relaxed);
      run->strided_copy_runs.fetch_add(runs, std::memory_order_relaxed);
    } else {
      run->contiguous_copy_bytes.fetch_add(bytes, std::memory_order_relaxed);
    }
  }
  if (!strided) {
    counters().contiguous_copy_bytes.fetch_add(bytes, std::memory_order_relaxed);
    return;
  }
  counters().strided_copy_bytes.fetch_add(bytes, std::memory_order_relaxed);
  counters().strided_copy_runs.fetch_add(runs, std::memory_order_relaxed);
}

DeviceMemory device_memory(Device device) {
  Counters& state = counters();
  std::lock_guard lock(state.mutex);
  return state.devices[static_cast<int>(device)];
}

PhaseMemory phase_memory(Phase phase) {
  Counters& state = counters();
  std::lock_guard lock(state.mutex);
  return state.phases[static_cast<int>(phase)];
}

std::vector<OpMemory> op_memory() {
  Counters& state = counters();
  std::lock_guard lock(state.mutex);
  std::vector<OpMemory> result;
  for (const OpSlot& slot : state.ops) {
    for (int phase = 0; phase < kNumPhases; ++phase) {
      if (slot.count[phase] == 0) continue;
      result.push_back(
          OpMemory{slot.op, static_cast<Phase>(phase), slot.bytes[phase], slot.count[phase]});
    }
  }
  std::sort(result.begin(), result.end(), [](const OpMemory& left, const OpMemory& right) {
    return left.allocated_bytes > right.allocated_bytes;
  });
  return result;
}

void set_op_timing(bool enabled) { counters().op_timing.store(enabled); }

std::vector<OpTime> op_times() {
  Counters& state = counters();
  std::lock_guard lock(state.mutex);
  std::vector<OpTime> result;
  for (const OpSlot& slot : state.ops) {
    for (int phase = 0; phase < kNumPhases; ++phase) {
      if (slot.calls[phase] == 0) continue;
      result.push_back(OpTime{slot.op, static_cast<Phase>(phase), slot.nanoseconds[phase] * 1e-6,
                              slot.calls[phase]});
    }
  }
  std::sort(result.begin(), result.end(),
            [](const OpTime& left, const OpTime& right) { return left.ms > right.ms; });
  return result;
}

void record_attention_read(int64_t bytes) {
  if (this_thread.run) {
    this_thread.run->attention_read_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  counters().attention_read_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

int64_t attention_read_bytes() { return counters().attention_read_bytes.load(); }

CopyBytes copy_bytes() {
  return CopyBytes{counters().contiguous_copy_bytes.load(), counters().strided_copy_bytes.load(),
                   counters().strided_copy_runs.load()};
}

void reset_counters() {
  Counters& state = counters();
  std::lock_guard lock(state.mutex);
  for (DeviceMemory& memory : state.devices) memory.peak_bytes = memory.live_bytes;
  state.phases = {};
  state.ops.clear();
  state.contiguous_copy_bytes = 0;
  state.strided_copy_bytes = 0;
  state.strided_copy_runs = 0;
  state.attention_read_bytes = 0;
}

OpScope::OpScope(const char* op) : previous_(this_thread.op) {
  if (this_thread.op) return;
  this_thread.op = op;
  if (counters().op_timing.load(std::memory_order_relaxed)) start_ns_ = now_ns();
}
OpScope::~OpScope() {
  if (start_ns_ >= 0) record_op_time(this_thread.op, now_ns() - start_ns_);
  this_thread.op = previous_;
}

RunScope::RunScope(RunCounters& run) : previous_(this_thread.run) { this_thread.run = &run; }
RunScope::~RunScope() { this_thread.run = previous_; }

PhaseScope::PhaseScope(Phase phase) : previous_(memory::phase()) { set_phase(phase); }
PhaseScope::~PhaseScope() { set_phase(previous_); }

}  // namespace memory

namespace {
int64_t read_status_kib(const char* key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  size_t key_length = std::strlen(key);
  while (std::getline(status, line)) {
    if (line.compare(0, key_length, key) == 0) return std::stoll(line.substr(key_length)) * 1024;
  }
  return -1;
}
}  // namespace

int64_t peak_rss_bytes() { return read_status_kib("VmHWM:"); }
int64_t current_rss_bytes() { return read_status_kib("VmRSS:"); }

}  // namespace fornace
