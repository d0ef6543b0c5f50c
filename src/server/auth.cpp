// The API key check: constant-time comparison of a bearer token.
#include "server/auth.h"

#include <cctype>
#include <cstdint>

namespace fornace::server {

bool constant_time_equals(std::string_view a, std::string_view b) {
  // Every byte of `a` is visited whatever `b` holds; a length difference only sets a bit.
  uint8_t difference = a.size() == b.size() ? 0 : 1;
  for (size_t at = 0; at < a.size(); ++at) {
    uint8_t other = b.empty() ? 0 : static_cast<uint8_t>(b[at % b.size()]);
    difference |= static_cast<uint8_t>(a[at]) ^ other;
  }
  // Keeps the compiler from ending the loop early on a known difference.
  volatile uint8_t result = difference;
  return result == 0;
}

bool authorized(std::string_view authorization_header, std::string_view key) {
  constexpr std::string_view scheme = "bearer ";
  if (authorization_header.size() < scheme.size()) return false;
  for (size_t at = 0; at < scheme.size(); ++at) {
    if (std::tolower(static_cast<unsigned char>(authorization_header[at])) != scheme[at]) {
      return false;
    }
  }
  std::string_view token = authorization_header.substr(scheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  // The secret is the first argument: the time follows its length, not the guess's.
  return constant_time_equals(key, token);
}

}  // namespace fornace::server
