// The `tokenize` command: JSON strings in, JSON arrays of ids out, one per line (or the reverse
// with --decode), so that other programs can check the tokenizer.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/start_up.h"
#include "fornace/commands.h"
#include "text/tokenizer.h"

namespace fornace::tools {

namespace {

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

int tokenize_command(int argc, char** argv, const EngineSettings& settings) {
  CommandLine app("fornace tokenize", "usage: fornace tokenize --model DIR|FILE.gguf [options]",
                  "Reads one JSON string per line on stdin and writes one JSON array of ids per "
                  "line; with --decode, reads JSON arrays of ids and writes JSON strings.");
  std::string model;
  bool decode = false;
  bool no_special = false;
  bool skip_special = false;
  app.add_option("--model", model, "directory of tokenizer.json, or a GGUF file")
      ->type_name("PATH")
      ->required();
  app.add_flag("--decode", decode, "ids in, text out");
  app.add_flag("--no-special", no_special, "special tokens in the text are encoded as plain text");
  app.add_flag("--skip-special", skip_special, "--decode leaves special tokens out");
  return app.parse_and_run(argc, argv, [&] {
    if (model.empty()) throw UsageError("--model is empty");
    if (decode && no_special) throw UsageError("--no-special applies to encoding, not --decode");
    if (!decode && skip_special) throw UsageError("--skip-special applies to --decode only");
    Tokenizer tokenizer = Tokenizer::load(*open_model_files(model, settings));
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
