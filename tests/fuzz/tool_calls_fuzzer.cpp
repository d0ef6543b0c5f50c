// Fuzzes the tool-call parser: model output in any form, fed whole and in pieces, parses the same
// way, every call's deltas add up to what the parser kept, and no text is lost or invented.
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "text/tool_calls.h"

namespace {

using fornace::text::ToolCall;
using fornace::text::ToolCallFormat;
using fornace::text::ToolCallParser;

struct Result {
  std::string content;
  std::vector<ToolCall> calls;
};

Result parse(ToolCallFormat format, const std::vector<std::string_view>& pieces) {
  ToolCallParser parser(format, "call_");
  Result result;
  auto take = [&](const ToolCallParser::Output& output) {
    result.content += output.content;
    for (const auto& delta : output.calls) {
      if (delta.index == static_cast<int64_t>(result.calls.size())) {
        fornace::fuzz::check(!delta.id.empty(), "a call's first delta has its id");
        result.calls.push_back(ToolCall{delta.id, delta.name, ""});
      }
      fornace::fuzz::check(delta.index + 1 == static_cast<int64_t>(result.calls.size()),
                           "deltas come call after call");
      result.calls.back().arguments += delta.arguments;
    }
  };
  for (std::string_view piece : pieces) take(parser.push(piece));
  take(parser.finish());
  fornace::fuzz::check(parser.content() == result.content, "the content deltas add up");
  fornace::fuzz::check(parser.calls().size() == result.calls.size(), "every call has deltas");
  for (size_t i = 0; i < result.calls.size(); ++i) {
    fornace::fuzz::check(parser.calls()[i].arguments == result.calls[i].arguments &&
                             parser.calls()[i].name == result.calls[i].name,
                         "the argument deltas add up");
  }
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // The first byte picks the format and where the text is cut into pieces.
  const ToolCallFormat format = data[0] % 3 == 0   ? ToolCallFormat::none
                                : data[0] % 3 == 1 ? ToolCallFormat::tagged
                                                   : ToolCallFormat::json;
  const size_t step = 1 + data[0] / 3 % 17;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string_view> pieces;
  for (size_t at = 0; at < text.size(); at += step) pieces.push_back(text.substr(at, step));
  Result whole = parse(format, {text});
  Result split = parse(format, pieces);
  fornace::fuzz::check(whole.content == split.content, "pieces give the content of the whole");
  fornace::fuzz::check(whole.calls.size() == split.calls.size(), "pieces give the same calls");
  size_t kept = whole.content.size();
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    fornace::fuzz::check(whole.calls[i].name == split.calls[i].name &&
                             whole.calls[i].arguments == split.calls[i].arguments,
                         "pieces give the same calls");
    kept += whole.calls[i].arguments.size();
  }
  fornace::fuzz::check(kept <= text.size(), "nothing is invented");
  if (format == ToolCallFormat::none) fornace::fuzz::check(whole.content == text, "no format: text");
  return 0;
}
