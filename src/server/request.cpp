// Parsing and validation of the completion endpoints' request bodies.
#include "server/request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "engine/grammar_constraint.h"
#include "server/api_error.h"
#include "text/json_schema.h"

namespace fornace::server {
namespace {

using nlohmann::json;

// OpenAI's words for a JSON value's type.
std::string type_name(const json& value) {
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number_integer()) return "an integer";
  if (value.is_number()) return "a number";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return "null";
}

ApiError wrong_type(const std::string& param, const std::string& expected, const json& value) {
  return invalid_request("Invalid type for '" + param + "': expected " + expected + ", but got " +
                             type_name(value) + " instead.",
                         param, "invalid_type");
}

// The member `name` of `root`, or nullptr when it is absent or null (OpenAI's "not given").
const json* field(const json& root, const char* name) {
  auto found = root.find(name);
  return found == root.end() || found->is_null() ? nullptr : &*found;
}

std::string format_number(double value) {
  json number = value;
  return number.dump();
}

// A number in [min, max] (or (min, max] with `open_min`).
std::optional<double> number_field(const json& root, const char* name, double min, double max,
                                   bool open_min = false) {
  const json* value = field(root, name);
  if (!value) return std::nullopt;
  if (!value->is_number()) throw wrong_type(name, "a number", *value);
  double number = value->get<double>();
  bool above = open_min ? number > min : number >= min;
  if (!std::isfinite(number) || !above || number > max) {
    throw invalid_request(std::string("Invalid '") + name + "': expected a number in " +
                              (open_min ? "(" : "[") + format_number(min) + ", " +
                              format_number(max) + "], but got " + value->dump() + " instead.",
                          name, "invalid_value");
  }
  return number;
}

// An integer of at least `min`; values above INT64_MAX read as INT64_MAX.
std::optional<int64_t> integer_field(const json& root, const char* name, int64_t min) {
  const json* value = field(root, name);
  if (!value) return std::nullopt;
  if (!value->is_number_integer()) throw wrong_type(name, "an integer", *value);
  int64_t number =
      value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
          ? INT64_MAX
          : value->get<int64_t>();
  if (number < min) {
    throw invalid_request(std::string("Invalid '") + name + "': expected an integer >= " +
                              std::to_string(min) + ", but got " + value->dump() + " instead.",
                          name, "invalid_value");
  }
  return number;
}

std::optional<bool> boolean_field(const json& root, const char* name) {
  const json* value = field(root, name);
  if (!value) return std::nullopt;
  if (!value->is_boolean()) throw wrong_type(name, "a boolean", *value);
  return value->get<bool>();
}

ApiError missing(const std::string& param) {
  return invalid_request("Missing required parameter: '" + param + "'.", param,
                         "missing_required_parameter");
}

// The characters of a function's or a schema's name.
constexpr const char* kNameCharacters =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";

ApiError unsupported(const std::string& param, const std::string& what) {
  return invalid_request(what + " is not supported by this server.", param,
                         "unsupported_parameter");
}

// The most likely tokens each token's logprobs list, or -1 for no logprobs: chat's `logprobs`
// (a boolean) with `top_logprobs` (0 to 20), or the completions' `logprobs` (0 to 5).
int64_t parse_logprobs(Endpoint endpoint, const json& root) {
  auto at_most = [](const char* name, int64_t value, int64_t max) {
    if (value > max) {
      throw invalid_request(std::string("Invalid '") + name + "': expected an integer <= " +
                                std::to_string(max) + ", but got " + std::to_string(value) +
                                " instead.",
                            name, "invalid_value");
    }
    return value;
  };
  if (endpoint == Endpoint::completions) {
    std::optional<int64_t> top = integer_field(root, "logprobs", 0);
    return top ? at_most("logprobs", *top, 5) : -1;
  }
  const bool wanted = boolean_field(root, "logprobs").value_or(false);
  std::optional<int64_t> top = integer_field(root, "top_logprobs", 0);
  if (top && !wanted) {
    throw invalid_request("Invalid 'top_logprobs': it needs 'logprobs' set to true.",
                          "top_logprobs", "invalid_value");
  }
  return wanted ? at_most("top_logprobs", top.value_or(0), 20) : -1;
}

// `stop`: a string or an array of up to 4 strings.
std::vector<std::string> parse_stop(const json& root) {
  const json* value = field(root, "stop");
  if (!value) return {};
  if (value->is_string()) return {value->get<std::string>()};
  if (!value->is_array()) throw wrong_type("stop", "a string or an array of strings", *value);
  if (value->size() > 4) {
    throw invalid_request("Invalid 'stop': expected an array of at most 4 strings, but got " +
                              std::to_string(value->size()) + ".",
                          "stop", "invalid_value");
  }
  std::vector<std::string> stops;
  for (size_t index = 0; index < value->size(); ++index) {
    const json& item = (*value)[index];
    if (!item.is_string())
      throw wrong_type("stop[" + std::to_string(index) + "]", "a string", item);
    stops.push_back(item.get<std::string>());
  }
  return stops;
}

// The text of a message's `content`: a string, or an array of {"type": "text", "text": ...}.
std::string message_content(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw wrong_type(param, "a string or an array of content parts", content);
  std::string text;
  for (size_t index = 0; index < content.size(); ++index) {
    const json& part = content[index];
    std::string part_param = param + "[" + std::to_string(index) + "]";
    if (!part.is_object()) throw wrong_type(part_param, "an object", part);
    const json* type = field(part, "type");
    if (!type || !type->is_string()) {
      throw invalid_request("Missing or invalid '" + part_param + ".type'.", part_param + ".type",
                            "invalid_value");
    }
    if (*type != "text") {
      throw unsupported(part_param + ".type", "Content of type '" + type->get<std::string>() + "'");
    }
    const json* part_text = field(part, "text");
    if (!part_text || !part_text->is_string()) {
      throw wrong_type(part_param + ".text", "a string", part_text ? *part_text : json());
    }
    text += part_text->get<std::string>();
  }
  return text;
}

// A message's `tool_calls`: an array of {"id"?, "type": "function", "function": {"name",
// "arguments"}}, arguments a JSON string or an object.
void check_tool_calls(const json& calls, const std::string& param) {
  if (!calls.is_array()) throw wrong_type(param, "an array", calls);
  for (size_t index = 0; index < calls.size(); ++index) {
    const std::string call_param = param + "[" + std::to_string(index) + "]";
    if (!calls[index].is_object()) throw wrong_type(call_param, "an object", calls[index]);
    const json* function = field(calls[index], "function");
    if (!function) throw missing(call_param + ".function");
    if (!function->is_object()) throw wrong_type(call_param + ".function", "an object", *function);
    const json* name = field(*function, "name");
    if (!name) throw missing(call_param + ".function.name");
    if (!name->is_string()) throw wrong_type(call_param + ".function.name", "a string", *name);
    const json* arguments = field(*function, "arguments");
    if (arguments && !arguments->is_string() && !arguments->is_object()) {
      throw wrong_type(call_param + ".function.arguments", "a string or an object", *arguments);
    }
  }
}

// The messages, checked, as the chat template takes them (member order kept): roles system
// (or developer), user, assistant and tool; contents as strings; an assistant's tool_calls (its
// content may then be null); a tool's tool_call_id. `uses_tools` is set when a message has tool
// calls or a tool's result.
nlohmann::ordered_json parse_messages(const json& root, const nlohmann::ordered_json& ordered,
                                      bool& uses_tools) {
  const json* messages = field(root, "messages");
  if (!messages) throw missing("messages");
  if (!messages->is_array()) throw wrong_type("messages", "an array", *messages);
  if (messages->empty()) {
    throw invalid_request(
        "Invalid 'messages': empty array. Expected an array with minimum length "
        "1, but got an empty array instead.",
        "messages", "empty_array");
  }
  nlohmann::ordered_json parsed = nlohmann::ordered_json::array();
  for (size_t index = 0; index < messages->size(); ++index) {
    const json& message = (*messages)[index];
    std::string param = "messages[" + std::to_string(index) + "]";
    if (!message.is_object()) throw wrong_type(param, "an object", message);
    const json* role = field(message, "role");
    if (!role) throw missing(param + ".role");
    if (!role->is_string()) throw wrong_type(param + ".role", "a string", *role);
    std::string role_name = role->get<std::string>();
    // OpenAI's "developer" messages are the newer name of system messages.
    if (role_name == "developer") role_name = "system";
    if (role_name != "system" && role_name != "user" && role_name != "assistant" &&
        role_name != "tool") {
      throw invalid_request("Invalid value: '" + role->get<std::string>() +
                                "'. Supported values "
                                "are: 'system', 'developer', 'user', 'assistant' and 'tool'.",
                            param + ".role", "invalid_value");
    }
    nlohmann::ordered_json turn = {{"role", role_name}};
    const json* calls = field(message, "tool_calls");
    if (calls && role_name != "assistant") {
      throw invalid_request("Invalid '" + param + ".tool_calls': only assistant messages have tool calls.",
                            param + ".tool_calls", "invalid_value");
    }
    const json* content = field(message, "content");
    if (content) {
      turn["content"] = message_content(*content, param + ".content");
    } else if (calls) {
      turn["content"] = nullptr;
    } else {
      throw missing(param + ".content");
    }
    if (calls) {
      check_tool_calls(*calls, param + ".tool_calls");
      turn["tool_calls"] = ordered["messages"][index]["tool_calls"];
      uses_tools = true;
    }
    if (role_name == "tool") {
      uses_tools = true;
      for (const char* key : {"tool_call_id", "name"}) {
        if (const json* value = field(message, key)) {
          if (!value->is_string()) throw wrong_type(param + "." + key, "a string", *value);
          turn[key] = value->get<std::string>();
        }
      }
    }
    parsed.push_back(std::move(turn));
  }
  return parsed;
}

// What a request's `tools` and `tool_choice` ask of the completion.
struct ToolUse {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // For the chat template.
  text::ToolCallFormat format = text::ToolCallFormat::none;        // Calls parsed from the answer.
  // "required" or a named function: the answer is a call (of that function), by grammar.
  std::shared_ptr<const text::Grammar> grammar;
};

// `tools` (OpenAI function definitions) and `tool_choice` ("none", "auto", "required" or
// {"type": "function", "function": {"name": N}}).
ToolUse parse_tools(const json& root, const nlohmann::ordered_json& ordered,
                    const ServedModel& model) {
  ToolUse use;
  const json* tools = field(root, "tools");
  if (tools && !tools->is_array()) throw wrong_type("tools", "an array", *tools);
  std::vector<std::string> names;
  for (size_t index = 0; tools && index < tools->size(); ++index) {
    const std::string param = "tools[" + std::to_string(index) + "]";
    const json& tool = (*tools)[index];
    if (!tool.is_object()) throw wrong_type(param, "an object", tool);
    const json* type = field(tool, "type");
    if (!type || *type != "function") {
      throw invalid_request("Invalid '" + param + ".type': expected 'function'.", param + ".type",
                            "invalid_value");
    }
    const json* function = field(tool, "function");
    if (!function) throw missing(param + ".function");
    if (!function->is_object()) throw wrong_type(param + ".function", "an object", *function);
    const json* name = field(*function, "name");
    if (!name) throw missing(param + ".function.name");
    if (!name->is_string()) throw wrong_type(param + ".function.name", "a string", *name);
    const std::string text = name->get<std::string>();
    if (text.empty() || text.size() > 64 || text.find_first_not_of(kNameCharacters) != std::string::npos) {
      throw invalid_request("Invalid '" + param + ".function.name': expected 1 to 64 letters, "
                            "digits, '_' or '-', but got '" + text + "' instead.",
                            param + ".function.name", "invalid_value");
    }
    if (const json* description = field(*function, "description"); description && !description->is_string()) {
      throw wrong_type(param + ".function.description", "a string", *description);
    }
    if (const json* parameters = field(*function, "parameters")) {
      if (!parameters->is_object()) throw wrong_type(param + ".function.parameters", "an object", *parameters);
      try {
        text::compile_json_schema(ordered["tools"][index]["function"]["parameters"]);
      } catch (const Error& error) {
        throw invalid_request("Invalid '" + param + ".function.parameters': " + error.what() + ".",
                              param + ".function.parameters", "invalid_value");
      }
    }
    names.push_back(text);
  }

  std::string choice = names.empty() ? "none" : "auto";
  std::string chosen;
  if (const json* given = field(root, "tool_choice")) {
    if (given->is_string()) {
      choice = given->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required") {
        throw invalid_request("Invalid 'tool_choice': expected 'none', 'auto', 'required' or a "
                              "function, but got '" + choice + "' instead.",
                              "tool_choice", "invalid_value");
      }
    } else if (given->is_object()) {
      const json* function = field(*given, "function");
      const json* name = function && function->is_object() ? field(*function, "name") : nullptr;
      if (!name || !name->is_string()) {
        throw invalid_request("Invalid 'tool_choice': expected {\"type\": \"function\", "
                              "\"function\": {\"name\": ...}}.",
                              "tool_choice", "invalid_value");
      }
      choice = "function";
      chosen = name->get<std::string>();
      if (std::find(names.begin(), names.end(), chosen) == names.end()) {
        throw invalid_request("Invalid 'tool_choice': no tool is named '" + chosen + "'.",
                              "tool_choice", "invalid_value");
      }
    } else {
      throw wrong_type("tool_choice", "a string or an object", *given);
    }
    if (choice != "none" && names.empty()) {
      throw invalid_request("Invalid 'tool_choice': '" + choice + "' needs 'tools'.",
                            "tool_choice", "invalid_value");
    }
  }
  if (choice == "none") return use;
  use.format = model.tokenizer->tool_call_format();
  if (use.format == text::ToolCallFormat::none) {
    throw unsupported("tools", "Tool calling with this model's chat template (it shows no tools)");
  }
  use.tools = ordered["tools"];
  if (choice == "auto") return use;
  if (!model.token_trie || model.eos_ids.empty()) {
    throw unsupported("tool_choice", "A required tool call (this model has no end-of-sequence token)");
  }
  // The call as the template asks for it, its arguments validated by the function's schema.
  std::vector<text::FramedSchema> calls;
  for (size_t index = 0; index < names.size(); ++index) {
    if (choice == "function" && names[index] != chosen) continue;
    const auto& function = ordered["tools"][index]["function"];
    nlohmann::ordered_json schema = function.contains("parameters") && !function["parameters"].is_null()
                                        ? function["parameters"]
                                        : nlohmann::ordered_json{{"type", "object"}};
    const std::string name = json(names[index]).dump();
    if (use.format == text::ToolCallFormat::tagged) {
      calls.push_back({"<tool_call>\n{\"name\": " + name + ", \"arguments\": ", schema, "}\n</tool_call>"});
    } else {
      calls.push_back({"{\"name\": " + name + ", \"parameters\": ", schema, "}"});
    }
  }
  use.grammar = std::make_shared<const text::Grammar>(text::compile_framed_schemas(calls));
  return use;
}

