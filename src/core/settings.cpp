// Parsing and describing the FORNACE_* environment variables.
#include "core/settings.h"

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/error.h"

namespace fornace {
namespace {

// "0" or "off" false, "1" or "on" true; unset or empty: `fallback`.
bool parse_switch(const char* name, const char* value, bool fallback) {
  std::string_view text = value ? value : "";
  if (text.empty()) return fallback;
  if (text == "0" || text == "off") return false;
  if (text == "1" || text == "on") return true;
  fail(name, ": unknown value '", text, "' (expected 1, on, 0 or off)");
}

HugePages parse_huge_pages(const char* value) {
  std::string_view text = value ? value : "";
  if (text.empty() || text == "1" || text == "on") return HugePages::on;
  if (text == "0" || text == "off") return HugePages::off;
  for (HugePages mode : {HugePages::reread, HugePages::copy, HugePages::file}) {
    if (text == huge_pages_name(mode)) return mode;
  }
  fail("FORNACE_HUGE_PAGES: unknown value '", text,
       "' (expected on, reread, copy, file or off; 1 is on, 0 is off)");
}

std::optional<std::string> parse_packed_cache(const EngineSettings::Lookup& variable) {
  auto text = [&](const char* name) -> std::string {
    const char* value = variable(name);
    return value ? value : "";
  };
  const std::string setting = text("FORNACE_PACKED_CACHE");
  if (setting == "0" || setting == "off") return std::nullopt;
  if (!setting.empty()) return setting;
  if (!text("XDG_CACHE_HOME").empty()) return text("XDG_CACHE_HOME") + "/fornace";
  if (!text("HOME").empty()) return text("HOME") + "/.cache/fornace";
  return std::nullopt;
}

const char* on_off(bool value) { return value ? "on" : "off"; }

}  // namespace

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

const char* huge_pages_name(HugePages mode) {
  switch (mode) {
    case HugePages::on:
      return "on";
    case HugePages::reread:
      return "reread";
    case HugePages::copy:
      return "copy";
    case HugePages::file:
      return "file";
    case HugePages::off:
      return "off";
  }
  return "?";
}

EngineSettings EngineSettings::parse(const Lookup& variable) {
  EngineSettings settings;
  const char* isa = variable("FORNACE_ISA");
  if (isa && *isa) settings.isa = parse_isa(isa);
  settings.packed_weights =
      parse_switch("FORNACE_PACKED_WEIGHTS", variable("FORNACE_PACKED_WEIGHTS"), true);
  settings.interleaved_quads =
      parse_switch("FORNACE_INTERLEAVED_QUADS", variable("FORNACE_INTERLEAVED_QUADS"), true);
  settings.amx = parse_switch("FORNACE_AMX", variable("FORNACE_AMX"), true);
  settings.huge_pages = parse_huge_pages(variable("FORNACE_HUGE_PAGES"));
  settings.packed_cache_directory = parse_packed_cache(variable);
  return settings;
}

EngineSettings EngineSettings::from_environment() {
  return parse([](const char* name) { return std::getenv(name); });
}

std::string EngineSettings::describe() const {
  return concat("  FORNACE_ISA                ", isa ? isa_name(*isa) : "the CPU's level",
                "\n  FORNACE_PACKED_WEIGHTS     ", on_off(packed_weights),
                "\n  FORNACE_INTERLEAVED_QUADS  ", on_off(interleaved_quads),
                "\n  FORNACE_AMX                ", on_off(amx),
                "\n  FORNACE_HUGE_PAGES         ", huge_pages_name(huge_pages),
                "\n  FORNACE_PACKED_CACHE       ",
                packed_cache_directory ? *packed_cache_directory : "off", "\n");
}

std::string EngineSettings::help() {
  const EngineSettings defaults;
  return concat(
      "environment (read once at start-up; a bad value is an error):\n"
      "  FORNACE_ISA=portable|avx2|avx512      the kernels' level, at most the CPU's (default: "
      "the CPU's)\n"
      "  FORNACE_PACKED_WEIGHTS=1|0            weights packed for the kernels at load (default: ",
      on_off(defaults.packed_weights),
      ")\n"
      "  FORNACE_INTERLEAVED_QUADS=1|0         quantized rows interleaved at load (default: ",
      on_off(defaults.interleaved_quads),
      ")\n"
      "  FORNACE_AMX=1|0                       AMX tiles for attention where the CPU has them "
      "(default: ",
      on_off(defaults.amx),
      ")\n"
      "  FORNACE_HUGE_PAGES=on|reread|copy|file|off  2 MiB pages for weights and buffers "
      "(default: ",
      huge_pages_name(defaults.huge_pages),
      ")\n"
      "  FORNACE_PACKED_CACHE=DIR|off          the packed-weights cache (default:\n"
      "                                        $XDG_CACHE_HOME/fornace, else ~/.cache/fornace)");
}

}  // namespace fornace
