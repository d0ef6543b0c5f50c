// fornace-bench: speed and memory per model, attention path and KV cache; `report` redraws a CSV,
// `roofs` measures the machine's roofs alone.
#include <csignal>
#include <string_view>

#include "commands.h"
#include "common/start_up.h"

int main(int argc, char** argv) {
  using namespace fornace::bench;
  std::signal(SIGPIPE, SIG_IGN);
  // The children inherit the environment, and read it again at their own start.
  std::optional<fornace::EngineSettings> settings = fornace::tools::start_up_settings();
  if (!settings) return 1;
  std::string_view mode = argc >= 2 ? argv[1] : "";
  if (mode == "--child") return child_command(argc - 1, argv + 1, *settings);
  if (mode == "report") return report_command(argc - 1, argv + 1);
  if (mode == "roofs") return roofs_command(argc - 1, argv + 1);
  return bench_command(argc, argv);
}
