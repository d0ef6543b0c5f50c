// OpenAI-style API errors.
#include "server/api_error.h"

namespace fornace::server {

ApiError::ApiError(int status, std::string message, std::string type,
                   std::optional<std::string> param, std::optional<std::string> code)
    : std::runtime_error(std::move(message)),
      status_(status),
      type_(std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {}

nlohmann::json ApiError::body() const {
  nlohmann::json error = {
      {"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (param_) error["param"] = *param_;
  if (code_) error["code"] = *code_;
  return {{"error", error}};
}

ApiError invalid_request(std::string message, std::optional<std::string> param,
                         std::optional<std::string> code) {
  return ApiError(400, std::move(message), "invalid_request_error", std::move(param),
                  std::move(code));
}

}  // namespace fornace::server
