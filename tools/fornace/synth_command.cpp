// The `synth` command (placeholder until it is implemented).
#include "common/args.h"
#include "fornace/commands.h"

namespace fornace::tools {

int synth_command(int, char**) {
  return run_command([]() -> int { throw Error("synth is not implemented yet"); });
}

}  // namespace fornace::tools
