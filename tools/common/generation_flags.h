// The model, length and sampling flags that `fornace` and `fornace chat` share, and the setup that
// follows from them: loading, the KV cache's context, and a text prompt as ids.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/memory_info.h"
#include "core/settings.h"
#include "engine/sampler.h"
#include "io/gguf.h"
#include "models/model.h"
#include "nn/kv_cache.h"
#include "text/tokenizer.h"

namespace fornace::tools {

// The model and how it runs, holding their defaults until the command line is parsed.
struct ModelFlags {
  std::string model_path;
  std::string kv_cache = "prealloc";
  std::string cache_type;
  std::string attention;
  std::string dtype;
  std::string activations;
  int64_t threads = 0;
  int64_t prefill_chunk = 512;
};

inline void add_model_flags(CLI::App& app, ModelFlags& flags) {
  app.add_option("--model", flags.model_path, "checkpoint directory or GGUF file")
      ->type_name("PATH")
      ->required();
  app.add_option("--kv-cache", flags.kv_cache, "prealloc | cat | cat-contiguous")
      ->type_name("KIND")
      ->check(parsed_by(parse_kv_cache_kind));
  add_cache_type_flag(app, flags.cache_type);
  add_attention_flag(app, flags.attention);
  add_dtype_flag(app, flags.dtype);
  add_activations_flag(app, flags.activations);
  add_threads_flag(app, flags.threads);
  app.add_option("--prefill-chunk", flags.prefill_chunk,
                 "the prompt runs in equal chunks of N to 2N-1 tokens; 0 is one pass")
      ->type_name("N")
      ->transform(integer_in(0, INT64_MAX / 4));
}

inline ModelOptions model_options(const ModelFlags& flags, const EngineSettings& settings) {
  ModelOptions options;
  options.packed_cache_directory = settings.packed_cache_directory;
  if (!flags.dtype.empty()) options.dtype = parse_dtype(flags.dtype);
  options.attention = parse_attention_path(flags.attention);
  options.activation_rounding = parse_activation_rounding(flags.activations);
  if (!flags.cache_type.empty()) {
    options.set_kv_cache_type(parse_kv_cache_type(flags.cache_type));
    if (options.kv_blocks && parse_kv_cache_kind(flags.kv_cache) != KvCacheKind::prealloc) {
      fail("--cache-type ", flags.cache_type, " needs --kv-cache prealloc (", flags.kv_cache,
           " is Candle's cache of float tensors)");
    }
  }
  return options;
}

// How many tokens a generation adds and whether an end-of-sequence id ends it.
struct LengthFlags {
  int64_t max_new_tokens = 128;
  bool ignore_eos = false;
};

inline void add_length_flags(CLI::App& app, LengthFlags& flags, const std::string& what) {
  app.add_option("--max-new-tokens", flags.max_new_tokens, what)
      ->type_name("N")
      ->transform(integer_in(0, 1 << 24));
  app.add_flag("--ignore-eos", flags.ignore_eos, "keep generating past end-of-sequence ids");
}

inline void add_sampling_flags(CLI::App& app, SamplerOptions& sampling) {
  app.add_option("--temperature", sampling.temperature, "0 is greedy")
      ->type_name("T")
      ->check(number_in(0, 1e6));
  app.add_option("--top-k", sampling.top_k, "keep the K most likely tokens; 0 is off")
      ->type_name("K")
      ->transform(integer_in(0, INT32_MAX));
  app.add_option("--top-p", sampling.top_p, "keep the smallest set with probability P; 1 is off")
      ->type_name("P")
      ->check(number_in(0, 1, RangeEnds::open_min));
  app.add_option("--min-p", sampling.min_p,
                 "drop tokens below P times the top probability; 0 is off")
      ->type_name("P")
      ->check(number_in(0, 1, RangeEnds::open_max));
  app.add_option("--seed", sampling.seed, "sampling seed")
      ->type_name("S")
      ->transform(integer_in(0, INT64_MAX));
  app.add_option("--repeat-penalty", sampling.repeat_penalty, "HF/Candle repeat penalty; 1 is off")
      ->type_name("P")
      ->check(number_in(1e-6, 1e6));
  app.add_option("--repeat-last-n", sampling.repeat_last_n, "tokens the penalty looks back over")
      ->type_name("N")
      ->transform(integer_in(0, INT32_MAX));
}

// Fails unless a KV cache of `context` positions fits the model and the memory available;
// `flag` names the option that chose it.
inline void check_context(const Model& model, int64_t context, const std::string& flag) {
  const ModelConfig& config = model.config();
  int64_t cache_bytes =
      KvCacheSet::prealloc_bytes(config.num_hidden_layers, model.kv_cache_shape(context));
  int64_t available = available_memory_bytes();
  if (available > 0 && cache_bytes > available) {
    fail(flag, " ", context, " needs a KV cache of ", cache_bytes, " bytes, more than the ",
         available, " bytes of memory available");
  }
  if (context > config.max_position_embeddings) {
    fail("a context of ", context, " exceeds the model's max_position_embeddings of ",
         config.max_position_embeddings);
  }
}

// `text` as ids, led as Hugging Face's encode leads them by default: with the post-processor's
// leading token (Gemma's <bos>) unless the text (a chat template's output) already begins with it.
inline std::vector<uint32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<uint32_t> ids = tokenizer.encode(text);
  std::optional<uint32_t> prefix = tokenizer.prefix_token_id();
  if (prefix && (ids.empty() || ids.front() != *prefix)) ids.insert(ids.begin(), *prefix);
  return ids;
}

}  // namespace fornace::tools
