// fornace-bench: measures decode speed and memory per KV cache kind; `report` redraws a CSV.
#include <csignal>
#include <cstring>

#include "commands.h"

int main(int argc, char** argv) {
  using namespace fornace;
  std::signal(SIGPIPE, SIG_IGN);
  return tools::run_command([&] {
    if (argc >= 2 && std::strcmp(argv[1], "--child") == 0) {
      tools::Args args(argc, argv, 2);
      return bench::run_child(args);
    }
    if (argc >= 2 && std::strcmp(argv[1], "report") == 0) {
      if (argc < 3 || argv[2][0] == '-')
        throw tools::UsageError("usage: fornace-bench report RUNS.csv");
      tools::Args args(argc, argv, 3);
      return bench::run_report(argv[2], args);
    }
    tools::Args args(argc, argv, 1);
    return bench::run_bench(args);
  });
}