// Text to ids as the CLI encodes a prompt: the tokenizer's prefix token (Gemma's <bos>) first,
// unless the text already starts with it.
std::vector<uint32_t> encode_text(const Tokenizer& tokenizer, const std::string& text,
                                  const std::string& param) {
  std::vector<uint32_t> ids;
  try {
    ids = tokenizer.encode(text);
  } catch (const Error& error) {
    throw invalid_request(std::string("Invalid '") + param + "': " + error.what(), param);
  }
  std::optional<uint32_t> prefix = tokenizer.prefix_token_id();
  if (prefix && (ids.empty() || ids.front() != *prefix)) ids.insert(ids.begin(), *prefix);
  return ids;
}

std::vector<uint32_t> parse_token_ids(const json& array, const std::string& param,
                                      int64_t vocab_size) {
  std::vector<uint32_t> ids;
  for (size_t index = 0; index < array.size(); ++index) {
    const json& item = array[index];
    std::string item_param = param + "[" + std::to_string(index) + "]";
    if (!item.is_number_integer()) throw wrong_type(item_param, "a token id", item);
    bool in_vocabulary = item.is_number_unsigned()
                             ? item.get<uint64_t>() < static_cast<uint64_t>(vocab_size)
                             : item.get<int64_t>() >= 0 && item.get<int64_t>() < vocab_size;
    if (!in_vocabulary) {
      throw invalid_request("Invalid '" + item_param + "': token id " + item.dump() +
                                " is out of the vocabulary of " + std::to_string(vocab_size) + ".",
                            item_param, "invalid_value");
    }
    ids.push_back(item.get<uint32_t>());
  }
  return ids;
}

