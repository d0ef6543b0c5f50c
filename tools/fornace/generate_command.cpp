// `fornace --model DIR --prompt TEXT ...`: generate text, stream it, and summarise the cost.
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "common/args.h"
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

constexpr const char* kUsage = R"(usage: fornace --model DIR (--prompt TEXT | --prompt-file PATH | --prompt-ids 1,2,3) [options]
       fornace synth --preset NAME --out DIR [--seed N] [--dtype bf16|f32]
       fornace tokenize --model DIR [--decode]

Generates text from a Qwen2-family checkpoint (config.json, *.safetensors, tokenizer.json).

  --model DIR              checkpoint directory (required)
  --prompt TEXT            prompt text
  --prompt-file PATH       prompt text read from a UTF-8 file
  --prompt-ids 1,2,3       prompt as token ids (no tokenizer needed)
  --chat                   wrap the prompt in the ChatML template of instruct models
  --system TEXT            system message for --chat (default: none)
  --max-new-tokens N       tokens to generate; 0 runs prefill only (default: 128)
  --ignore-eos             keep generating past end-of-sequence ids
  --kv-cache KIND          prealloc | cat | cat-contiguous (default: prealloc)
  --dtype DTYPE            weights as bf16 | f32 | f16, converted at load (default: as stored)
  --threads N              worker threads (default: available cores)
  --temperature T          0 is greedy (default: 0)
  --top-k K                keep the K most likely tokens; 0 is off (default: 0)
  --top-p P                keep the smallest set with probability P; 1 is off (default: 1)
  --min-p P                drop tokens below P times the top probability; 0 is off (default: 0)
  --seed S                 sampling seed (default: 299792458)
  --repeat-penalty P       HF/Candle repeat penalty; 1 is off (default: 1.1)
  --repeat-last-n N        tokens the penalty looks back over (default: 64)
  --max-context N          positions the KV cache holds (default: prompt + max-new-tokens)
  --prefill-chunk N        the prompt runs in equal chunks of N to 2N-1 tokens; 0 is one
                           pass (default: 512)
  --trace                  report memory per phase, bytes copied per decode step, top ops
  --json                   print the summary as one JSON object on the last line of stdout
  --dump-logits PATH.npy   write the last-position logits of every forward pass (float32)
  --quiet                  no generated text and no summary on stderr
  --help                   this text
)";

// Raised when stdout is closed under us (e.g. `| head`): generation stops quietly.
struct OutputClosed {};

void write_out(const std::string& text) {
  if (text.empty()) return;
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    if (errno == EPIPE) throw OutputClosed{};
    fail("writing to stdout failed");
  }
}

