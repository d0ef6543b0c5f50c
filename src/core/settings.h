// EngineSettings: the FORNACE_* environment variables, parsed once at start-up and passed down.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace fornace {

// The kernel levels, lowest first. avx512 means AVX-512 F/BW/VL/DQ with AVX512_BF16,
// AVX512_VNNI and BMI2 (a CPU with AVX-512 but without BF16 dot products runs the avx2
// kernels); avx2 means AVX2 with FMA and F16C.
enum class Isa { portable = 0, avx2 = 1, avx512 = 2 };
const char* isa_name(Isa isa);
// Parses "portable", "avx2" or "avx512"; throws Error otherwise.
Isa parse_isa(const char* name);

// How the weights' mappings and large buffers use 2 MiB pages, each value doing less than the
// one before: `on` asks for them everywhere (a mapping's ranges that the page cache holds in
// small folios are re-read, then copied to anonymous 2 MiB pages); `reread` and `copy` take
// only that one remedy; `file` keeps the weights to the page cache's pages; `off` asks for none
// (which exists to measure what the large pages bring).
enum class HugePages { on, reread, copy, file, off };
const char* huge_pages_name(HugePages mode);

struct EngineSettings {
  // FORNACE_ISA=portable|avx2|avx512: the kernels' level, capped to the CPU's; none: the CPU's.
  std::optional<Isa> isa;
  // FORNACE_PACKED_WEIGHTS=0: the kernels read every weight as stored (no packed forms).
  bool packed_weights = true;
  // FORNACE_INTERLEAVED_QUADS=0: quantized rows stay as stored (no interleaved quads).
  bool interleaved_quads = true;
  // FORNACE_AMX=0: attention keeps to AVX-512 where the CPU has AMX tiles.
  bool amx = true;
  // FORNACE_HUGE_PAGES=on|reread|copy|file|off (1 is on, 0 is off).
  HugePages huge_pages = HugePages::on;
  // The packed-weights cache's directory: FORNACE_PACKED_CACHE (0 or off: none), else
  // $XDG_CACHE_HOME/fornace, else $HOME/.cache/fornace; none when none of them is set.
  std::optional<std::string> packed_cache_directory;

  // The variable's value, or null when it is not set.
  using Lookup = std::function<const char*(const char* name)>;
  // Throws Error "FORNACE_X: ..." naming the first variable with a bad value.
  static EngineSettings parse(const Lookup& variable);
  static EngineSettings from_environment();

  // The settings in effect, a line each ("  FORNACE_ISA  avx2"), for --trace.
  std::string describe() const;
  // The variables with their values and defaults, for the tools' --help pages.
  static std::string help();
};

}  // namespace fornace