// `prompt`: a string, an array of one string, an array of token ids or an array of one array
// of token ids.
std::vector<uint32_t> parse_prompt(const json& root, const ServedModel& model) {
  const json* prompt = field(root, "prompt");
  if (!prompt)
    throw invalid_request("Missing required parameter: 'prompt'.", "prompt",
                          "missing_required_parameter");
  if (prompt->is_string())
    return encode_text(*model.tokenizer, prompt->get<std::string>(), "prompt");
  if (!prompt->is_array()) {
    throw wrong_type("prompt", "a string or an array of token ids", *prompt);
  }
  if (prompt->empty())
    throw invalid_request("Invalid 'prompt': empty array.", "prompt", "empty_array");
  const json& first = prompt->front();
  if (first.is_string() || first.is_array()) {
    if (prompt->size() != 1) {
      throw unsupported("prompt", "More than one prompt in a request");
    }
    if (first.is_string())
      return encode_text(*model.tokenizer, first.get<std::string>(), "prompt[0]");
    return parse_token_ids(first, "prompt[0]", model.vocab_size);
  }
  return parse_token_ids(*prompt, "prompt", model.vocab_size);
}

// The grammar that `response_format` asks for: none for "text" (or when absent), any object for
// "json_object", the compiled schema for "json_schema" (read again from `body` in member order,
// which the parsed root does not keep).
std::shared_ptr<const text::Grammar> parse_response_format(const json& root, std::string_view body,
                                                           const ServedModel& model) {
  const json* format = field(root, "response_format");
  if (!format) return nullptr;
  if (!format->is_object()) throw wrong_type("response_format", "an object", *format);
  const json* type = field(*format, "type");
  if (!type) throw missing("response_format.type");
  if (!type->is_string()) throw wrong_type("response_format.type", "a string", *type);
  const std::string kind = type->get<std::string>();
  if (kind == "text") return nullptr;
  if (kind != "json_object" && kind != "json_schema") {
    throw invalid_request("Invalid 'response_format.type': expected one of 'text', "
                          "'json_object' or 'json_schema', but got '" + kind + "' instead.",
                          "response_format.type", "invalid_value");
  }
  if (!model.token_trie || model.eos_ids.empty()) {
    throw unsupported("response_format", "A response_format of type '" + kind +
                                             "' (this model has no end-of-sequence token)");
  }
  if (kind == "json_object") {
    static const auto any_object =
        std::make_shared<const text::Grammar>(text::json_object_grammar());
    return any_object;
  }
  const json* schema_format = field(*format, "json_schema");
  if (!schema_format) throw missing("response_format.json_schema");
  if (!schema_format->is_object()) {
    throw wrong_type("response_format.json_schema", "an object", *schema_format);
  }
  const json* name = field(*schema_format, "name");
  if (!name) throw missing("response_format.json_schema.name");
  if (!name->is_string()) throw wrong_type("response_format.json_schema.name", "a string", *name);
  const std::string name_text = name->get<std::string>();
  if (name_text.empty() || name_text.size() > 64 ||
      name_text.find_first_not_of(kNameCharacters) != std::string::npos) {
    throw invalid_request("Invalid 'response_format.json_schema.name': expected 1 to 64 letters, "
                          "digits, '_' or '-', but got '" + name_text + "' instead.",
                          "response_format.json_schema.name", "invalid_value");
  }
  if (const json* strict = field(*schema_format, "strict"); strict && !strict->is_boolean()) {
    throw wrong_type("response_format.json_schema.strict", "a boolean", *strict);
  }
  if (const json* description = field(*schema_format, "description");
      description && !description->is_string()) {
    throw wrong_type("response_format.json_schema.description", "a string", *description);
  }
  const std::string param = "response_format.json_schema.schema";
  nlohmann::ordered_json schema = true;
  if (const json* given = field(*schema_format, "schema")) {
    if (!given->is_object()) throw wrong_type(param, "an object", *given);
    nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body);
    schema = std::move(ordered["response_format"]["json_schema"]["schema"]);
  }
  try {
    return std::make_shared<const text::Grammar>(text::compile_json_schema(schema));
  } catch (const Error& error) {
    throw invalid_request("Invalid '" + param + "': " + error.what() + ".", param,
                          "invalid_value");
  }
}

}  // namespace

