// CPUID-based feature detection and the kernel choices selected at start-up.
#include "cpu/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <atomic>

#include "core/error.h"
#include "core/storage.h"

namespace fornace::cpu {
namespace {

#if defined(__x86_64__)
// AMX-BF16 and AMX-TILE (CPUID leaf 7, EDX bits 22 and 24), the tile state enabled in XCR0
// (bits 17 and 18), and Linux's per-process permission to use it, asked for here.
bool detect_amx_bf16() {
  unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  if ((edx & (1u << 22)) == 0 || (edx & (1u << 24)) == 0) return false;
  unsigned int xcr0_low = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & (3u << 17)) != (3u << 17)) return false;
  constexpr long kRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
  constexpr long kTileData = 18;               // XFEATURE_XTILEDATA
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
}
#endif

CpuFeatures detect() {
  CpuFeatures features;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the AVX and AVX-512 register state.
  features.avx2 = __builtin_cpu_supports("avx2");
  features.fma = __builtin_cpu_supports("fma");
  // clang 14 has no "f16c" for __builtin_cpu_supports: read CPUID leaf 1 (ECX bit 29); the
  // kernels that use it also need AVX2, whose check covers the OS register state.
  unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
  features.f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  const unsigned int base_family = (eax >> 8) & 0xf;
  features.family =
      static_cast<int>(base_family == 0xf ? base_family + ((eax >> 20) & 0xff) : base_family);
  features.avx512f = __builtin_cpu_supports("avx512f");
  features.avx512bw = __builtin_cpu_supports("avx512bw");
  features.avx512vl = __builtin_cpu_supports("avx512vl");
  features.avx512dq = __builtin_cpu_supports("avx512dq");
  features.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  features.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  features.gfni = __builtin_cpu_supports("gfni");
  features.bmi2 = __builtin_cpu_supports("bmi2");
  features.intel = __builtin_cpu_is("intel");
#endif
#if defined(__x86_64__)
  features.amx_bf16 = detect_amx_bf16();
#endif
  return features;
}

Isa detect_isa(const CpuFeatures& features) {
  if (features.avx512f && features.avx512bw && features.avx512vl && features.avx512dq &&
      features.avx512_bf16 && features.avx512_vnni && features.gfni && features.bmi2 &&
      features.fma && features.f16c && features.avx2) {
    return Isa::avx512;
  }
  if (features.avx2 && features.fma && features.f16c) return Isa::avx2;
  return Isa::portable;
}

Isa lower(Isa left, Isa right) {
  return static_cast<int>(left) < static_cast<int>(right) ? left : right;
}

// The level select_kernels() chose (-1: none yet, the detected one) and set_isa()'s.
std::atomic<int> selected_isa{-1};
std::atomic<int> forced_isa{-1};
std::atomic<bool> packed_weights{true};
std::atomic<bool> interleaved_quads{true};
std::atomic<bool> amx{true};

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

Isa detected_isa() {
  static const Isa level = detect_isa(cpu_features());
  return level;
}

void select_kernels(const EngineSettings& settings) {
  Isa level = settings.isa ? lower(detected_isa(), *settings.isa) : detected_isa();
  selected_isa.store(static_cast<int>(level), std::memory_order_relaxed);
  packed_weights.store(settings.packed_weights, std::memory_order_relaxed);
  interleaved_quads.store(settings.interleaved_quads, std::memory_order_relaxed);
  amx.store(settings.amx, std::memory_order_relaxed);
}

Isa active_isa() {
  int forced = forced_isa.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<Isa>(forced);
  int selected = selected_isa.load(std::memory_order_relaxed);
  return selected >= 0 ? static_cast<Isa>(selected) : detected_isa();
}

void apply_process_settings(const EngineSettings& settings) {
  select_kernels(settings);
  set_huge_pages(settings.huge_pages);
}

bool packed_weights_selected() { return packed_weights.load(std::memory_order_relaxed); }

bool interleaved_quads_selected() { return interleaved_quads.load(std::memory_order_relaxed); }

bool amx_selected() {
  return amx.load(std::memory_order_relaxed) && active_isa() == Isa::avx512 &&
         cpu_features().amx_bf16;
}

void set_isa(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(detected_isa())) {
    fail("set_isa: this CPU does not support ", isa_name(isa),
         " (highest: ", isa_name(detected_isa()), ")");
  }
  forced_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

void reset_isa() { forced_isa.store(-1, std::memory_order_relaxed); }

}  // namespace fornace::cpu
