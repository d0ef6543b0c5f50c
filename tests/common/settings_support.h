// EngineSettings as parsed from an environment that sets only one variable, for tests.
#pragma once

#include <string_view>

#include "core/settings.h"

namespace fornace {

// EngineSettings::parse of an environment where only `name` is set, to `value`.
inline EngineSettings settings_with(const char* name, const char* value) {
  return EngineSettings::parse(
      [=](const char* variable) { return std::string_view(variable) == name ? value : nullptr; });
}

}  // namespace fornace
