// CPU name, date, git state, and the streaming read bandwidth measurement.
#include "machine.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <vector>

#include "cpu/thread_pool.h"

namespace fornace::bench {
namespace {

// The stdout of a shell command; `ok` is false when it could not run or exited non-zero.
std::string command_output(const std::string& command, bool& ok) {
  std::string output;
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe) {
    ok = false;
    return output;
  }
  char buffer[4096];
  size_t count;
  while ((count = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, count);
  ok = pclose(pipe) == 0;
  return output;
}

std::string trimmed(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

}  // namespace

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return trimmed(line.substr(colon + 1));
    }
  }
  return "unknown";
}

std::string local_date() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[16];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d", &local);
  return buffer;
}

GitState git_state() {
  GitState state;
  bool ok = false;
  std::string commit = trimmed(command_output("git rev-parse --short HEAD", ok));
  if (!ok || commit.empty()) return state;
  state.commit = commit;
  std::string status = command_output("git status --porcelain", ok);
  state.dirty = !ok || !trimmed(status).empty();
  std::string top = trimmed(command_output("git rev-parse --show-toplevel", ok));
  if (ok) state.top_level = top;
  return state;
}

double measure_read_bandwidth_gbs(size_t bytes, int passes) {
  constexpr int64_t kBlockWords = (1 << 20) / sizeof(uint64_t);  // 1 MiB per work item.
  int64_t blocks =
      std::max<int64_t>(1, static_cast<int64_t>(bytes / sizeof(uint64_t)) / kBlockWords);
  int64_t words = blocks * kBlockWords;
  std::unique_ptr<uint64_t[]> buffer(new uint64_t[words]);
  std::vector<uint64_t> block_sums(blocks);
  ThreadPool& pool = ThreadPool::global();
  // First touch from the threads that will read, so pages land near them.
  pool.run(blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t word = begin * kBlockWords; word < end * kBlockWords; ++word) {
      buffer[word] = static_cast<uint64_t>(word);
    }
  });
  double best_seconds = 0;
  for (int pass = 0; pass < passes; ++pass) {
    auto start = std::chrono::steady_clock::now();
    pool.run(blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t block = begin; block < end; ++block) {
        const uint64_t* words_of_block = buffer.get() + block * kBlockWords;
        // Four independent sums so the loop is bound by loads, not by one add chain.
        uint64_t sum0 = 0, sum1 = 0, sum2 = 0, sum3 = 0;
        for (int64_t i = 0; i < kBlockWords; i += 4) {
          sum0 += words_of_block[i];
          sum1 += words_of_block[i + 1];
          sum2 += words_of_block[i + 2];
          sum3 += words_of_block[i + 3];
        }
        block_sums[block] = sum0 + sum1 + sum2 + sum3;
      }
    });
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (pass == 0 || seconds < best_seconds) best_seconds = seconds;
  }
  // Check the sums so the reads cannot be optimised away: sum of 0..words-1.
  uint64_t total = 0;
  for (uint64_t sum : block_sums) total += sum;
  uint64_t expected = static_cast<uint64_t>(words) * static_cast<uint64_t>(words - 1) / 2;
  if (total != expected) return 0;
  return static_cast<double>(words * sizeof(uint64_t)) / best_seconds / 1e9;
}

}  // namespace fornace::bench
