// Command lines on CLI11 with the tools' conventions: `--name value` or `--name=value`, a help page
// with every flag's default, and errors as one `error:` line (exit 2 for usage, 1 otherwise).
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "common/usage_error.h"
#include "core/block_type.h"
#include "core/dtype.h"
#include "cpu/thread_pool.h"
#include "nn/candle_path.h"
#include "nn/kv_cache.h"

namespace fornace::tools {

// `text` with spaces turned into line breaks where a line would run past `width` characters.
inline std::string wrap_words(std::string text, size_t width) {
  size_t line_start = 0;
  size_t last_space = std::string::npos;
  for (size_t at = 0; at < text.size(); ++at) {
    if (text[at] == '\n') {
      line_start = at + 1;
      last_space = std::string::npos;
      continue;
    }
    if (text[at] == ' ') last_space = at;
    if (at - line_start >= width && last_space != std::string::npos && last_space > line_start) {
      text[last_space] = '\n';
      line_start = last_space + 1;
      last_space = std::string::npos;
    }
  }
  return text;
}

// The help page: the usage lines, the description, then each flag with its value's name, its
// description and its default (or "(required)").
class HelpFormatter : public CLI::Formatter {
 public:
  static constexpr size_t kPageWidth = 100;

  explicit HelpFormatter(std::string usage) : usage_(std::move(usage)) { column_width(27); }

  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode mode) const override {
    std::string page = usage_ + "\n";
    if (!app->get_description().empty()) {
      page += "\n" + wrap_words(app->get_description(), kPageWidth) + "\n";
    }
    page += make_positionals(app) + make_groups(app, mode);
    if (!app->get_footer().empty()) page += "\n" + wrap_words(app->get_footer(), kPageWidth) + "\n";
    return page;
  }

  std::string make_option_opts(const CLI::Option* option) const override {
    return option->get_type_size() == 0 ? "" : " " + option->get_type_name();
  }

  std::string make_option_desc(const CLI::Option* option) const override {
    std::string text = option->get_description();
    if (option->get_required()) {
      text += " (required)";
    } else if (option->get_type_size() != 0 && !option->get_default_str().empty()) {
      text += " (default: " + option->get_default_str() + ")";
    }
    return wrap_words(text, kPageWidth - get_column_width());
  }

 private:
  std::string usage_;
};

// One command's flags. Bound variables hold the defaults, which the help page shows; a flag
// whose default is not a value says it with default_str(). parse_and_run() applies the
// conventions: `--help` prints the page to stdout with exit code 0; a malformed command line or
// a UsageError is one line "error: <message> (see <name> --help)" with exit code 2; any other
// exception is "error: <message>" with exit code 1.
class CommandLine : public CLI::App {
 public:
  // `name` as typed (e.g. "fornace synth"); `usage` the first lines of the help page.
  CommandLine(const std::string& name, const std::string& usage, const std::string& description)
      : CLI::App(description, name) {
    formatter(std::make_shared<HelpFormatter>(usage));
    set_help_flag("-h,--help", "this text");
    option_defaults()->always_capture_default()->disable_flag_override();
  }

  template <typename Body>
  int parse_and_run(int argc, char** argv, Body&& body) {
    try {
      try {
        parse(argc, argv);
      } catch (const CLI::CallForHelp&) {
        std::cout << help() << std::flush;
        return 0;
      } catch (const CLI::ExtrasError&) {
        throw UsageError("unknown argument '" + remaining().front() + "'");
      } catch (const CLI::ArgumentMismatch& error) {
        throw UsageError(value_count_message(error.what()));
      } catch (const CLI::ParseError& error) {
        throw UsageError(error.what());
      }
      return body();
    } catch (const UsageError& error) {
      print_error(std::string(error.what()) + " (see " + get_name() + " --help)");
      return 2;
    } catch (const std::bad_alloc&) {
      print_error("out of memory");
      return 1;
    } catch (const std::exception& error) {
      print_error(error.what());
      return 1;
    }
  }

 private:
  // CLI11's messages on the number of values a flag got, in the tools' words.
  static std::string value_count_message(const std::string& message) {
    auto ends_with = [&](const std::string& tail) {
      return message.size() >= tail.size() &&
             message.compare(message.size() - tail.size(), tail.size(), tail) == 0;
    };
    std::string name = message.substr(0, message.find_first_of(": "));
    if (ends_with(" missing")) return name + " needs a value";
    if (ends_with("disallowed flag override")) return "--" + name + " takes no value";
    if (message.find(": At Most 1 required") != std::string::npos) {
      return name + " is given more than once";
    }
    return message;
  }

