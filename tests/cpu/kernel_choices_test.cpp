// The kernels line names what dispatch picks at each instruction-set level.
#include "cpu/kernel_choices.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/settings_support.h"
#include "cpu/cpu_features.h"
#include "cpu/quant.h"

namespace fornace {
namespace {

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

TEST(KernelChoices, NameTheActiveLevelAndTheKernelsItPicks) {
  cpu::set_isa(cpu::Isa::portable);
  std::string portable = cpu::kernel_choices();
  expect_contains(portable, "isa portable;");
  expect_contains(portable, "gemm bf16: 4x16 f32");
  expect_contains(portable, "quantized: 8-bit activation blocks, portable");
  expect_contains(portable, "attention bf16: f32, portable");
  expect_contains(portable, "attention q8_0/q4_0: f32, portable");
  if (cpu::detected_isa() >= cpu::Isa::avx2) {
    cpu::set_isa(cpu::Isa::avx2);
    std::string avx2 = cpu::kernel_choices();
    expect_contains(avx2, "isa avx2;");
    expect_contains(avx2, "gemv bf16: f32 FMA (AVX2)");
    expect_contains(avx2, "gemm bf16: 6x16 f32");
    expect_contains(avx2, "attention bf16: f32 FMA (AVX2)");
    expect_contains(avx2, "attention q8_0/q4_0: f32 FMA (AVX2)");
    // The decode kernels' prefetch plan is the CPU's and the level's: AVX2 into L2 on Intel and
    // on AMD family 19h (Zen 4), named only there.
    const bool amd_family_19h = !cpu::cpu_features().intel && cpu::cpu_features().family == 0x19;
    EXPECT_EQ(avx2.find("prefetched into L2 3 KiB ahead") != std::string::npos,
              cpu::cpu_features().intel || amd_family_19h)
        << avx2;
  }
  if (cpu::detected_isa() >= cpu::Isa::avx512) {
    cpu::set_isa(cpu::Isa::avx512);
    std::string avx512 = cpu::kernel_choices();
    expect_contains(avx512, "isa avx512;");
    expect_contains(avx512, "gemv bf16: bf16 dot over the packed weights, 1-8 rows a pass");
    // The bf16 GEMM runs on AMX tiles where the CPU has them, unless switched off.
    expect_contains(avx512, cpu::cpu_features().amx_bf16
                                ? "gemm bf16: 32x32 bf16 pairs on AMX tiles, panels of 2048 k, "
                                  "weights packed at load"
                                : "gemm bf16: 12x32 bf16 pairs, panels of 2048 k, weights packed "
                                  "at load");
    expect_contains(avx512, "weights widened to bf16");
    expect_contains(avx512, "quads interleaved at load");
    // AVX-512 decode prefetches into L2 on Intel only.
    EXPECT_EQ(avx512.find("prefetched into L2 3 KiB ahead") != std::string::npos,
              cpu::cpu_features().intel)
        << avx512;
    // Attention over a bf16 cache runs on AMX tiles where the CPU has them, unless switched off.
    expect_contains(avx512, cpu::cpu_features().amx_bf16 ? "attention bf16: AMX bf16 tiles"
                                                         : "attention bf16: bf16 pairs (vdpbf16ps)");
    // A quantized cache's levels take the vector pairs, AMX or not.
    expect_contains(avx512, "attention q8_0/q4_0: bf16 pairs over levels (vdpbf16ps)");
    cpu::select_kernels(settings_with("FORNACE_AMX", "0"));
    std::string without_amx = cpu::kernel_choices();
    EXPECT_FALSE(cpu::amx_selected());
    cpu::select_kernels(EngineSettings{});
    expect_contains(without_amx, "attention bf16: bf16 pairs (vdpbf16ps)");
    expect_contains(without_amx, "gemm bf16: 12x32 bf16 pairs, panels of 2048 k");
    // Either switch keeps the quantized rows as stored, and the words say so.
    for (const char* name : {"FORNACE_INTERLEAVED_QUADS", "FORNACE_PACKED_WEIGHTS"}) {
      cpu::select_kernels(settings_with(name, "0"));
      std::string as_stored = cpu::kernel_choices();
      EXPECT_FALSE(cpu::interleaves_quantized_rows()) << name;
      cpu::select_kernels(EngineSettings{});
      EXPECT_EQ(as_stored.find("interleaved"), std::string::npos) << name << ": " << as_stored;
    }
    EXPECT_TRUE(cpu::interleaves_quantized_rows());
    // Without packed weights the GEMV reads the stored rows, in tiles for several rows.
    cpu::select_kernels(settings_with("FORNACE_PACKED_WEIGHTS", "0"));
    std::string stored = cpu::kernel_choices();
    cpu::select_kernels(EngineSettings{});
    expect_contains(stored, "gemv bf16: bf16 dot, 1 row a weight row at a time");
    expect_contains(stored, "3x7-8");
    EXPECT_EQ(stored.find("packed"), std::string::npos) << stored;
  }
  cpu::reset_isa();
}

}  // namespace
}  // namespace fornace
