// fornace: generate text from a checkpoint or GGUF file, or run one of its subcommands.
#include "common/start_up.h"
#include "fornace/commands.h"

int main(int argc, char** argv) {
  using namespace fornace::tools;
  std::optional<fornace::EngineSettings> settings = start_up_settings();
  if (!settings) return 1;
  for (const Subcommand& subcommand : kSubcommands) {
    if (argc >= 2 && argv[1] == subcommand.name) {
      return subcommand.run(argc - 1, argv + 1, *settings);
    }
  }
  return generate_command(argc, argv, *settings);
}
