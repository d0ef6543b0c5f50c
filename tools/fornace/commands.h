// The commands of the fornace tool; each parses the arguments after its name.
#pragma once

#include <string_view>

#include "core/settings.h"

namespace fornace::tools {

// Each takes the settings that main read from the environment at start-up.
// fornace --model DIR --prompt ... (the default)
int generate_command(int argc, char** argv, const EngineSettings& settings);
// fornace synth --preset NAME --out DIR
int synth_command(int argc, char** argv, const EngineSettings& settings);
// fornace tokenize --model DIR [--decode]
int tokenize_command(int argc, char** argv, const EngineSettings& settings);
// fornace quantize --type T --model P --out F
int quantize_command(int argc, char** argv, const EngineSettings& settings);
// fornace serve --model PATH [--port N]
int serve_command(int argc, char** argv, const EngineSettings& settings);
// fornace chat --model PATH
int chat_command(int argc, char** argv, const EngineSettings& settings);

// `fornace NAME ...` runs `run` with argv[0] == NAME; `fornace --help` lists the summaries.
struct Subcommand {
  std::string_view name;
  std::string_view summary;
  int (*run)(int argc, char** argv, const EngineSettings& settings);
};

inline constexpr Subcommand kSubcommands[] = {
    {"synth", "write a synthetic checkpoint (seeded random weights) from a preset", synth_command},
    {"tokenize", "encode JSON strings to ids, or decode ids, one per line", tokenize_command},
    {"quantize", "write a GGUF file (bf16, q8_0, q4_0, q4_k_m, ...) from a model", quantize_command},
    {"chat", "a conversation in the terminal; the history stays in the KV cache", chat_command},
    {"serve", "serve the model over HTTP with OpenAI's API (continuous batching)", serve_command},
};

}  // namespace fornace::tools
