// The OpenAI-compatible HTTP server on cpp-httplib: each request runs in one of httplib's workers,
// a streamed completion holding its worker while it polls the completion for new text.
#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/error.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/chat_page.h"
#include "server/response.h"

namespace fornace::server {

using nlohmann::json;

struct HttpServer::Impl {
  httplib::Server http;
  int64_t created = 0;  // Unix seconds at start, the served model's `created`.
  std::mutex mutex;
  std::condition_variable changed;
  bool shutdown_requested = false;
  bool listening_done = false;
  // Completion bodies still being written: shutdown waits for their last chunk before it stops
  // httplib, which would cut them off.
  std::atomic<int> open_bodies{0};
};

namespace {

void send_error(httplib::Response& response, const ApiError& error) {
  response.status = error.status();
  response.set_content(dump_json(error.body()), "application/json");
}

void send_json(httplib::Response& response, const json& value) {
  response.status = 200;
  response.set_content(dump_json(value), "application/json");
}

uint64_t random_seed() {
  static std::mutex mutex;
  static std::mt19937_64 generator{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mutex);
  return generator();
}

// The error object of a status that httplib set itself (no route, body too large, ...).
ApiError status_error(const httplib::Request& request, int status) {
  switch (status) {
    case 404:
      return ApiError(404, "Unknown request URL: " + request.method + " " + request.path + ".",
                      "invalid_request_error", std::nullopt, "unknown_url");
    case 413:
      return ApiError(413, "The request body is larger than this server accepts.",
                      "invalid_request_error", std::nullopt, "request_too_large");
    case 400:
      return ApiError(400, "The request is malformed.", "invalid_request_error");
    default:
      return ApiError(status, "HTTP status " + std::to_string(status) + ".",
                      status >= 500 ? "server_error" : "invalid_request_error");
  }
}

// A response body from the updates of its choices' completions: the events of a stream, or the
// whole chat.completion / text_completion object once every choice has ended.
class CompletionBody {
 public:
  CompletionBody(ResponseIdentity identity, const ApiRequest& request,
                 std::vector<std::shared_ptr<Completion>> completions, const Tokenizer& tokenizer)
      : endpoint_(request.endpoint),
        identity_(identity),
        logprobs_(request.completion.top_logprobs >= 0),
        tool_calls_(request.tool_calls),
        completions_(std::move(completions)),
        text_offsets_(completions_.size(), 0),
        tokenizer_(tokenizer) {
    for (size_t index = 0; index < completions_.size(); ++index) {
      tool_parsers_.push_back(new_tool_parser(index));
    }
    if (request.stream) {
      stream_.emplace(endpoint_, std::move(identity), request.include_usage,
                      completions_[0]->prompt_tokens(), static_cast<int64_t>(completions_.size()));
    }
  }

  // What opens the body before any token: a chat stream's role deltas.
  std::string open() {
    std::string out;
    if (stream_) {
      for (size_t index = 0; index < completions_.size(); ++index) {
        out += stream_->events(CompletionUpdate{}, static_cast<int64_t>(index));
      }
    }
    return out;
  }

  // Waits up to `timeout` for the choices' updates; returns what to write for them (empty when
  // there is nothing yet).
  std::string poll(std::chrono::milliseconds timeout) {
    std::string out;
    bool waited = false;
    for (size_t index = 0; index < completions_.size(); ++index) {
      if (done_.count(index)) continue;
      // The first running choice is waited for; the others give what they have.
      std::optional<CompletionUpdate> update =
          completions_[index]->next(waited ? std::chrono::milliseconds(0) : timeout);
      waited = true;
      if (!update) continue;
      if (update->finished) done_.insert(index);
      if (stream_) {
        // The text splits into content and tool-call pieces.
        text::ToolCallParser::Output parsed = tool_parsers_[index].push(update->text);
        if (update->finished) {
          text::ToolCallParser::Output rest = tool_parsers_[index].finish();
          parsed.content += rest.content;
          parsed.calls.insert(parsed.calls.end(), rest.calls.begin(), rest.calls.end());
        }
        update->text = std::move(parsed.content);
        out += stream_->events(*update, static_cast<int64_t>(index), stream_logprobs(index, *update),
                               parsed.calls);
      }
    }
    if (!stream_ && done_.size() == completions_.size() && !finished_) {
      finished_ = true;
      out = dump_json(whole());
    }
    return out;
  }
  bool finished() const { return stream_ ? stream_->finished() : finished_; }
  // Written while nothing else is: an event-stream comment, or whitespace before the JSON.
  const char* keep_alive() const { return stream_ ? kSseKeepAlive : " "; }
  const std::vector<std::shared_ptr<Completion>>& completions() const { return completions_; }

