// The roofline measurements read every byte and run every product they count.
#include "roofs/probes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/thread_pool.h"

namespace fornace {
namespace {

std::vector<cpu::Isa> supported_isas() {
  std::vector<cpu::Isa> isas{cpu::Isa::portable};
  if (cpu::detected_isa() >= cpu::Isa::avx2) isas.push_back(cpu::Isa::avx2);
  if (cpu::detected_isa() >= cpu::Isa::avx512) isas.push_back(cpu::Isa::avx512);
  return isas;
}

TEST(Roofline, StreamReadSumsEveryWordOnEveryIsaAndThreadCount) {
  for (cpu::Isa isa : supported_isas()) {
    cpu::set_isa(isa);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (uint64_t count : {1u, 7u, 512u, 4097u, (1u << 20) + 3u}) {
        std::vector<uint64_t> words(count);
        for (uint64_t index = 0; index < count; ++index) words[index] = index;
        EXPECT_EQ(roofs::stream_read(words.data(), count * sizeof(uint64_t)),
                  count * (count - 1) / 2)
            << cpu::isa_name(isa) << ", " << threads << " threads, " << count << " words";
      }
    }
  }
  cpu::reset_isa();
  set_num_threads(0);
}

// Several regions in one pass: every whole word of each read once, whatever the part boundaries.
TEST(Roofline, StreamReadOverRegionsSumsEachRegionsWordsOnce) {
  std::vector<uint64_t> words(3 * 4096 + 77);
  for (uint64_t index = 0; index < words.size(); ++index) words[index] = index + 1;
  // Word counts 5, 4096 + 3, 0, 1 and the rest, with a last region whose size is not whole words.
  const size_t bounds[] = {0, 5, 4104, 4104, 4105, words.size()};
  std::vector<std::pair<const void*, size_t>> regions;
  uint64_t expected = 0;
  for (size_t index = 0; index + 1 < std::size(bounds); ++index) {
    size_t bytes = (bounds[index + 1] - bounds[index]) * sizeof(uint64_t);
    if (index + 2 == std::size(bounds)) bytes -= 3;  // the last word is not whole
    regions.emplace_back(words.data() + bounds[index], bytes);
    for (size_t word = bounds[index]; word < bounds[index] + bytes / 8; ++word) {
      expected += words[word];
    }
  }
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    EXPECT_EQ(roofs::stream_read(regions), expected) << threads << " threads";
  }
  set_num_threads(0);
}

TEST(Roofline, Bf16DotLoopRunsEveryProductItCounts) {
  if (!roofs::has_bf16_dot()) GTEST_SKIP() << "no AVX512_BF16";
  // Each lane of each of the 24 accumulators adds 1 x 1 + 1 x 1 per iteration; the FLOPs count
  // a multiply and an add for each of those 2 products.
  constexpr int64_t kIterations = 1000;
  EXPECT_EQ(roofs::bf16_dot_loop(kIterations), 16.0f * 24 * 2 * kIterations);
  EXPECT_EQ(roofs::bf16_dot_loop_flops(kIterations), 16.0 * 24 * 2 * 2 * kIterations);
  EXPECT_GT(roofs::measure_bf16_dot_peak_gflops(1), 0.0);
  EXPECT_DOUBLE_EQ(roofs::measure_gemm_peak_gflops(cpu::Isa::portable, 1), 0.0);
}

TEST(Roofline, FmaLoopRunsEveryProductItCounts) {
  if (cpu::detected_isa() < cpu::Isa::avx2) GTEST_SKIP() << "no AVX2";
  // Each of the 8 lanes of each of the 12 accumulators adds 1 x 1 per iteration.
  constexpr int64_t kIterations = 1000;
  EXPECT_EQ(roofs::fma_loop(kIterations), 8.0f * 12 * kIterations);
  EXPECT_EQ(roofs::fma_loop_flops(kIterations), 8.0 * 12 * 2 * kIterations);
  EXPECT_GT(roofs::measure_gemm_peak_gflops(cpu::Isa::avx2, 1), 0.0);
  EXPECT_STREQ(roofs::gemm_peak_name(cpu::Isa::avx2, false), "256-bit FMA");
  EXPECT_STREQ(roofs::gemm_peak_name(cpu::Isa::avx512, false), "vdpbf16ps");
  EXPECT_STREQ(roofs::gemm_peak_name(cpu::Isa::avx512, true), "AMX tdpbf16ps");
}

TEST(Roofline, AmxDotLoopRunsEveryProductItCountsAndNamesTheGemmPeak) {
  if (!roofs::has_amx_dot()) GTEST_SKIP() << "no AMX-BF16 granted";
  // Each element of each of the 4 sum tiles adds 32 products of 1 x 1 per iteration.
  constexpr int64_t kIterations = 1000;
  EXPECT_EQ(roofs::amx_dot_loop(kIterations), 4.0f * 32 * kIterations);
  EXPECT_EQ(roofs::amx_dot_loop_flops(kIterations), 4.0 * 16 * 16 * 32 * 2 * kIterations);
  EXPECT_GT(roofs::measure_gemm_peak_gflops(cpu::Isa::avx512, 1), 0.0);
}

}  // namespace
}  // namespace fornace
