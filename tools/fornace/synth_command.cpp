// The `synth` command: writes a synthetic Qwen2 checkpoint from a preset.
#include <cstdio>
#include <iostream>

#include "common/args.h"
#include "fornace/commands.h"
#include "models/synthetic.h"

namespace fornace::tools {

namespace {

const char kUsage[] =
    "usage: fornace synth --preset NAME --out DIR [--seed N] [--dtype bf16|f16|f32] "
    "[--tokenizer-dir DIR]";

}  // namespace

int synth_command(int argc, char** argv) {
  return run_command([&]() -> int {
    Args args(argc, argv);
    if (args.take_flag("--help")) {
      std::cout << kUsage << "\n";
      return 0;
    }
    SyntheticOptions options;
    std::optional<std::string> preset = args.take("--preset");
    std::optional<std::string> out = args.take("--out");
    options.seed = static_cast<uint64_t>(args.take_int("--seed", 0, 0, INT64_MAX));
    std::string dtype_text = args.take_string("--dtype", "bf16");
    options.tokenizer_directory = args.take_string("--tokenizer-dir", "models");
    args.finish();
    if (!preset) throw UsageError(std::string("--preset is required; ") + kUsage);
    if (!out || out->empty()) throw UsageError(std::string("--out is required; ") + kUsage);
    bool known = false;
    std::string names;
    for (const std::string& name : synthetic_preset_names()) {
      known = known || name == *preset;
      names += (names.empty() ? "" : ", ") + name;
    }
    if (!known) throw UsageError("unknown preset '" + *preset + "' (known presets: " + names + ")");
    if (dtype_text == "bf16") {
      options.dtype = DType::bf16;
    } else if (dtype_text == "f16") {
      options.dtype = DType::f16;
    } else if (dtype_text == "f32") {
      options.dtype = DType::f32;
    } else {
      throw UsageError("--dtype expects bf16, f16 or f32, got '" + dtype_text + "'");
    }
    options.preset = *preset;
    options.out_directory = *out;

    SyntheticSummary summary = write_synthetic_model(options);
    std::printf(
        "synth: wrote %s (preset %s, %s, seed %llu): %.1fM parameters, %.1f MB of "
        "weights in %.2f s\n",
        options.out_directory.c_str(), options.preset.c_str(), dtype_text.c_str(),
        static_cast<unsigned long long>(options.seed), summary.parameters / 1e6,
        summary.weight_bytes / 1e6, summary.seconds);
    return 0;
  });
}

}  // namespace fornace::tools