 private:
  // Choice `index`'s calls are named call_<response id>_<choice>_<call>.
  text::ToolCallParser new_tool_parser(size_t index) const {
    const std::string suffix = identity_.id.substr(identity_.id.find('-') + 1);
    return text::ToolCallParser(tool_calls_, "call_" + suffix + "_" + std::to_string(index) + "_");
  }

  json stream_logprobs(size_t index, const CompletionUpdate& update) {
    if (!logprobs_) return nullptr;
    json value = logprobs_json(endpoint_, update.logprobs, tokenizer_, text_offsets_[index]);
    for (const TokenLogprob& entry : update.logprobs) {
      text_offsets_[index] += static_cast<int64_t>(tokenizer_.token_bytes(entry.id).size());
    }
    return value;
  }

  json whole() const {
    std::vector<Choice> choices;
    Usage usage;
    usage.prompt_tokens = completions_[0]->prompt_tokens();
    for (size_t index = 0; index < completions_.size(); ++index) {
      const std::shared_ptr<Completion>& completion = completions_[index];
      text::ToolCallParser parser = new_tool_parser(index);
      std::string content = parser.push(completion->text()).content;
      content += parser.finish().content;
      Choice choice{std::move(content), completion->finish_reason(), nullptr, parser.calls()};
      if (logprobs_) choice.logprobs = logprobs_json(endpoint_, completion->logprobs(), tokenizer_);
      choices.push_back(std::move(choice));
      usage.completion_tokens += completion->completion_tokens();
      usage.cached_tokens += completion->cached_tokens();
    }
    return completion_json(endpoint_, identity_, choices, usage);
  }

