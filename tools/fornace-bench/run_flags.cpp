// The flags that fornace-bench and its children share: their definitions and their arguments.
#include <set>

#include "commands.h"
#include "common/cli.h"
#include "nn/candle_path.h"
#include "nn/kv_cache.h"
#include "prompts.h"

namespace fornace::bench {

namespace {

// A check of a comma-separated flag value: every item passes `parse`, and none comes twice.
template <typename Parse>
CLI::Validator list_of(Parse parse) {
  return tools::parsed_by([parse](const std::string& text) {
    std::set<std::string> seen;
    for (const std::string& item : split_list(text)) {
      parse(item);
      if (!seen.insert(item).second) fail("lists ", item, " twice");
    }
  });
}

}  // namespace

void add_run_flags(tools::CommandLine& app, RunFlags& flags) {
  using tools::integer_in;
  app.add_option("--model", flags.model_directory,
                 "checkpoint directories, comma-separated (config.json, *.safetensors, "
                 "tokenizer.json)")
      ->type_name("DIR[,DIR...]")
      ->required()
      ->check(list_of([](const std::string&) {}));
  app.add_option("--attention", flags.attention,
                 "attention paths, comma-separated: fused (Fornace's attention kernel), candle "
                 "(Candle's op sequence: repeat_kv, contiguous, matmul, softmax, matmul)")
      ->type_name("LIST")
      ->check(list_of(parse_attention_path));
  app.add_option("--kv-cache", flags.kv_cache,
                 "KV cache kinds: prealloc, cat, cat-contiguous (comma-separated)")
      ->type_name("LIST")
      ->required()
      ->check(list_of(parse_kv_cache_kind));
  app.add_option("--cache-type", flags.cache_type,
                 "KV cache types: f32, f16, bf16, q8_0, q4_0 (comma-separated; one child each, "
                 "for every kind; default: the model's, bf16 for bf16 or quantized weights)")
      ->type_name("LIST")
      ->check(list_of(parse_kv_cache_type));
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
  tools::add_activations_flag(app, flags.activations);
}

std::vector<std::string> run_flag_arguments(const RunFlags& flags) {
  std::vector<std::string> arguments = {"--model=" + flags.model_directory,
                                        "--attention=" + flags.attention,
                                        "--kv-cache=" + flags.kv_cache,
                                        "--prompts=" + flags.prompt_list,
                                        "--runs=" + std::to_string(flags.runs),
                                        "--warmup=" + std::to_string(flags.warmup),
                                        "--max-new-tokens=" + std::to_string(flags.max_new_tokens),
                                        "--threads=" + std::to_string(flags.threads),
                                        "--activations=" + flags.activations};
  if (!flags.dtype.empty()) arguments.push_back("--dtype=" + flags.dtype);
  if (!flags.cache_type.empty()) arguments.push_back("--cache-type=" + flags.cache_type);
  return arguments;
}

}  // namespace fornace::bench
