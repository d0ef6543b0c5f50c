// fornace: generate text from a Qwen2-family checkpoint; `synth` and `tokenize` subcommands.
#include <cstring>

#include "fornace/commands.h"

int main(int argc, char** argv) {
  using namespace fornace::tools;
  if (argc >= 2 && std::strcmp(argv[1], "synth") == 0) return synth_command(argc - 1, argv + 1);
  if (argc >= 2 && std::strcmp(argv[1], "tokenize") == 0) {
    return tokenize_command(argc - 1, argv + 1);
  }
  return generate_command(argc, argv);
}