SamplerOptions server_sampling_defaults() {
  SamplerOptions options;
  options.temperature = 1.0;
  options.top_p = 1.0;
  options.repeat_penalty = 1.0;
  return options;
}

ApiRequest parse_request(Endpoint endpoint, std::string_view body, const ServedModel& model) {
  json root;
  try {
    root = json::parse(body);
  } catch (const json::parse_error& error) {
    throw invalid_request(
        std::string("We could not parse the JSON body of your request: ") + error.what(),
        std::nullopt, "invalid_json");
  }
  if (!root.is_object()) {
    throw invalid_request(
        "The body of your request must be a JSON object, but got " + type_name(root) + ".",
        std::nullopt, "invalid_json");
  }
  if (const json* name = field(root, "model")) {
    if (!name->is_string()) throw wrong_type("model", "a string", *name);
    if (name->get<std::string>() != model.id) {
      throw ApiError(404,
                     "The model '" + name->get<std::string>() +
                         "' does not exist; this server "
                         "serves '" +
                         model.id + "'.",
                     "invalid_request_error", "model", "model_not_found");
    }
  }

  ApiRequest request;
  request.endpoint = endpoint;
  CompletionRequest& completion = request.completion;
  completion.sampling = server_sampling_defaults();
  SamplerOptions& sampling = completion.sampling;
  if (auto value = number_field(root, "temperature", 0, 2)) sampling.temperature = *value;
  if (auto value = number_field(root, "top_p", 0, 1, true)) sampling.top_p = *value;
  if (auto value = number_field(root, "frequency_penalty", -2, 2))
    sampling.frequency_penalty = *value;
  if (auto value = number_field(root, "presence_penalty", -2, 2))
    sampling.presence_penalty = *value;
  if (auto value = number_field(root, "repeat_penalty", 0, 1e6, true))
    sampling.repeat_penalty = *value;
  if (auto value = integer_field(root, "seed", INT64_MIN)) {
    sampling.seed = static_cast<uint64_t>(*value);
    request.seeded = true;
  }
  request.choices = integer_field(root, "n", 1).value_or(1);
  completion.stop = parse_stop(root);
  completion.ignore_eos = boolean_field(root, "ignore_eos").value_or(false);
  completion.cache_prompt = boolean_field(root, "cache_prompt").value_or(true);
  request.stream = boolean_field(root, "stream").value_or(false);
  if (const json* options = field(root, "stream_options")) {
    if (!options->is_object()) throw wrong_type("stream_options", "an object", *options);
    if (!request.stream) {
      throw invalid_request(
          "The 'stream_options' parameter is only allowed when 'stream' is "
          "enabled.",
          "stream_options", "invalid_value");
    }
    request.include_usage = boolean_field(*options, "include_usage").value_or(false);
  }
  completion.top_logprobs = parse_logprobs(endpoint, root);

  std::shared_ptr<const text::Grammar> grammar = parse_response_format(root, body, model);

  std::optional<int64_t> max_tokens;
  if (endpoint == Endpoint::chat) {
    max_tokens = integer_field(root, "max_completion_tokens", 1);
    if (!max_tokens) max_tokens = integer_field(root, "max_tokens", 1);
    // Read again in member order, which the template shows (tojson of tools and arguments).
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body);
    bool uses_tools = false;
    nlohmann::ordered_json messages = parse_messages(root, ordered, uses_tools);
    ToolUse tools = parse_tools(root, ordered, model);
    if (tools.grammar && grammar) {
      throw invalid_request("A required tool call and a response_format cannot be combined.",
                            "tool_choice", "invalid_value");
    }
    if (tools.grammar) grammar = tools.grammar;
    request.tool_calls = tools.format;
    std::string text;
    try {
      if (uses_tools || !tools.tools.empty()) {
        text = model.tokenizer->apply_chat_template_json(
            messages.dump(), tools.tools.empty() ? "" : tools.tools.dump(), true);
      } else {
        std::vector<ChatMessage> plain;
        for (const auto& turn : messages) {
          plain.push_back({turn["role"].get<std::string>(), turn["content"].get<std::string>()});
        }
        text = model.tokenizer->apply_chat_template(plain, true);
      }
    } catch (const Error& error) {
      throw invalid_request(std::string("Invalid 'messages': ") + error.what(), "messages");
    }
    completion.prompt = encode_text(*model.tokenizer, text, "messages");
  } else {
    if (boolean_field(root, "echo").value_or(false))
      throw unsupported("echo", "Echoing the prompt");
    if (auto value = integer_field(root, "best_of", 1); value && *value != 1) {
      throw unsupported("best_of", "best_of > 1");
    }
    max_tokens = integer_field(root, "max_tokens", 1);
    completion.prompt = parse_prompt(root, model);
  }

  const int64_t prompt_tokens = static_cast<int64_t>(completion.prompt.size());
  if (prompt_tokens == 0) {
    throw invalid_request("The prompt encodes to no tokens.",
                          endpoint == Endpoint::chat ? "messages" : "prompt", "invalid_value");
  }
  if (prompt_tokens >= model.context) {
    throw invalid_request(
        "This model's maximum context length is " + std::to_string(model.context) +
            " tokens, but the prompt has " + std::to_string(prompt_tokens) +
            " tokens, which leaves no room for the completion.",
        endpoint == Endpoint::chat ? "messages" : "prompt", "context_length_exceeded");
  }
  // Up to the context by default; a larger request ends with "length" when the context is full.
  completion.max_tokens =
      std::min(max_tokens.value_or(model.context), model.context - prompt_tokens);
  if (grammar) {
    sampling.constraint = std::make_shared<GrammarConstraint>(grammar, model.token_trie,
                                                              model.eos_ids, completion.max_tokens);
  }
  return request;
}

}  // namespace fornace::server
