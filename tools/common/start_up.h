// The tools' start-up: the FORNACE_* settings read once and applied, and model files opened
// as they say.
#pragma once

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/settings.h"
#include "cpu/cpu_features.h"
#include "io/model_files.h"

namespace fornace::tools {

// EngineSettings::from_environment(), with the kernels' level and packed forms and the 2 MiB
// buffers set from it (cpu::apply_process_settings); on a bad value, one "error: FORNACE_X: ..."
// line on stderr and nothing.
inline std::optional<EngineSettings> start_up_settings() {
  try {
    EngineSettings settings = EngineSettings::from_environment();
    cpu::apply_process_settings(settings);
    return settings;
  } catch (const Error& error) {
    std::cerr << "error: " << error.what() << "\n";
    return std::nullopt;
  }
}

// The model's files, mapped as the settings say (FORNACE_HUGE_PAGES).
inline std::shared_ptr<const ModelFiles> open_model_files(const std::string& path,
                                                          const EngineSettings& settings) {
  require_model_path(path);
  return ModelFiles::open(path, FileMappingOptions::for_mode(settings.huge_pages));
}

}  // namespace fornace::tools
