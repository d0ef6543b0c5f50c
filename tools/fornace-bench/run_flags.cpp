// The flags that fornace-bench and its children share: their definitions and their arguments.
#include <set>

#include "commands.h"
#include "common/cli.h"
#include "nn/kv_cache.h"
#include "prompts.h"

namespace fornace::bench {

void check_kv_cache_list(const std::string& text) {
  std::set<std::string> seen;
  for (const std::string& kind : split_list(text)) {
    parse_kv_cache_kind(kind);
    if (!seen.insert(kind).second) fail("lists ", kind, " twice");
  }
}

void add_run_flags(tools::CommandLine& app, RunFlags& flags) {
  using tools::integer_in;
  app.add_option("--model", flags.model_directory,
                 "checkpoint directory (config.json, *.safetensors, tokenizer.json)")
      ->type_name("DIR")
      ->required();
  app.add_option("--kv-cache", flags.kv_cache,
                 "KV cache kinds: prealloc, cat, cat-contiguous (comma-separated)")
      ->type_name("LIST")
      ->required()
      ->check(tools::parsed_by(check_kv_cache_list));
  app.add_option("--prompts", flags.prompt_list,
                 "prompt files, comma-separated: UTF-8 text, or token ids in a .ids file")
      ->type_name("LIST")
      ->required()
      ->check(tools::parsed_by(split_list));
  app.add_option("--runs", flags.runs, "recorded runs per prompt")
      ->type_name("N")
      ->transform(integer_in(1, 1000));
  app.add_option("--warmup", flags.warmup, "warm-up runs per prompt, not recorded")
      ->type_name("N")
      ->transform(integer_in(0, 1000));
  app.add_option("--max-new-tokens", flags.max_new_tokens, "tokens generated per run, at least 2")
      ->type_name("N")
      ->transform(integer_in(2, 1 << 20));
  tools::add_threads_flag(app, flags.threads);
  tools::add_dtype_flag(app, flags.dtype);
}

std::vector<std::string> run_flag_arguments(const RunFlags& flags) {
  std::vector<std::string> arguments = {"--model=" + flags.model_directory,
                                        "--kv-cache=" + flags.kv_cache,
                                        "--prompts=" + flags.prompt_list,
                                        "--runs=" + std::to_string(flags.runs),
                                        "--warmup=" + std::to_string(flags.warmup),
                                        "--max-new-tokens=" + std::to_string(flags.max_new_tokens),
                                        "--threads=" + std::to_string(flags.threads)};
  if (!flags.dtype.empty()) arguments.push_back("--dtype=" + flags.dtype);
  return arguments;
}

}  // namespace fornace::bench
