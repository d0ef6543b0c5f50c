// The subcommands of the fornace tool; each takes the arguments after its name.
#pragma once

namespace fornace::tools {

int generate_command(int argc, char** argv);  // fornace --model DIR --prompt ... (the default)
int synth_command(int argc, char** argv);     // fornace synth --preset NAME --out DIR
int tokenize_command(int argc, char** argv);  // fornace tokenize --model DIR [--decode]

}  // namespace fornace::tools
