// CPUID-based feature detection and the FORNACE_ISA override.
#include "cpu/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/error.h"

namespace fornace::cpu {
namespace {

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
  features.avx512f = __builtin_cpu_supports("avx512f");
  features.avx512bw = __builtin_cpu_supports("avx512bw");
  features.avx512vl = __builtin_cpu_supports("avx512vl");
  features.avx512dq = __builtin_cpu_supports("avx512dq");
  features.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  features.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  features.bmi2 = __builtin_cpu_supports("bmi2");
#endif
  return features;
}

Isa detect_isa(const CpuFeatures& features) {
  if (features.avx512f && features.avx512bw && features.avx512vl && features.avx512dq &&
      features.avx512_bf16 && features.avx512_vnni && features.bmi2 && features.fma &&
      features.f16c && features.avx2) {
    return Isa::avx512;
  }
  if (features.avx2 && features.fma && features.f16c) return Isa::avx2;
  return Isa::portable;
}

Isa lower(Isa left, Isa right) {
  return static_cast<int>(left) < static_cast<int>(right) ? left : right;
}

// The level before any set_isa() call: detected, capped by FORNACE_ISA.
Isa default_isa() {
  static const Isa level = [] {
    Isa detected = detected_isa();
    const char* requested = std::getenv("FORNACE_ISA");
    if (requested == nullptr || *requested == '\0') return detected;
    return lower(detected, parse_isa(requested));
  }();
  return level;
}

std::atomic<int> forced_isa{-1};

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

Isa detected_isa() {
  static const Isa level = detect_isa(cpu_features());
  return level;
}

Isa active_isa() {
  int forced = forced_isa.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<Isa>(forced) : default_isa();
}

void set_isa(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(detected_isa())) {
    fail("set_isa: this CPU does not support ", isa_name(isa),
         " (highest: ", isa_name(detected_isa()), ")");
  }
  forced_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
}

void reset_isa() { forced_isa.store(-1, std::memory_order_relaxed); }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return "avx512";
    case Isa::avx2:
      return "avx2";
    default:
      return "portable";
  }
}

Isa parse_isa(const char* name) {
  if (std::strcmp(name, "portable") == 0) return Isa::portable;
  if (std::strcmp(name, "avx2") == 0) return Isa::avx2;
  if (std::strcmp(name, "avx512") == 0) return Isa::avx512;
  fail("FORNACE_ISA: unknown level '", name, "' (expected portable, avx2 or avx512)");
}

bool setting_is_off(const char* name) {
  const char* setting = std::getenv(name);
  return setting && std::string_view(setting) == "0";
}

}  // namespace fornace::cpu
