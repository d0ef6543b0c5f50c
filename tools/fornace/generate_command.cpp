// `fornace --model DIR --prompt TEXT ...`: generate text, stream it, and summarise the cost.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "common/generation_flags.h"
#include "common/memory_info.h"
#include "common/progress.h"
#include "common/start_up.h"
#include "common/stream_out.h"
#include "core/memory.h"
#include "cpu/thread_pool.h"
#include "engine/generator.h"
#include "engine/trace.h"
#include "fornace/commands.h"
#include "io/files.h"
#include "models/model.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace fornace::tools {
namespace {

// Decode steps that the summary's mean ms covers at most.
constexpr int64_t kMeanSteps = 64;

constexpr const char* kUsage =
    "usage: fornace --model DIR|FILE.gguf (--prompt TEXT | --prompt-file PATH | --prompt-ids 1,2,3) "
    "[options]";

// "1,2,3" as ids; throws Error on an item that is not an id.
std::vector<uint32_t> parse_ids(const std::string& text) {
  const CLI::Validator id = integer_in(0, UINT32_MAX);
  std::vector<uint32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (std::string error = id(item); !error.empty()) fail(error);
    ids.push_back(static_cast<uint32_t>(std::stoul(item)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

// The flags of a generation, holding their defaults until the command line is parsed.
struct GenerateFlags {
  ModelFlags model;
  std::optional<std::string> prompt_text;
  std::optional<std::string> prompt_file;
  std::optional<std::string> prompt_ids;
  bool chat = false;
  std::optional<std::string> system;
  LengthFlags length;
  SamplerOptions sampling;
  int64_t max_context = 0;
  bool trace = false;
  bool json = false;
  std::optional<std::string> dump_logits;
  bool quiet = false;
};

void add_generate_flags(CommandLine& app, GenerateFlags& flags) {
  add_model_flags(app, flags.model);
  app.add_option("--prompt", flags.prompt_text, "prompt text")->type_name("TEXT");
  app.add_option("--prompt-file", flags.prompt_file, "prompt text read from a UTF-8 file")
      ->type_name("PATH");
  app.add_option("--prompt-ids", flags.prompt_ids, "prompt as token ids (no tokenizer needed)")
      ->type_name("1,2,3")
      ->check(parsed_by(parse_ids));
  app.add_flag("--chat", flags.chat, "wrap the prompt in the model's own chat template");
  app.add_option("--system", flags.system, "system message for --chat")
      ->type_name("TEXT")
      ->default_str("none");
  add_length_flags(app, flags.length, "tokens to generate; 0 runs prefill only");
  add_sampling_flags(app, flags.sampling);
  app.add_option("--max-context", flags.max_context, "positions the KV cache holds")
      ->type_name("N")
      ->transform(integer_in(1, INT64_MAX / 4))
      ->default_str("prompt + max-new-tokens");
  app.add_flag("--trace", flags.trace,
               "report memory per phase, bytes copied per decode step, top ops, and the time "
               "of each op in prefill and decode");
  app.add_flag("--json", flags.json,
               "print the summary as one JSON object on the last line of stdout");

  app.add_option("--dump-logits", flags.dump_logits,
                 "write the last-position logits of every forward pass (float32)")
      ->type_name("PATH.npy");
  app.add_flag("--quiet", flags.quiet, "no generated text and no summary on stderr");
}

// The commands beside generation, for the help page.
std::string subcommands_footer() {
  std::string footer = "commands (see fornace COMMAND --help):";
  for (const Subcommand& subcommand : kSubcommands) {
    footer += concat("\n  ", subcommand.name, std::string(25 - subcommand.name.size(), ' '),
                     subcommand.summary);
  }
  return footer;
}

int generate(const GenerateFlags& flags, std::chrono::steady_clock::time_point command_start,
             const EngineSettings& settings) {
  const std::string& model_path = flags.model.model_path;
  const std::optional<std::string>& prompt_text = flags.prompt_text;
  const std::optional<std::string>& prompt_file = flags.prompt_file;
  const std::optional<std::string>& prompt_ids = flags.prompt_ids;
  const std::optional<std::string>& system = flags.system;
  const std::optional<std::string>& dump_logits = flags.dump_logits;
  const bool chat = flags.chat;
  const int64_t max_new_tokens = flags.length.max_new_tokens;
  const int64_t threads = flags.model.threads;
  const bool quiet = flags.quiet;

  int prompt_sources = !!prompt_text + !!prompt_file + !!prompt_ids;
  if (prompt_sources == 0)
    throw UsageError("one of --prompt, --prompt-file or --prompt-ids is required");
  if (prompt_sources > 1)
    throw UsageError("give only one of --prompt, --prompt-file and --prompt-ids");
  if (system && !chat) throw UsageError("--system needs --chat");
  if (chat && prompt_ids) throw UsageError("--chat needs a text prompt, not --prompt-ids");
  KvCacheKind kind = parse_kv_cache_kind(flags.model.kv_cache);
  const ModelOptions model_options = tools::model_options(flags.model, settings);
  if (prompt_text && prompt_text->empty()) throw UsageError("the prompt is empty");
  set_num_threads(static_cast<int>(threads));

  namespace fs = std::filesystem;
  require_model_path(model_path);

  std::optional<Tokenizer> tokenizer;
  std::unique_ptr<Model> model;
  {
    memory::PhaseScope phase(Phase::load);
    // One opening of the files for both: a GGUF file's tokenizer reads its keys through the
    // model's parse rather than mapping the file again.
    std::shared_ptr<const ModelFiles> files = open_model_files(model_path, settings);
    model = load_model(files, model_options);
    if (!prompt_ids || files->is_gguf() || fs::exists(fs::path(model_path) / "tokenizer.json")) {
      tokenizer.emplace(Tokenizer::load(*files));
    }
  }
  const double load_ms = ms_since(command_start);
  const ModelConfig& config = model->config();

  std::vector<uint32_t> prompt;
  if (prompt_ids) {
    prompt = parse_ids(*prompt_ids);
  } else {
    std::string text = prompt_text ? *prompt_text : read_file(*prompt_file);
    if (text.empty()) fail("the prompt file ", *prompt_file, " is empty");
    // Checked before any chat template, so that the offset counts in what the user gave.
    if (size_t offset = text::first_invalid_utf8(text); offset != std::string::npos) {
      fail(prompt_file ? "the prompt file " + *prompt_file : std::string("the prompt"),
           " is not valid UTF-8 at byte offset ", offset);
    }
    if (chat) {
      std::vector<ChatMessage> messages;
      if (system) messages.push_back({"system", *system});
      messages.push_back({"user", text});
      text = tokenizer->apply_chat_template(messages, true);
    }
    prompt = encode_prompt(*tokenizer, text);
  }
  if (prompt.empty()) fail("the prompt encodes to no tokens");
  for (uint32_t id : prompt) {
    if (id >= static_cast<uint64_t>(config.vocab_size)) {
      fail("prompt id ", id, " is out of the vocabulary of ", config.vocab_size);
    }
  }

  int64_t needed = static_cast<int64_t>(prompt.size()) + max_new_tokens;
  int64_t max_context = flags.max_context ? flags.max_context : needed;
  check_context(*model, max_context, "--max-context");
  if (needed > max_context) {
    fail(prompt.size(), " prompt tokens + ", max_new_tokens, " new tokens exceed the context of ",
         max_context);
  }

  GenerationOptions options;
  options.max_new_tokens = max_new_tokens;
  options.ignore_eos = flags.length.ignore_eos;
  options.eos_ids = end_of_sequence_ids(config, tokenizer ? &*tokenizer : nullptr);
  options.keep_logits = dump_logits.has_value();
  options.prefill_chunk = flags.model.prefill_chunk;
  ProgressLine prefill_progress("prefill", "tokens", quiet || flags.json);
  options.on_prefill_progress = [&](int64_t done, int64_t total) {
    if (done < total) prefill_progress.update(done, total);
  };

  Generator generator(*model, kind, max_context, flags.sampling);
  std::optional<IncrementalDecoder> decoder;
  if (tokenizer) decoder.emplace(*tokenizer, true);
  bool stream = !quiet;
  // From the command's start (arguments, loading the tokenizer and model, encoding, prefill)
  // to the first generated token.
  double first_token_ms = 0;
  auto on_token = [&](uint32_t id) {
    if (first_token_ms == 0) {
      first_token_ms = ms_since(command_start);
      prefill_progress.clear();
    }
    if (!stream) return;
    write_out(decoder ? decoder->push(id) : std::to_string(id) + " ");
  };
  GenerationResult result;
  memory::set_op_timing(flags.trace);
  try {
    result = generator.generate(prompt, options, on_token);
    if (stream) write_out((decoder ? decoder->flush() : std::string()) + "\n");
  } catch (const OutputClosed&) {
    return 0;
  }

  if (dump_logits) {
    std::vector<float> rows;
    for (const auto& row : result.logits) rows.insert(rows.end(), row.begin(), row.end());
    write_npy(*dump_logits, rows, {static_cast<int64_t>(result.logits.size()), config.vocab_size});
  }
  double peak_rss_mib = static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0);
  // The mean covers the last 64 decode steps, or all of them when fewer ran.
  const size_t mean_steps = std::min(result.steps.size(), static_cast<size_t>(kMeanSteps));
  char mean_text[96] = "no decode steps";
  if (mean_steps > 0) {
    std::snprintf(mean_text, sizeof(mean_text), "mean %.2f ms over the last %zu step%s",
                  result.mean_step_ms_last(kMeanSteps), mean_steps, mean_steps == 1 ? "" : "s");
  }
  if (!quiet) {
    std::fprintf(stderr,
                 "load: %.1f ms (tokenizer and model); first token after %.1f ms\n"
                 "prompt: %zu tokens, prefill %.1f ms (%.1f tok/s)\n"
                 "decode: %zu tokens, %.2f tok/s, %s\n"
                 "peak memory: %.1f MiB (process high-water mark)\n",
                 load_ms, first_token_ms, prompt.size(), result.prefill_ms,
                 result.prefill_tokens_per_second(), result.generated.size(),
                 result.decode_tokens_per_second(), mean_text, peak_rss_mib);
  }
  if (flags.trace) {
    std::cerr << "trace: settings\n"
              << settings.describe() << format_trace(result, model->load_report())
              << "trace: activations for quantized weights: "
              << activation_rounding_name(model_options.activation_rounding) << "\n"
              << format_kv_cache_trace(*model, max_context);
  }
  if (flags.json) {
    std::vector<double> step_ms;
    for (const DecodeStep& step : result.steps) step_ms.push_back(step.ms);
    nlohmann::json summary = {
        {"model", model_path},
        {"dtype", dtype_name(model->weight_dtype())},
        {"kv_cache", kv_cache_kind_name(kind)},
        {"cache_type", kv_cache_type_name(model->kv_cache_shape(max_context).type())},
        {"attention", attention_path_name(model_options.attention)},
        {"activations", activation_rounding_name(model_options.activation_rounding)},
        {"threads", threads},
        {"prompt_tokens", prompt.size()},
        {"generated_ids", result.generated},
        {"prefill_ms", result.prefill_ms},
        {"prefill_tok_s", result.prefill_tokens_per_second()},
        {"decode_tok_s", result.decode_tokens_per_second()},
        {"decode_step_ms", step_ms},
        {"mean_ms_last64", result.mean_step_ms_last(kMeanSteps)},
        {"mean_steps", mean_steps},
        {"peak_rss_mib", peak_rss_mib},
        {"load_ms", load_ms},
        {"first_token_ms", first_token_ms},
    };
    if (flags.trace) summary["trace"] = trace_to_json(result, model->load_report());
    try {
      write_out(summary.dump() + "\n");
    } catch (const OutputClosed&) {
      return 0;
    }
  }
  return 0;
}

}  // namespace

int generate_command(int argc, char** argv, const EngineSettings& settings) {
  const auto command_start = std::chrono::steady_clock::now();
  std::signal(SIGPIPE, SIG_IGN);
  CommandLine app("fornace", kUsage,
                  "Generates text from a Hugging Face checkpoint (config.json, *.safetensors, "
                  "tokenizer.json) or a GGUF file of the qwen2, llama, qwen3 or gemma3 "
                  "architecture.");
  GenerateFlags flags;
  add_generate_flags(app, flags);
  app.footer(subcommands_footer() + "\n\n" + EngineSettings::help());
  return app.parse_and_run(argc, argv, [&] { return generate(flags, command_start, settings); });
}

}  // namespace fornace::tools