  static void print_error(std::string message) {
    for (char& character : message) {
      if (character == '\n') character = ' ';
    }
    std::cerr << "error: " << message << "\n";
  }
};

// Accepts a base-10 integer in [min, max] and rewrites it as one (CLI11 alone reads "010" as
// octal); otherwise "expects an integer in [min, max], got '<text>'".
inline CLI::Validator integer_in(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        long long value = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno != 0 || value < min || value > max) {
          return concat("expects an integer in [", min, ", ", max, "], got '", text, "'");
        }
        text = std::to_string(value);
        return "";
      },
      "");
}

// Whether a number range includes its ends: [min, max], (min, max], [min, max).
enum class RangeEnds { closed, open_min, open_max };

// Accepts a decimal number between min and max; otherwise "expects a number in (min, max], got
// '<text>'", with brackets as `ends` says.
inline CLI::Validator number_in(double min, double max, RangeEnds ends = RangeEnds::closed) {
  return CLI::Validator(
      [min, max, ends](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        double value = std::strtod(text.c_str(), &end);
        bool above_min = ends == RangeEnds::open_min ? value > min : value >= min;
        bool below_max = ends == RangeEnds::open_max ? value < max : value <= max;
        if (text.empty() || *end != '\0' || errno != 0 || !(above_min && below_max)) {
          char bounds[96];
          std::snprintf(bounds, sizeof(bounds), "%s%.15g, %.15g%s",
                        ends == RangeEnds::open_min ? "(" : "[", min, max,
                        ends == RangeEnds::open_max ? ")" : "]");
          return concat("expects a number in ", bounds, ", got '", text, "'");
        }
        return "";
      },
      "");
}

// Accepts what `parse` accepts; the message of the fornace::Error it throws is the flag's error.
template <typename Parse>
CLI::Validator parsed_by(Parse parse) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          parse(text);
        } catch (const Error& error) {
          return error.what();
        }
        return "";
      },
      "");
}

// Flags that fornace and fornace-bench share.

inline CLI::Option* add_threads_flag(CLI::App& app, int64_t& threads) {
  threads = available_cores();
  return app.add_option("--threads", threads, "worker threads")
      ->type_name("N")
      ->transform(integer_in(1, 1024))
      ->default_str("available cores");
}

// Accepts bf16, f32 or f16.
inline CLI::Validator float_dtype() {
  return parsed_by([](const std::string& text) {
    bool known = false;
    try {
      known = is_float(parse_dtype(text));
    } catch (const Error&) {
    }
    if (!known) fail("expects bf16, f32 or f16, got '", text, "'");
  });
}

// fused (Fornace's kernel) or candle (Candle's op sequence).
inline CLI::Option* add_attention_flag(CLI::App& app, std::string& attention) {
  attention = "fused";
  return app.add_option("--attention", attention,
                        "fused | candle: Fornace's attention kernel, or Candle's op sequence "
                        "(repeat_kv, contiguous, matmul, softmax, matmul)")
      ->type_name("PATH")
      ->check(parsed_by(parse_attention_path));
}

// Empty `dtype` keeps the checkpoint's.
inline CLI::Option* add_dtype_flag(CLI::App& app, std::string& dtype) {
  return app.add_option("--dtype", dtype, "weights as bf16 | f32 | f16, converted at load")
      ->type_name("DTYPE")
      ->check(float_dtype())
      ->default_str("as stored");
}

// Empty `cache_type` keeps the model's (ModelOptions::set_kv_cache_type).
inline CLI::Option* add_cache_type_flag(CLI::App& app, std::string& cache_type) {
  return app
      .add_option("--cache-type", cache_type,
                  "K and V stored as f32 | f16 | bf16 | q8_0 | q4_0 (GGUF blocks of 32 along "
                  "head_dim, read in place by the attention kernel; prealloc only)")
      ->type_name("TYPE")
      ->check(parsed_by(parse_kv_cache_type))
      ->default_str("the weights' float dtype, bf16 for quantized weights");
}

inline CLI::Option* add_activations_flag(CLI::App& app, std::string& activations) {
  activations = activation_rounding_name(ActivationRounding::int8);
  return app.add_option("--activations", activations,
                        "with quantized weights: int8 | int8x2 | f32: activations rounded to "
                        "8-bit blocks for integer dot products (as llama.cpp), their residual "
                        "too (about 1/250 of int8's error), or kept f32")
      ->type_name("ROUNDING")
      ->check(parsed_by(parse_activation_rounding));
}

}  // namespace fornace::tools
