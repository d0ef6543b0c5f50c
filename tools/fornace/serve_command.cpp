// `fornace serve --model PATH`: the OpenAI-compatible HTTP server over continuous batching.
#include <pthread.h>

#include <csignal>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include "common/cli.h"
#include "common/memory_info.h"
#include "common/start_up.h"
#include "cpu/thread_pool.h"
#include "engine/scheduler.h"
#include "fornace/commands.h"
#include "models/model.h"
#include "nn/sequences.h"
#include "server/http_server.h"
#include "text/tokenizer.h"

namespace fornace::tools {
namespace {

struct ServeFlags {
  std::string model_path;
  std::string model_alias;
  std::string host = "127.0.0.1";
  int64_t port = 8080;
  int64_t parallel = 4;
  int64_t context = 0;
  int64_t queue = 64;
  int64_t max_body = 1 << 20;
  std::string api_key;
  std::string cors_origin;
  bool no_cache_prompt = false;
  bool no_ui = false;
  std::string dtype;
  std::string cache_type;
  std::string activations;
  int64_t threads = 0;
};

// The context a slot holds by default: 4096 positions, or fewer when the model has fewer.
constexpr int64_t kDefaultContext = 4096;

// The name clients give as `model`: the alias, or the last part of the path.
std::string served_model_id(const ServeFlags& flags) {
  if (!flags.model_alias.empty()) return flags.model_alias;
  std::filesystem::path path(flags.model_path);
  if (path.filename().empty()) path = path.parent_path();
  return path.filename().string();
}

int serve(const ServeFlags& flags, const sigset_t& stop_signals, const EngineSettings& settings) {
  if (flags.model_path.empty()) throw UsageError("--model is empty");
  if (flags.host.empty()) throw UsageError("--host is empty");
  require_model_path(flags.model_path);
  set_num_threads(static_cast<int>(flags.threads));
  ModelOptions model_options;
  if (!flags.dtype.empty()) model_options.dtype = parse_dtype(flags.dtype);
  if (!flags.cache_type.empty()) {
    model_options.set_kv_cache_type(parse_kv_cache_type(flags.cache_type));
  }
  model_options.activation_rounding = parse_activation_rounding(flags.activations);
  model_options.packed_cache_directory = settings.packed_cache_directory;
  std::shared_ptr<const ModelFiles> files = open_model_files(flags.model_path, settings);
  std::unique_ptr<Model> model = load_model(files, model_options);
  Tokenizer tokenizer = Tokenizer::load(*files);
  const ModelConfig& config = model->config();

  int64_t context =
      flags.context ? flags.context : std::min(kDefaultContext, config.max_position_embeddings);
  if (context > config.max_position_embeddings) {
    fail("--ctx-size ", context, " exceeds the model's max_position_embeddings of ",
         config.max_position_embeddings);
  }
  int64_t cache_bytes = flags.parallel * KvCacheSet::prealloc_bytes(config.num_hidden_layers,
                                                                    model->kv_cache_shape(context));
  if (int64_t available = available_memory_bytes(); available > 0 && cache_bytes > available) {
    fail("--parallel ", flags.parallel, " slots of --ctx-size ", context, " need KV caches of ",
         cache_bytes, " bytes, more than the ", available, " bytes of memory available");
  }

  SchedulerOptions scheduler_options;
  scheduler_options.slots = flags.parallel;
  scheduler_options.context = context;
  scheduler_options.queue_limit = flags.queue;
  scheduler_options.eos_ids = end_of_sequence_ids(config, &tokenizer);
  scheduler_options.cache_prompt = !flags.no_cache_prompt;
  Scheduler scheduler(*model, tokenizer, scheduler_options);

  server::ServedModel served;
  served.id = served_model_id(flags);
  served.tokenizer = &tokenizer;
  served.context = context;
  served.vocab_size = config.vocab_size;
  for (int64_t id : scheduler_options.eos_ids) {
    if (id >= 0 && id < config.vocab_size) served.eos_ids.push_back(static_cast<uint32_t>(id));
  }
  served.token_trie =
      std::make_shared<const text::TokenTrie>(text::TokenTrie::from_tokenizer(tokenizer));
  server::ServerOptions server_options;
  server_options.host = flags.host;
  server_options.port = static_cast<int>(flags.port);
  server_options.api_key = flags.api_key;
  server_options.cors_origin = flags.cors_origin;
  server_options.max_body_bytes = static_cast<size_t>(flags.max_body);
  server_options.chat_page = !flags.no_ui;
  server::HttpServer server(scheduler, served, server_options);
  int port = server.bind();

  // SIGINT and SIGTERM, blocked in every thread, arrive here: the server stops accepting and
  // ends its streams, then run() returns.
  std::thread signal_waiter([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    server.shutdown();
  });
  std::string host =
      flags.host.find(':') != std::string::npos ? "[" + flags.host + "]" : flags.host;
  std::cerr << "listening on http://" << host << ":" << port << std::endl;
  server.run();
  // When run() ended on its own, the waiter is still waiting: wake it.
  pthread_kill(signal_waiter.native_handle(), SIGTERM);
  signal_waiter.join();
  scheduler.stop();
  std::cerr << "stopped" << std::endl;
  return 0;
}

}  // namespace

int serve_command(int argc, char** argv, const EngineSettings& settings) {
  // Blocked before any thread starts, so that every thread inherits the mask and only the
  // signal waiter takes them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  CommandLine app(
      "fornace serve", "usage: fornace serve --model PATH [options]",
      "Serves the model over HTTP with OpenAI's API (POST /v1/chat/completions and "
      "/v1/completions, streamed or not; GET /v1/models, /health and /metrics) and a chat "
      "page for a browser at /. Up to "
      "--parallel requests run at once, decoded together in one batched pass; more "
      "wait in a queue of --queue, and beyond it get 503. SIGINT or SIGTERM stops it.");
  ServeFlags flags;
  app.add_option("--model", flags.model_path, "checkpoint directory or GGUF file")
      ->type_name("PATH")
      ->required();
  app.add_option("--model-alias", flags.model_alias, "the model's name in the API")
      ->type_name("NAME")
      ->default_str("the last part of --model");
  app.add_option("--host", flags.host, "address to listen on")->type_name("HOST");
  app.add_option("--port", flags.port, "port to listen on; 0 picks a free one")
      ->type_name("N")
      ->transform(integer_in(0, 65535));
  app.add_option("--parallel", flags.parallel, "requests that run at once (slots)")
      ->type_name("N")
      ->transform(integer_in(1, Sequences::kMaxBatch));
  app.add_option("--ctx-size", flags.context, "positions each slot holds (prompt + completion)")
      ->type_name("N")
      ->transform(integer_in(2, INT32_MAX))
      ->default_str("4096, or the model's max_position_embeddings when smaller");
  app.add_option("--queue", flags.queue, "requests that may wait for a slot")
      ->type_name("N")
      ->transform(integer_in(0, 4096));
  app.add_option("--max-body", flags.max_body, "largest request body in bytes (larger: 413)")
      ->type_name("BYTES")
      ->transform(integer_in(1024, int64_t{1} << 30));
  app.add_option("--api-key", flags.api_key,
                 "ask for 'Authorization: Bearer KEY' on every route but /health")
      ->type_name("KEY")
      ->default_str("none");
  app.add_option("--cors-origin", flags.cors_origin,
                 "let pages from ORIGIN (\"*\": any) call the API from a browser: CORS headers "
                 "and answers to OPTIONS preflights")
      ->type_name("ORIGIN")
      ->default_str("none");
  app.add_flag("--no-cache-prompt", flags.no_cache_prompt,
               "prefill every prompt whole; by default a slot keeps its KV cache after a "
               "request, and a request goes to the free slot whose cached tokens share the "
               "longest prefix with its prompt and prefills only the rest (a request's "
               "\"cache_prompt\": false does the same for it alone)");
  app.add_flag("--no-ui", flags.no_ui, "no chat page at / (it then answers 404)");
  add_dtype_flag(app, flags.dtype);
  add_cache_type_flag(app, flags.cache_type);
  add_activations_flag(app, flags.activations);
  add_threads_flag(app, flags.threads);
  return app.parse_and_run(argc, argv, [&] { return serve(flags, stop_signals, settings); });
}

}  // namespace fornace::tools
