// Run-time CPU feature detection and the instruction-set level that kernels dispatch on.
#pragma once

namespace fornace::cpu {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
  bool bmi2 = false;
};

// The kernel levels, lowest first. avx512 means AVX-512 F/BW/VL/DQ with AVX512_BF16,
// AVX512_VNNI and BMI2 (a CPU with AVX-512 but without BF16 dot products runs the avx2
// kernels); avx2 means AVX2 with FMA and F16C.
enum class Isa { portable = 0, avx2 = 1, avx512 = 2 };

const CpuFeatures& cpu_features();
// The highest level this CPU supports.
Isa detected_isa();
// The level kernels use: the detected one, lowered by FORNACE_ISA=portable|avx2|avx512 when set
// (a level above the detected one is capped to it), or by set_isa().
Isa active_isa();
// Forces a level for tests and benchmarks; throws Error when the CPU does not support it.
void set_isa(Isa isa);
// Returns to the detected level (FORNACE_ISA still applies).
void reset_isa();

const char* isa_name(Isa isa);
// Whether the environment variable `name` is set to "0" (a switch that turns a choice off).
bool setting_is_off(const char* name);
// Parses "portable", "avx2" or "avx512"; throws Error otherwise.
Isa parse_isa(const char* name);

}  // namespace fornace::cpu