  Endpoint endpoint_;
  ResponseIdentity identity_;
  bool logprobs_;
  text::ToolCallFormat tool_calls_;
  std::vector<std::shared_ptr<Completion>> completions_;
  std::vector<text::ToolCallParser> tool_parsers_;  // Of the streamed text, per choice.
  std::vector<int64_t> text_offsets_;  // Bytes of each choice's tokens streamed so far.
  std::set<size_t> done_;              // Choices whose last update has been rendered.
  const Tokenizer& tokenizer_;
  std::optional<SseStream> stream_;
  bool finished_ = false;
};

}  // namespace

HttpServer::HttpServer(Scheduler& scheduler, ServedModel model, ServerOptions options)
    : scheduler_(scheduler),
      model_(std::move(model)),
      options_(std::move(options)),
      impl_(std::make_unique<Impl>()) {
  httplib::Server& http = impl_->http;
  impl_->created = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  // A streamed completion holds a worker from submit to [DONE], and a queued one waits in it:
  // more workers than slots and queue together, so that /health and /metrics still answer.
  const SchedulerOptions& engine = scheduler_.options();
  size_t workers =
      static_cast<size_t>(options_.worker_threads > 0 ? options_.worker_threads
                                                      : engine.slots + engine.queue_limit + 8);
  http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  http.set_payload_max_length(options_.max_body_bytes);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, which lets a second server share
  // the port (and its requests) instead of failing with "address in use".
  http.set_socket_options([](int socket) {
    int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });

  http.set_logger([this](const httplib::Request& request, const httplib::Response& response) {
    metrics_.count_request(endpoint_label(request.path), response.status);
  });
  // httplib calls it for every status from 400 on: only bodiless ones get an error object.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request& request, httplib::Response& response) {
        if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        send_error(response, status_error(request, response.status));
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, std::exception_ptr exception) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(exception);
        } catch (const std::exception& error) {
          message = error.what();
        } catch (...) {
        }
        send_error(response, ApiError(500, message, "server_error"));
      });

  if (!options_.cors_origin.empty()) {
    const std::string origin = options_.cors_origin;
    http.set_post_routing_handler([origin](const httplib::Request&, httplib::Response& response) {
      response.set_header("Access-Control-Allow-Origin", origin);
      if (origin != "*") response.set_header("Vary", "Origin");
    });
    // A browser's preflight: no key asked (it carries none), nothing run.
    http.Options(R"(/.*)", [](const httplib::Request&, httplib::Response& response) {
      response.status = 204;
      response.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      response.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      response.set_header("Access-Control-Max-Age", "86400");
    });
  }

  // Runs `body` after the API key check, turning an ApiError into its response.
  auto guarded = [this](bool needs_key, auto body) {
    return [this, needs_key, body](const httplib::Request& request, httplib::Response& response) {
      try {
        if (needs_key && !options_.api_key.empty() &&
            !authorized(request.get_header_value("Authorization"), options_.api_key)) {
          throw ApiError(401,
                         "Incorrect or missing API key: give it as 'Authorization: Bearer "
                         "KEY'.",
                         "invalid_request_error", std::nullopt, "invalid_api_key");
        }
        body(request, response);
      } catch (const ApiError& error) {
        send_error(response, error);
        if (error.status() == 503) response.set_header("Retry-After", "1");
      }
    };
  };

  if (options_.chat_page) {
    // The page itself holds nothing secret; its API calls ask for the key. It loads nothing
    // from elsewhere and may talk only to this server.
    http.Get("/", [](const httplib::Request&, httplib::Response& response) {
      std::string_view page = chat_page_html();
      response.set_content(page.data(), page.size(), "text/html; charset=utf-8");
      response.set_header("Content-Security-Policy",
                          "default-src 'none'; script-src 'unsafe-inline'; "
                          "style-src 'unsafe-inline'; img-src data:; connect-src 'self'; "
                          "base-uri 'none'; frame-ancestors 'none'");
      response.set_header("X-Content-Type-Options", "nosniff");
      response.set_header("Cache-Control", "no-cache");
    });
  }
  http.Get("/health", guarded(false, [this](const httplib::Request&, httplib::Response& response) {
             if (stopping_) throw ApiError(503, "The server is shutting down.", "server_error");
             send_json(response, {{"status", "ok"}});
           }));
  http.Get("/metrics", guarded(true, [this](const httplib::Request&, httplib::Response& response) {
             response.set_content(metrics_.render(scheduler_.stats()),
                                  "text/plain; version=0.0.4; charset=utf-8");
           }));
  auto model_object = [this] {
    return json{{"id", model_.id},
                {"object", "model"},
                {"created", impl_->created},
                {"owned_by", "fornace"}};
  };
  http.Get("/v1/models",
           guarded(true, [model_object](const httplib::Request&, httplib::Response& response) {
             send_json(response, {{"object", "list"}, {"data", json::array({model_object()})}});
           }));
  http.Get(R"(/v1/models/(.+))", guarded(true, [this, model_object](const httplib::Request& request,
                                                                    httplib::Response& response) {
             if (request.matches[1] != model_.id) {
               throw ApiError(404, "The model '" + request.matches[1].str() + "' does not exist.",
                              "invalid_request_error", "model", "model_not_found");
             }
             send_json(response, model_object());
           }));
  for (Endpoint endpoint : {Endpoint::chat, Endpoint::completions}) {
    http.Post(endpoint == Endpoint::chat ? "/v1/chat/completions" : "/v1/completions",
              guarded(true, [this, endpoint](const httplib::Request& request,
                                             httplib::Response& response) {
                complete(endpoint, request.body, response);
              }));
  }
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  httplib::Server& http = impl_->http;
  errno = 0;
  int port = options_.port == 0
                 ? http.bind_to_any_port(options_.host)
                 : (http.bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0) {
    fail("cannot listen on ", options_.host, ":", options_.port,
         errno != 0 ? std::string(": ") + std::strerror(errno) : std::string());
  }
  return port;
}

