// Streaming read bandwidth and the GEMM arithmetic's peak, measured on the global pool's threads.
#include "roofs/probes.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/storage.h"
#include "cpu/cpu_features.h"
#include "roofs/probes_kernels.h"
#include "cpu/thread_pool.h"

namespace fornace::roofs {

using cpu::active_isa;
using cpu::detected_isa;

namespace {

constexpr int kBf16DotAccumulators = 24;
constexpr double kFlopsPerBf16Dot = 16 * 2 * 2;  // Lanes x products x (multiply, add).
constexpr int kFmaAccumulators = 12;
constexpr double kFlopsPerFma = 8 * 2;  // Lanes x (multiply, add).
constexpr int kAmxAccumulators = 4;
constexpr double kFlopsPerAmxDot = 16 * 16 * 32 * 2;  // Rows x columns x depth x (multiply, add).

// Eight independent sums so the loop is bound by loads, not by one add chain.
uint64_t sum_words_portable(const uint64_t* words, int64_t count) {
  uint64_t sums[8] = {};
  int64_t index = 0;
  for (; index + 8 <= count; index += 8) {
    for (int lane = 0; lane < 8; ++lane) sums[lane] += words[index + lane];
  }
  uint64_t total = 0;
  for (uint64_t sum : sums) total += sum;
  for (; index < count; ++index) total += words[index];
  return total;
}

// Written with every pass's checksum so that no pass can be optimised away.
volatile uint64_t checksum_sink = 0;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

uint64_t stream_read(std::span<const std::pair<const void*, size_t>> regions) {
  auto sum = active_isa() == Isa::avx512 ? kernels::sum_words_avx512 : sum_words_portable;
  int64_t count = 0;
  for (const auto& region : regions) count += static_cast<int64_t>(region.second / 8);
  ThreadPool& pool = ThreadPool::global();
  const int parts = pool.threads();
  std::vector<uint64_t> sums(parts, 0);
  pool.run(parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) {
      // Parts split the regions' words, taken one after another, on 4 KiB boundaries.
      const int64_t first = count / 512 * part / parts * 512;
      const int64_t last = part + 1 == parts ? count : count / 512 * (part + 1) / parts * 512;
      int64_t offset = 0;  // Words of the regions before this one.
      for (const auto& [data, bytes] : regions) {
        const auto words = static_cast<int64_t>(bytes / 8);
        const int64_t from = std::max(first, offset);
        const int64_t to = std::min(last, offset + words);
        if (from < to) {
          sums[part] += sum(static_cast<const uint64_t*>(data) + (from - offset), to - from);
        }
        offset += words;
      }
    }
  });
  uint64_t total = 0;
  for (uint64_t value : sums) total += value;
  return total;
}

uint64_t stream_read(const void* data, size_t bytes) {
  const std::pair<const void*, size_t> region{data, bytes};
  return stream_read(std::span(&region, 1));
}

double read_bandwidth_gbs(const void* data, size_t bytes, int passes) {
  const std::pair<const void*, size_t> region{data, bytes};
  return read_bandwidth_gbs(std::span(&region, 1), passes);
}

double read_bandwidth_gbs(std::span<const std::pair<const void*, size_t>> regions, int passes) {
  double best = 0;
  size_t bytes = 0;
  for (const auto& [data, size] : regions) bytes += size;
  for (int pass = 0; pass < passes; ++pass) {
    auto start = std::chrono::steady_clock::now();
    uint64_t sum = 0;
    sum += stream_read(regions);
    double seconds = seconds_since(start);
    checksum_sink = sum;
    if (pass == 0 || seconds < best) best = seconds;
  }
  return best > 0 ? static_cast<double>(bytes) / best / 1e9 : 0.0;
}

double measure_read_bandwidth_gbs(size_t bytes, int passes) {
  std::shared_ptr<Storage> buffer = Storage::allocate(bytes);
  std::memset(buffer->data(), 1, bytes);
  return read_bandwidth_gbs(buffer->data(), bytes, passes);
}

// The avx512 level includes AVX512_BF16.
bool has_bf16_dot() { return detected_isa() == Isa::avx512; }

float bf16_dot_loop(int64_t iterations) { return kernels::bf16_dot_loop_avx512(iterations); }

double bf16_dot_loop_flops(int64_t iterations) {
  return static_cast<double>(iterations) * kBf16DotAccumulators * kFlopsPerBf16Dot;
}

namespace {

// GFLOP/s of the fastest of `passes` runs of `loop` on every thread of the pool.
double measure_loop_gflops(float (*loop)(int64_t), double (*flops)(int64_t), int passes) {
  constexpr int64_t kIterations = 1 << 20;  // About 25 ms per pass at 1 instruction a cycle.
  ThreadPool& pool = ThreadPool::global();
  const int threads = pool.threads();
  double best = 0;
  std::vector<float> sums(threads);
  for (int pass = 0; pass < passes; ++pass) {
    auto start = std::chrono::steady_clock::now();
    pool.run(threads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t part = begin; part < end; ++part) sums[part] = loop(kIterations);
    });
    double seconds = seconds_since(start);
    if (pass == 0 || seconds < best) best = seconds;
  }
  return threads * flops(kIterations) / best / 1e9;
}

}  // namespace

double measure_bf16_dot_peak_gflops(int passes) {
  if (!has_bf16_dot()) return 0;
  return measure_loop_gflops(bf16_dot_loop, bf16_dot_loop_flops, passes);
}

float amx_dot_loop(int64_t iterations) { return kernels::amx_dot_loop_avx512(iterations); }

double amx_dot_loop_flops(int64_t iterations) {
  return static_cast<double>(iterations) * kAmxAccumulators * kFlopsPerAmxDot;
}

bool has_amx_dot() { return cpu::amx_selected(); }

float fma_loop(int64_t iterations) { return kernels::fma_loop_avx2(iterations); }

double fma_loop_flops(int64_t iterations) {
  return static_cast<double>(iterations) * kFmaAccumulators * kFlopsPerFma;
}

double measure_gemm_peak_gflops(Isa isa, int passes) {
  switch (isa) {
    case Isa::avx512:
      if (has_amx_dot()) return measure_loop_gflops(amx_dot_loop, amx_dot_loop_flops, passes);
      return measure_bf16_dot_peak_gflops(passes);
    case Isa::avx2:
      if (detected_isa() < Isa::avx2) return 0;
      return measure_loop_gflops(fma_loop, fma_loop_flops, passes);
    default:
      return 0;
  }
}

const char* gemm_peak_name(Isa isa, bool amx_tiles) {
  switch (isa) {
    case Isa::avx512:
      return amx_tiles ? "AMX tdpbf16ps" : "vdpbf16ps";
    case Isa::avx2:
      return "256-bit FMA";
    default:
      return "none";
  }
}

}  // namespace fornace::roofs
