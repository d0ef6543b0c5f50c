// The `tokenize` command (placeholder until it is implemented).
#include "common/args.h"
#include "fornace/commands.h"

namespace fornace::tools {

int tokenize_command(int, char**) {
  return run_command([]() -> int { throw Error("tokenize is not implemented yet"); });
}

}  // namespace fornace::tools
