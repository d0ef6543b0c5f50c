// The `tokenize` command: JSON strings in, JSON arrays of ids out, one per line (or the reverse
// with --decode), so that other programs can check the tokenizer.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/args.h"
#include "fornace/commands.h"
#include "text/tokenizer.h"

namespace fornace::tools {

namespace {

const char kUsage[] =
    "usage: fornace tokenize --model DIR [--decode] [--no-special] [--skip-special]\n"
    "  reads one JSON string per line on stdin and writes one JSON array of ids per line;\n"
    "  --decode reads JSON arrays of ids and writes JSON strings.\n"
    "  --no-special: special tokens in the text are encoded as plain text.\n"
    "  --skip-special: --decode leaves special tokens out.";

nlohmann::json parse_line(const std::string& line, size_t line_number) {
  nlohmann::json value = nlohmann::json::parse(line, nullptr, false);
  if (value.is_discarded()) fail("stdin line ", line_number, ": not valid JSON");
  return value;
}

void encode_line(const Tokenizer& tokenizer, const std::string& line, size_t line_number,
                 bool parse_special) {
  nlohmann::json value = parse_line(line, line_number);
  if (!value.is_string()) fail("stdin line ", line_number, ": expected a JSON string");
  try {
    std::cout << nlohmann::json(tokenizer.encode(value.get<std::string>(), parse_special)).dump()
              << "\n";
  } catch (const Error& error) {
    fail("stdin line ", line_number, ": ", error.what());
  }
}

void decode_line(const Tokenizer& tokenizer, const std::string& line, size_t line_number,
                 bool skip_special) {
  nlohmann::json value = parse_line(line, line_number);
  if (!value.is_array()) fail("stdin line ", line_number, ": expected a JSON array of ids");
  std::vector<uint32_t> ids;
  for (const nlohmann::json& id : value) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() > UINT32_MAX) {
      fail("stdin line ", line_number, ": ids must be non-negative integers, got ", id.dump());
    }
    ids.push_back(id.get<uint32_t>());
  }
  try {
    std::cout << nlohmann::json(tokenizer.decode(ids, skip_special)).dump() << "\n";
  } catch (const Error& error) {
    fail("stdin line ", line_number, ": ", error.what());
  }
}

}  // namespace

int tokenize_command(int argc, char** argv) {
  return run_command([&]() -> int {
    Args args(argc, argv);
    if (args.take_flag("--help")) {
      std::cout << kUsage << "\n";
      return 0;
    }
    std::optional<std::string> model = args.take("--model");
    bool decode = args.take_flag("--decode");
    bool no_special = args.take_flag("--no-special");
    bool skip_special = args.take_flag("--skip-special");
    args.finish();
    if (!model || model->empty())
      throw UsageError("--model DIR is required (see fornace tokenize --help)");
    if (decode && no_special) throw UsageError("--no-special applies to encoding, not --decode");
    if (!decode && skip_special) throw UsageError("--skip-special applies to --decode only");
    Tokenizer tokenizer = Tokenizer::load(*model);
    std::string line;
    for (size_t line_number = 1; std::getline(std::cin, line); ++line_number) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (decode) {
        decode_line(tokenizer, line, line_number, skip_special);
      } else {
        encode_line(tokenizer, line, line_number, !no_special);
      }
    }
    std::cout.flush();
    return 0;
  });
}

}  // namespace fornace::tools
