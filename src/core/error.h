// fornace::Error, the one exception type, and helpers that build its messages.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace fornace {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates the arguments with operator<< into one message.
template <typename... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream stream;
  (stream << ... << std::forward<Parts>(parts));
  return stream.str();
}

template <typename... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  throw Error(concat(std::forward<Parts>(parts)...));
}

}  // namespace fornace
