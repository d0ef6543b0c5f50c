// Run-time CPU feature detection and the instruction-set level that kernels dispatch on.
#pragma once

#include "core/settings.h"

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
  bool gfni = false;  // gf2p8affineqb: the K-quant kernels move bits with it.
  bool bmi2 = false;
  // AMX tiles with bf16 dot products, enabled by the OS and granted to this process.
  bool amx_bf16 = false;
  bool intel = false;  // The vendor, for tunings measured per vendor (cpu/prefetch.h).
  int family = 0;      // CPUID's display family (AMD: 25 Zen 3 and 4, 26 Zen 5), for the same.
};

// The kernel levels (core/settings.h).
using fornace::Isa;
using fornace::isa_name;
using fornace::parse_isa;

const CpuFeatures& cpu_features();
// The highest level this CPU supports.
Isa detected_isa();
// Sets what the kernel table follows, once at start-up (tests and benchmarks may call it again):
// the level, the detected one lowered to settings.isa when set (a level above the detected one
// is capped to it), and whether weights are packed and quantized rows interleaved at load.
void select_kernels(const EngineSettings& settings);
// The level kernels use: the selected one, or the one set_isa() forces.
Isa active_isa();
// Forces a level for tests and benchmarks; throws Error when the CPU does not support it.
void set_isa(Isa isa);
// Returns to the selected level.
void reset_isa();
// Whether the kernels read packed weights (FORNACE_PACKED_WEIGHTS) and interleaved quantized
// rows (FORNACE_INTERLEAVED_QUADS), as select_kernels() set them.
bool packed_weights_selected();
bool interleaved_quads_selected();
// Whether attention runs its bf16 products on AMX tiles: the CPU has them (amx_bf16), the
// level is avx512 and FORNACE_AMX is on.
bool amx_selected();
// What a program does with its settings at start-up: select_kernels(), and 2 MiB pages for large
// buffers unless settings.huge_pages is off (set_huge_pages, core/storage.h).
void apply_process_settings(const EngineSettings& settings);

}  // namespace fornace::cpu