void HttpServer::run() {
  // httplib's stop() does nothing before the accept loop runs: a watcher stops it, once, when
  // it runs.
  std::thread watcher([this] {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    impl_->changed.wait(lock,
                        [this] { return impl_->shutdown_requested || impl_->listening_done; });
    while (!impl_->listening_done) {
      if (impl_->http.is_running()) {
        impl_->http.stop();
        return;
      }
      impl_->changed.wait_for(lock, std::chrono::milliseconds(5));
    }
  });
  if (!stopping_) impl_->http.listen_after_bind();
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->listening_done = true;
  }
  impl_->changed.notify_all();
  watcher.join();
}

void HttpServer::shutdown() {
  if (stopping_.exchange(true)) return;
  // Running completions end now: their streams write a last chunk and [DONE] (given a few
  // poll intervals to do so) before the connections close.
  scheduler_.stop();
  const auto deadline = std::chrono::steady_clock::now() + 20 * options_.poll_interval;
  while (impl_->open_bodies > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->shutdown_requested = true;
  }
  impl_->changed.notify_all();
}

void HttpServer::complete(Endpoint endpoint, const std::string& body, httplib::Response& response) {
  if (stopping_) throw ApiError(503, "The server is shutting down.", "server_error");
  ApiRequest request = parse_request(endpoint, body, model_);
  if (request.choices > scheduler_.options().slots) {
    throw invalid_request("Invalid 'n': this server runs at most " +
                              std::to_string(scheduler_.options().slots) +
                              " choices at once (its --parallel slots), not " +
                              std::to_string(request.choices) + ".",
                          "n", "invalid_value");
  }
  const uint64_t seed = request.seeded ? request.completion.sampling.seed : random_seed();
  std::vector<std::shared_ptr<Completion>> completions;
  try {
    for (int64_t choice = 0; choice < request.choices; ++choice) {
      CompletionRequest one = request.completion;
      one.sampling.seed = seed + static_cast<uint64_t>(choice);
      completions.push_back(scheduler_.submit(std::move(one)));
    }
  } catch (const Error& error) {
    for (const auto& completion : completions) completion->cancel();
    if (dynamic_cast<const QueueFull*>(&error)) {
      throw ApiError(503, std::string("The server is busy: ") + error.what(), "server_error",
                     std::nullopt, "queue_full");
    }
    if (stopping_) throw ApiError(503, "The server is shutting down.", "server_error");
    throw invalid_request(error.what());
  }
  // The body goes out as the completions run, in chunks: their events, or (not streamed) the
  // whole JSON at the end. Either way writes happen while they wait, so that a closed connection
  // is found and the completions cancelled rather than run to their end.
  auto writer = std::make_shared<CompletionBody>(new_identity(endpoint, model_.id), request,
                                                 std::move(completions), *model_.tokenizer);
  auto last_write =
      std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  if (request.stream) response.set_header("Cache-Control", "no-cache");
  ++impl_->open_bodies;
  auto cancel_all = [writer] {
    for (const auto& completion : writer->completions()) completion->cancel();
  };
  response.set_chunked_content_provider(
      request.stream ? "text/event-stream" : "application/json",
      [this, writer, last_write, cancel_all](size_t offset, httplib::DataSink& sink) {
        std::string out = offset == 0 ? writer->open() : std::string();
        out += writer->poll(options_.poll_interval);
        auto now = std::chrono::steady_clock::now();
        if (out.empty() && now - *last_write >= options_.keep_alive_interval) {
          out = writer->keep_alive();
        }
        if (!out.empty()) {
          // A closed connection: the completions stop and free their slots at the next step.
          if (!sink.is_writable() || !sink.write(out.data(), out.size())) {
            cancel_all();
            return false;
          }
          *last_write = now;
        }
        if (writer->finished()) {
          for (const auto& completion : writer->completions()) {
            if (completion->time_to_first_token_ms() > 0) {
              metrics_.observe_time_to_first_token(completion->time_to_first_token_ms());
            }
          }
          sink.done();
        }
        return true;
      },
      [this, writer, cancel_all](bool) {
        if (!writer->finished()) cancel_all();
        --impl_->open_bodies;
      });
}

}  // namespace fornace::server