std::vector<uint32_t> parse_ids(const std::string& text) {
  std::vector<uint32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos
                                                                      : comma - start);
    ids.push_back(static_cast<uint32_t>(Args::parse_int("--prompt-ids", item, 0, UINT32_MAX)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

int64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

// Milliseconds since `start`.
double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

int generate(Args& args) {
  const auto command_start = std::chrono::steady_clock::now();
  if (args.take_flag("--help") || args.empty()) {
    std::cout << kUsage;
    return 0;
  }
  std::optional<std::string> model_directory = args.take("--model");
  std::optional<std::string> prompt_text = args.take("--prompt");
  std::optional<std::string> prompt_file = args.take("--prompt-file");
  std::optional<std::string> prompt_ids = args.take("--prompt-ids");
  bool chat = args.take_flag("--chat");
  std::optional<std::string> system = args.take("--system");
  int64_t max_new_tokens = args.take_int("--max-new-tokens", 128, 0, 1 << 24);
  bool ignore_eos = args.take_flag("--ignore-eos");
  std::string kind_name = args.take_string("--kv-cache", "prealloc");
  std::optional<std::string> dtype_text = args.take("--dtype");
  int64_t threads = args.take_int("--threads", available_cores(), 1, 1024);
  SamplerOptions sampling;
  sampling.temperature = args.take_double("--temperature", 0.0, 0.0, 1e6);
  sampling.top_k = args.take_int("--top-k", 0, 0, INT32_MAX);
  sampling.top_p = args.take_double("--top-p", 1.0, 1e-9, 1.0);
  sampling.min_p = args.take_double("--min-p", 0.0, 0.0, 0.999999);
  sampling.seed = static_cast<uint64_t>(args.take_int("--seed", 299792458, 0, INT64_MAX));
  sampling.repeat_penalty = args.take_double("--repeat-penalty", 1.1, 1e-6, 1e6);
  sampling.repeat_last_n = args.take_int("--repeat-last-n", 64, 0, INT32_MAX);
  int64_t max_context_flag = args.take_int("--max-context", 0, 1, INT64_MAX / 4);
  int64_t prefill_chunk = args.take_int("--prefill-chunk", 512, 0, INT64_MAX / 4);
  bool trace = args.take_flag("--trace");
  bool json = args.take_flag("--json");
  std::optional<std::string> dump_logits = args.take("--dump-logits");
  bool quiet = args.take_flag("--quiet");
  args.finish();

  if (!model_directory) throw UsageError("--model DIR is required");
  int prompt_sources = !!prompt_text + !!prompt_file + !!prompt_ids;
  if (prompt_sources == 0) throw UsageError("one of --prompt, --prompt-file or --prompt-ids is required");
  if (prompt_sources > 1) throw UsageError("give only one of --prompt, --prompt-file and --prompt-ids");
  if (system && !chat) throw UsageError("--system needs --chat");
  if (chat && prompt_ids) throw UsageError("--chat needs a text prompt, not --prompt-ids");
  KvCacheKind kind;
  ModelOptions model_options;
  try {
    kind = parse_kv_cache_kind(kind_name);
    if (dtype_text) {
      model_options.dtype = parse_dtype(*dtype_text);
      if (!is_float(*model_options.dtype)) fail("--dtype must be bf16, f32 or f16");
    }
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
  if (prompt_text && prompt_text->empty()) throw UsageError("the prompt is empty");
  set_num_threads(static_cast<int>(threads));

  namespace fs = std::filesystem;
  if (!fs::is_directory(*model_directory)) {
    fail("model directory ", *model_directory, (fs::exists(*model_directory) ? " is not a directory" : " does not exist"));
  }

  std::optional<Tokenizer> tokenizer;
  std::unique_ptr<Model> model;
  {
    memory::PhaseScope phase(Phase::load);
    if (!prompt_ids || fs::exists(fs::path(*model_directory) / "tokenizer.json")) {
      tokenizer.emplace(Tokenizer::load(*model_directory));
    }
    model = load_model(*model_directory, model_options);
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
    prompt = tokenizer->encode(text);
  }
  if (prompt.empty()) fail("the prompt encodes to no tokens");
  for (uint32_t id : prompt) {
    if (id >= static_cast<uint64_t>(config.vocab_size)) {
      fail("prompt id ", id, " is out of the vocabulary of ", config.vocab_size);
    }
  }

  int64_t needed = static_cast<int64_t>(prompt.size()) + max_new_tokens;
  int64_t max_context = max_context_flag ? max_context_flag : needed;
  int64_t cache_bytes = KvCacheSet::prealloc_bytes(config.num_hidden_layers,
                                                   model->kv_cache_shape(max_context));
  int64_t available = available_memory_bytes();
  if (available > 0 && cache_bytes > available) {
    fail("--max-context ", max_context, " needs a KV cache of ", cache_bytes,
         " bytes, more than the ", available, " bytes of memory available");
  }
  if (max_context > config.max_position_embeddings) {
    fail("a context of ", max_context, " exceeds the model's max_position_embeddings of ",
         config.max_position_embeddings);
  }
  if (needed > max_context) {
    fail(prompt.size(), " prompt tokens + ", max_new_tokens, " new tokens exceed the context of ",
         max_context);
  }

  GenerationOptions options;
  options.max_new_tokens = max_new_tokens;
  options.ignore_eos = ignore_eos;
  options.eos_ids = config.eos_token_ids;
  if (options.eos_ids.empty() && tokenizer && tokenizer->eos_token_id()) {
    options.eos_ids.push_back(*tokenizer->eos_token_id());
  }
  options.keep_logits = dump_logits.has_value();
  options.prefill_chunk = prefill_chunk;

  Generator generator(*model, kind, max_context, sampling);
  std::optional<IncrementalDecoder> decoder;
  if (tokenizer) decoder.emplace(*tokenizer, true);
  bool stream = !quiet;
  // From the command's start (arguments, loading the tokenizer and model, encoding, prefill)
  // to the first generated token.
  double first_token_ms = 0;
  auto on_token = [&](uint32_t id) {
    if (first_token_ms == 0) first_token_ms = ms_since(command_start);
    if (!stream) return;
    write_out(decoder ? decoder->push(id) : std::to_string(id) + " ");
  };
  GenerationResult result;
  try {
    result = generator.generate(prompt, options, on_token);
    if (stream) write_out((decoder ? decoder->flush() : std::string()) + "\n");
  } catch (const OutputClosed&) {
    return 0;
  }

  if (dump_logits) {
    std::vector<float> rows;
    for (const auto& row : result.logits) rows.insert(rows.end(), row.begin(), row.end());
    write_npy(*dump_logits, rows,
              {static_cast<int64_t>(result.logits.size()), config.vocab_size});
  }
  double peak_rss_mib = static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0);
  if (!quiet) {
    std::fprintf(stderr,
                 "load: %.1f ms (tokenizer and model); first token after %.1f ms\n"
                 "prompt: %zu tokens, prefill %.1f ms (%.1f tok/s)\n"
                 "decode: %zu tokens, %.2f tok/s, mean %.2f ms over the last 64 steps\n"
                 "peak memory: %.1f MiB (process high-water mark)\n",
                 load_ms, first_token_ms, prompt.size(), result.prefill_ms,
                 result.prefill_tokens_per_second(),
                 result.generated.size(), result.decode_tokens_per_second(),
                 result.mean_step_ms_last(64), peak_rss_mib);
  }
  if (trace) std::cerr << format_trace(result);
  if (json) {
    std::vector<double> step_ms;
    for (const DecodeStep& step : result.steps) step_ms.push_back(step.ms);
    nlohmann::json summary = {
        {"model", *model_directory},
        {"dtype", dtype_name(model->weight_dtype())},
        {"kv_cache", kv_cache_kind_name(kind)},
        {"threads", threads},
        {"prompt_tokens", prompt.size()},
        {"generated_ids", result.generated},
        {"prefill_ms", result.prefill_ms},
        {"prefill_tok_s", result.prefill_tokens_per_second()},
        {"decode_tok_s", result.decode_tokens_per_second()},
        {"decode_step_ms", step_ms},
        {"mean_ms_last64", result.mean_step_ms_last(64)},
        {"peak_rss_mib", peak_rss_mib},
        {"load_ms", load_ms},
        {"first_token_ms", first_token_ms},
    };
    if (trace) summary["trace"] = trace_to_json(result);
    try {
      write_out(summary.dump() + "\n");
    } catch (const OutputClosed&) {
      return 0;
    }
  }
  return 0;
}

}  // namespace

int generate_command(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  return run_command([&] {
    Args args(argc, argv, 1);
    return generate(args);
  });
}

}  // namespace fornace::tools
