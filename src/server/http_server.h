// The OpenAI-compatible HTTP server of `fornace serve` over a Scheduler: routes, API key,
// body limit, streaming, metrics and a clean shutdown.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/scheduler.h"
#include "server/metrics.h"
#include "server/request.h"

namespace httplib {
struct Response;
}

namespace fornace::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: a free port.
  std::string api_key;  // Empty: no key asked (GET /health never asks).
  // Empty: no CORS headers. Else every response allows this origin ("*": any), and OPTIONS
  // preflights are answered, so that a page in a browser can call the API.
  std::string cors_origin;
  size_t max_body_bytes = 1 << 20;  // Larger bodies get 413.
  bool chat_page = true;            // GET / answers the chat page (no key asked); false: 404.
  int64_t worker_threads = 0;       // 0: slots + queue limit + 8.
  std::chrono::milliseconds poll_interval{100};         // How often a stream checks for new text.
  std::chrono::milliseconds keep_alive_interval{1000};  // A waiting stream's keep-alive comment.
};

class HttpServer {
 public:
  // `scheduler` runs the completions; `model` says what the parser needs of the served model.
  // Both must outlive the server.
  HttpServer(Scheduler& scheduler, ServedModel model, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port (the chosen one for port 0). Throws Error
  // naming the address when it cannot bind.
  int bind();
  // Serves until shutdown(); returns when the workers have finished.
  void run();
  // From any thread: refuses new completions (503), stops accepting connections and ends the
  // running completions (their streams end with a last chunk and [DONE]).
  void shutdown();

  const Metrics& metrics() const { return metrics_; }

 private:
  struct Impl;
  // POST /v1/chat/completions and /v1/completions; throws ApiError.
  void complete(Endpoint endpoint, const std::string& body, httplib::Response& response);

  Scheduler& scheduler_;
  ServedModel model_;
  ServerOptions options_;
  Metrics metrics_;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<Impl> impl_;
};

}  // namespace fornace::server
