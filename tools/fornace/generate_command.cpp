// The `generate` command (placeholder until it is implemented).
#include "common/args.h"
#include "fornace/commands.h"

namespace fornace::tools {

int generate_command(int, char**) {
  return run_command([]() -> int { throw Error("generate is not implemented yet"); });
}

}  // namespace fornace::tools
