// The `synth` command: writes a synthetic Qwen2 checkpoint from a preset.
#include <cstdio>

#include "common/cli.h"
#include "common/progress.h"
#include "fornace/commands.h"
#include "models/synthetic.h"

namespace fornace::tools {

int synth_command(int argc, char** argv, const EngineSettings&) {
  CommandLine app("fornace synth", "usage: fornace synth --preset NAME --out DIR [options]",
                  "Writes a checkpoint with the shapes of a preset and seeded random weights, "
                  "with the tokenizer files copied beside it.");
  SyntheticOptions options;
  std::string dtype_text = "bf16";
  std::string presets;
  for (const std::string& name : synthetic_preset_names()) {
    presets += (presets.empty() ? "" : " | ") + name;
  }
  app.add_option("--preset", options.preset, presets)
      ->type_name("NAME")
      ->required()
      ->check(parsed_by(synthetic_preset));
  app.add_option("--out", options.out_directory, "directory to write")
      ->type_name("DIR")
      ->required();
  app.add_option("--seed", options.seed, "seed of the random weights")
      ->type_name("N")
      ->transform(integer_in(0, INT64_MAX));
  app.add_option("--dtype", dtype_text, "weights as bf16 | f16 | f32")
      ->type_name("DTYPE")
      ->check(float_dtype());
  app.add_option("--tokenizer-dir", options.tokenizer_directory,
                 "directory whose tokenizer.json and tokenizer_config.json are copied")
      ->type_name("DIR");
  return app.parse_and_run(argc, argv, [&] {
    if (options.out_directory.empty()) throw UsageError("--out is empty");
    options.dtype = parse_dtype(dtype_text);
    ProgressLine progress("synth", "MB", false);
    options.on_progress = [&](int64_t written, int64_t total) {
      progress.update(written / 1000000, total / 1000000);
    };
    SyntheticSummary summary = write_synthetic_model(options);
    progress.clear();
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
