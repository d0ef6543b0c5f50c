// Fuzzes the chat-template interpreter: the input is a template, parsed and rendered with a fixed
// conversation (tools, tool calls with object and string arguments, tool results) under small
// limits. Bad templates must give an Error; a rendering stays within the limits and is UTF-8.
#include <string_view>

#include "fuzz_support.h"
#include "text/chat_template.h"

namespace {

using fornace::text::TemplateValue;

const TemplateValue::Dict& variables() {
  static const TemplateValue::Dict globals = TemplateValue::from_json(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Weather in Paris and 2+2? <think>\n é 你好 👋"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
        {"id": "call_2", "type": "function",
         "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 2.5}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"c\": 21}"},
      {"role": "tool", "tool_call_id": "call_2", "name": "add", "content": "4.5"},
      {"role": "assistant", "content": "<think>\nsum\n</think>\n\nSunny; 4.5."},
      {"role": "user", "content": [{"type": "text", "text": "Thanks"}, {"type": "image"}]}
    ],
    "tools": [
      {"type": "function", "function": {"name": "get_weather", "description": "Weather.",
       "parameters": {"type": "object", "properties": {"city": {"type": "string"},
       "days": {"type": "integer", "minimum": 1}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
       "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}
    ],
    "documents": null, "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<s>", "eos_token": "</s>", "numbers": [3, -1, 2.5, true, 1e300]
  })")
                                                 .as_dict();
  return globals;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fornace;
  std::string_view source(reinterpret_cast<const char*>(data), size);
  text::ChatTemplateLimits limits;
  limits.max_output_bytes = size_t{1} << 20;
  limits.max_steps = 200'000;
  fuzz::expect_only_fornace_errors([&] {
    text::ChatTemplate chat_template(source);
    std::string text = chat_template.render(variables(), limits);
    fuzz::check(text.size() <= limits.max_output_bytes, "the output stays within the limit");
    fuzz::check(fuzz::is_valid_utf8(text), "a UTF-8 template renders UTF-8");
  });
  return 0;
}
