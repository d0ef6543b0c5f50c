// Command-line flag parsing and the error-to-exit-code convention shared by the tools.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace fornace::tools {

// A malformed command line: printed as "error: ..." with exit code 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

// Reads flags of the forms `--name value`, `--name=value` and `--name` (booleans). Each take_*
// removes what it reads; finish() rejects whatever is left.
class Args {
 public:
  Args(int argc, char** argv, int first = 1) {
    for (int i = first; i < argc; ++i) tokens_.emplace_back(argv[i]);
  }

  bool empty() const { return tokens_.empty(); }

  bool take_flag(const std::string& name) {
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (tokens_[i] == name) {
        tokens_.erase(tokens_.begin() + i);
        return true;
      }
      if (tokens_[i].rfind(name + "=", 0) == 0) {
        throw UsageError(name + " takes no value");
      }
    }
    return false;
  }

  std::optional<std::string> take(const std::string& name) {
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (tokens_[i] == name) {
        if (i + 1 >= tokens_.size()) throw UsageError(name + " needs a value");
        std::string value = tokens_[i + 1];
        tokens_.erase(tokens_.begin() + i, tokens_.begin() + i + 2);
        return value;
      }
      if (tokens_[i].rfind(name + "=", 0) == 0) {
        std::string value = tokens_[i].substr(name.size() + 1);
        tokens_.erase(tokens_.begin() + i);
        return value;
      }
    }
    return std::nullopt;
  }

  std::string take_string(const std::string& name, const std::string& fallback) {
    return take(name).value_or(fallback);
  }

  int64_t take_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) {
    std::optional<std::string> text = take(name);
    if (!text) return fallback;
    return parse_int(name, *text, min, max);
  }

  double take_double(const std::string& name, double fallback, double min, double max) {
    std::optional<std::string> text = take(name);
    if (!text) return fallback;
    char* end = nullptr;
    errno = 0;
    double value = std::strtod(text->c_str(), &end);
    if (text->empty() || *end != '\0' || errno != 0 || !(value >= min && value <= max)) {
      throw UsageError(concat(name, " expects a number in [", min, ", ", max, "], got '", *text,
                              "'"));
    }
    return value;
  }

  static int64_t parse_int(const std::string& name, const std::string& text, int64_t min,
                           int64_t max) {
    char* end = nullptr;
    errno = 0;
    long long value = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0 || value < min || value > max) {
      throw UsageError(concat(name, " expects an integer in [", min, ", ", max, "], got '", text,
                              "'"));
    }
    return value;
  }

  // Rejects any flag or argument that no take_* consumed.
  void finish() const {
    if (!tokens_.empty()) throw UsageError("unknown argument '" + tokens_.front() + "'");
  }

 private:
  std::vector<std::string> tokens_;
};

// Runs a command body and maps exceptions to the tools' convention: "error: <message>" on one
// line of stderr, exit 2 for usage errors and 1 for everything else.
template <typename Body>
int run_command(Body&& body) {
  try {
    return body();
  } catch (const UsageError& error) {
    std::cerr << "error: " << error.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "error: " << error.what() << "\n";
    return 1;
  }
}

}  // namespace fornace::tools
