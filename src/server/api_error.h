// OpenAI-style API errors: an HTTP status with the `error` object that OpenAI's clients read.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace fornace::server {

class ApiError : public std::runtime_error {
 public:
  // `param` names the request field at fault (e.g. "messages[0].role"); `code` is OpenAI's
  // machine-readable code (e.g. "model_not_found"), when one fits.
  ApiError(int status, std::string message, std::string type = "invalid_request_error",
           std::optional<std::string> param = std::nullopt,
           std::optional<std::string> code = std::nullopt);

  int status() const { return status_; }
  // {"error": {"message", "type", "param", "code"}}; absent param and code are null.
  nlohmann::json body() const;

 private:
  int status_;
  std::string type_;
  std::optional<std::string> param_;
  std::optional<std::string> code_;
};

// A 400 invalid_request_error about `param`.
ApiError invalid_request(std::string message, std::optional<std::string> param = std::nullopt,
                         std::optional<std::string> code = std::nullopt);

}  // namespace fornace::server
