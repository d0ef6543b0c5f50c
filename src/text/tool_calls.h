// Tool calls in a model's output: which form a family's chat template asks for, and a parser that
// splits the text, as it streams, into content and calls (a name and the arguments' JSON text),
// giving the pieces in the order OpenAI streams them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fornace::text {

enum class ToolCallFormat {
  none,    // The chat template renders no tools.
  tagged,  // Qwen's: text, then <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>, repeated.
  json,    // Llama 3's: the whole answer is {"name": N, "parameters": {...}}.
};

// The form that `chat_template` (its source) tells the model to use.
ToolCallFormat tool_call_format(std::string_view chat_template);

// A piece of one call: the first piece of a call carries its id and name.
struct ToolCallDelta {
  int64_t index = 0;
  std::string id;
  std::string name;
  std::string arguments;  // The next piece of the arguments' JSON text.
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as the model wrote it.
};

class ToolCallParser {
 public:
  // Calls get the ids `id_prefix` + their index.
  ToolCallParser(ToolCallFormat format, std::string id_prefix);

  struct Output {
    std::string content;
    std::vector<ToolCallDelta> calls;
  };
  // The content and call pieces that `text` completes; text that may still turn out to open a
  // call is held back.
  Output push(std::string_view text);
  // The end of the text: what was held back, as content or as the last call's arguments.
  Output finish();

  const std::vector<ToolCall>& calls() const { return calls_; }
  const std::string& content() const { return content_; }

 private:
  enum class State { text, header, arguments, after_call, done };
  void run(Output& output, bool at_end);
  bool parse_header(Output& output, bool at_end);
  void scan_arguments(Output& output);
  void start_call(Output& output, std::string name);
  void emit_content(Output& output, std::string_view text);

  ToolCallFormat format_;
  std::string id_prefix_;
  State state_ = State::text;
  std::string pending_;  // Text not yet given out.
  std::vector<ToolCall> calls_;
  std::string content_;
  // The arguments' JSON value as it is scanned: nesting depth, inside a string, after a '\'.
  bool value_started_ = false;
  int64_t depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

}  // namespace fornace::text
