// EngineSettings::parse: the defaults, every good value, and one error line per bad value.
#include "core/settings.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"

namespace fornace {
namespace {

EngineSettings parse(const std::map<std::string, std::string>& environment) {
  return EngineSettings::parse([&](const char* name) -> const char* {
    auto found = environment.find(name);
    return found == environment.end() ? nullptr : found->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& environment) {
  try {
    parse(environment);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(EngineSettings, UnsetVariablesGiveTheDefaults) {
  EngineSettings settings = parse({});
  EXPECT_FALSE(settings.isa.has_value());
  EXPECT_TRUE(settings.packed_weights);
  EXPECT_TRUE(settings.interleaved_quads);
  EXPECT_EQ(settings.huge_pages, HugePages::on);
  EXPECT_FALSE(settings.packed_cache_directory.has_value());
  EXPECT_EQ(parse({{"FORNACE_ISA", ""}, {"FORNACE_HUGE_PAGES", ""}}).huge_pages, HugePages::on);
}

TEST(EngineSettings, ReadsEveryGoodValue) {
  EXPECT_EQ(parse({{"FORNACE_ISA", "portable"}}).isa, Isa::portable);
  EXPECT_EQ(parse({{"FORNACE_ISA", "avx2"}}).isa, Isa::avx2);
  EXPECT_EQ(parse({{"FORNACE_ISA", "avx512"}}).isa, Isa::avx512);
  for (const char* name : {"FORNACE_PACKED_WEIGHTS", "FORNACE_INTERLEAVED_QUADS"}) {
    for (const char* off : {"0", "off"}) {
      EngineSettings settings = parse({{name, off}});
      EXPECT_FALSE(std::string(name) == "FORNACE_PACKED_WEIGHTS" ? settings.packed_weights
                                                                 : settings.interleaved_quads)
          << name << "=" << off;
    }
    for (const char* on : {"1", "on"}) {
      EngineSettings settings = parse({{name, on}});
      EXPECT_TRUE(settings.packed_weights && settings.interleaved_quads) << name << "=" << on;
    }
  }
  EXPECT_TRUE(parse({}).amx);
  for (const char* off : {"0", "off"}) EXPECT_FALSE(parse({{"FORNACE_AMX", off}}).amx) << off;
  for (const char* on : {"1", "on"}) EXPECT_TRUE(parse({{"FORNACE_AMX", on}}).amx) << on;
  const std::map<std::string, HugePages> modes = {
      {"1", HugePages::on},      {"on", HugePages::on},     {"reread", HugePages::reread},
      {"copy", HugePages::copy}, {"file", HugePages::file}, {"0", HugePages::off},
      {"off", HugePages::off}};
  for (const auto& [value, mode] : modes) {
    EXPECT_EQ(parse({{"FORNACE_HUGE_PAGES", value}}).huge_pages, mode) << value;
  }
  EXPECT_EQ(parse({{"HOME", "/home/a"}}).packed_cache_directory, "/home/a/.cache/fornace");
  EXPECT_EQ(parse({{"HOME", "/home/a"}, {"XDG_CACHE_HOME", "/x"}}).packed_cache_directory,
            "/x/fornace");
  EXPECT_EQ(parse({{"HOME", "/home/a"}, {"FORNACE_PACKED_CACHE", "/c"}}).packed_cache_directory,
            "/c");
  for (const char* off : {"0", "off"}) {
    EXPECT_FALSE(
        parse({{"HOME", "/home/a"}, {"FORNACE_PACKED_CACHE", off}}).packed_cache_directory);
  }
}

TEST(EngineSettings, EachBadValueIsAnErrorNamingTheVariable) {
  EXPECT_EQ(error_of({{"FORNACE_ISA", "sse9"}}),
            "FORNACE_ISA: unknown level 'sse9' (expected portable, avx2 or avx512)");
  EXPECT_EQ(error_of({{"FORNACE_PACKED_WEIGHTS", "yes"}}),
            "FORNACE_PACKED_WEIGHTS: unknown value 'yes' (expected 1, on, 0 or off)");
  EXPECT_EQ(error_of({{"FORNACE_INTERLEAVED_QUADS", "2"}}),
            "FORNACE_INTERLEAVED_QUADS: unknown value '2' (expected 1, on, 0 or off)");
  EXPECT_EQ(error_of({{"FORNACE_AMX", "yes"}}),
            "FORNACE_AMX: unknown value 'yes' (expected 1, on, 0 or off)");
  EXPECT_EQ(error_of({{"FORNACE_HUGE_PAGES", "always"}}),
            "FORNACE_HUGE_PAGES: unknown value 'always' (expected on, reread, copy, file or off; "
            "1 is on, 0 is off)");
}

TEST(EngineSettings, DescribeAndHelpNameEveryVariable) {
  const std::string described = parse({{"FORNACE_ISA", "avx2"}}).describe();
  const std::string help = EngineSettings::help();
  for (const char* name : {"FORNACE_ISA", "FORNACE_PACKED_WEIGHTS", "FORNACE_INTERLEAVED_QUADS",
                           "FORNACE_AMX", "FORNACE_HUGE_PAGES", "FORNACE_PACKED_CACHE"}) {
    EXPECT_NE(described.find(name), std::string::npos) << name;
    EXPECT_NE(help.find(name), std::string::npos) << name;
  }
  EXPECT_NE(described.find("avx2"), std::string::npos) << described;
}

}  // namespace
}  // namespace fornace
