// fornace: generate text from a checkpoint or GGUF file, or run one of its subcommands.
#include "fornace/commands.h"

int main(int argc, char** argv) {
  using namespace fornace::tools;
  for (const Subcommand& subcommand : kSubcommands) {
    if (argc >= 2 && argv[1] == subcommand.name) return subcommand.run(argc - 1, argv + 1);
  }
  return generate_command(argc, argv);
}
