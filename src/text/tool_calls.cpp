// The tool-call parser: a state machine over the streamed text (content, a call's header, its
// arguments' JSON value, the text after it) that holds back only what may still open a call.
#include "text/tool_calls.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace fornace::text {
namespace {

constexpr std::string_view kOpenTag = "<tool_call>";
constexpr std::string_view kNewlineOpenTag = "\n<tool_call>";
constexpr std::string_view kCloseTag = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_length(std::string_view text, std::string_view tag) {
  for (size_t length = std::min(text.size(), tag.size() - 1); length > 0; --length) {
    if (text.substr(text.size() - length) == tag.substr(0, length)) return length;
  }
  return 0;
}

// Reads `{"name": "N", "<arguments_key>":` from the front of a text that may still be growing.
class HeaderReader {
 public:
  enum class Result { matched, need_more, mismatch };

  HeaderReader(std::string_view text, std::string_view arguments_key)
      : text_(text), arguments_key_(arguments_key) {}

  Result read() {
    for (Result result : {literal("{"), literal("\"name\""), literal(":")}) {
      if (result != Result::matched) return result;
    }
    if (Result result = name(); result != Result::matched) return result;
    for (Result result : {literal(","), literal(arguments_key_), literal(":")}) {
      if (result != Result::matched) return result;
    }
    skip_space();
    return at_ < text_.size() ? Result::matched : Result::need_more;
  }
  size_t consumed() const { return at_; }
  const std::string& parsed_name() const { return name_; }

 private:
  void skip_space() {
    while (at_ < text_.size() && is_space(text_[at_])) ++at_;
  }
  // `expected` after optional spaces.
  Result literal(std::string_view expected) {
    skip_space();
    std::string_view rest = text_.substr(at_);
    if (rest.size() < expected.size()) {
      return expected.substr(0, rest.size()) == rest ? Result::need_more : Result::mismatch;
    }
    if (rest.substr(0, expected.size()) != expected) return Result::mismatch;
    at_ += expected.size();
    return Result::matched;
  }
  // A JSON string, decoded.
  Result name() {
    skip_space();
    if (at_ >= text_.size()) return Result::need_more;
    if (text_[at_] != '"') return Result::mismatch;
    size_t end = at_ + 1;
    while (end < text_.size() && text_[end] != '"') end += text_[end] == '\\' ? 2 : 1;
    if (end >= text_.size()) return Result::need_more;
    try {
      name_ = nlohmann::json::parse(text_.substr(at_, end + 1 - at_)).get<std::string>();
    } catch (const nlohmann::json::exception&) {
      return Result::mismatch;
    }
    at_ = end + 1;
    return Result::matched;
  }

  std::string_view text_;
  std::string_view arguments_key_;
  size_t at_ = 0;
  std::string name_;
};

}  // namespace

ToolCallFormat tool_call_format(std::string_view chat_template) {
  if (chat_template.find(kOpenTag) != std::string_view::npos) return ToolCallFormat::tagged;
  if (chat_template.find("tools") != std::string_view::npos &&
      chat_template.find("\"parameters\"") != std::string_view::npos) {
    return ToolCallFormat::json;
  }
  return ToolCallFormat::none;
}

ToolCallParser::ToolCallParser(ToolCallFormat format, std::string id_prefix)
    : format_(format), id_prefix_(std::move(id_prefix)) {}

ToolCallParser::Output ToolCallParser::push(std::string_view text) {
  Output output;
  pending_.append(text);
  run(output, false);
  return output;
}

ToolCallParser::Output ToolCallParser::finish() {
  Output output;
  run(output, true);
  if (state_ == State::text || state_ == State::header) emit_content(output, pending_);
  pending_.clear();
  state_ = State::done;
  return output;
}

void ToolCallParser::emit_content(Output& output, std::string_view text) {
  output.content.append(text);
  content_.append(text);
}

void ToolCallParser::start_call(Output& output, std::string name) {
  const int64_t index = static_cast<int64_t>(calls_.size());
  calls_.push_back(ToolCall{id_prefix_ + std::to_string(index), name, ""});
  output.calls.push_back(ToolCallDelta{index, calls_.back().id, std::move(name), ""});
  value_started_ = false;
  depth_ = 0;
  in_string_ = false;
  escaped_ = false;
}

void ToolCallParser::run(Output& output, bool at_end) {
  while (true) {
    switch (state_) {
      case State::text: {
        if (format_ == ToolCallFormat::none) {
          emit_content(output, pending_);
          pending_.clear();
          return;
        }
        if (format_ == ToolCallFormat::json) {
          // A call is the whole answer: it opens with '{' after any spaces.
          size_t first = pending_.find_first_not_of(" \n\r\t");
          if (first == std::string::npos) return;
          if (pending_[first] != '{' || !calls_.empty() || !content_.empty()) {
            state_ = State::done;
            continue;
          }
          pending_.erase(0, first);
          state_ = State::header;
          continue;
        }
        const size_t open = pending_.find(kOpenTag);
        if (open == std::string::npos) {
          // Held: what may still become the tag, with the newline before it.
          const size_t held =
              at_end ? 0
                     : std::max(partial_tag_length(pending_, kOpenTag),
                                partial_tag_length(pending_, kNewlineOpenTag));
          emit_content(output, std::string_view(pending_).substr(0, pending_.size() - held));
          pending_.erase(0, pending_.size() - held);
          return;
        }
        // The newline before the tag separates it from the content; it is not content.
        size_t content_end = open;
        if (content_end > 0 && pending_[content_end - 1] == '\n') --content_end;
        emit_content(output, std::string_view(pending_).substr(0, content_end));
        pending_.erase(0, open + kOpenTag.size());
        state_ = State::header;
        continue;
      }
      case State::header:
        if (!parse_header(output, at_end)) return;
        continue;
      case State::arguments:
        scan_arguments(output);
        if (state_ == State::arguments) return;
        continue;
      case State::after_call: {
        if (format_ == ToolCallFormat::json) {
          pending_.clear();
          return;
        }
        const size_t close = pending_.find(kCloseTag);
        if (close == std::string::npos) {
          // What stands between the arguments and the closing tag ("}\n") is not content.
          pending_.erase(0, pending_.size() - partial_tag_length(pending_, kCloseTag));
          return;
        }
        pending_.erase(0, close + kCloseTag.size());
        state_ = State::text;
        continue;
      }
      case State::done:
        emit_content(output, pending_);
        pending_.clear();
        return;
    }
  }
}

bool ToolCallParser::parse_header(Output& output, bool at_end) {
  HeaderReader reader(pending_, format_ == ToolCallFormat::json ? "\"parameters\"" : "\"arguments\"");
  switch (reader.read()) {
    case HeaderReader::Result::matched:
      start_call(output, reader.parsed_name());
      pending_.erase(0, reader.consumed());
      state_ = State::arguments;
      return true;
    case HeaderReader::Result::need_more:
      if (!at_end) return false;
      [[fallthrough]];
    case HeaderReader::Result::mismatch:
      // Not a call after all: the text stays content, the tag included.
      if (format_ == ToolCallFormat::tagged) pending_.insert(0, kOpenTag);
      state_ = State::done;
      return true;
  }
  return false;
}

void ToolCallParser::scan_arguments(Output& output) {
  size_t at = 0;
  bool complete = false;
  for (; at < pending_.size() && !complete; ++at) {
    const char c = pending_[at];
    if (!value_started_) {
      if (is_space(c)) continue;
      value_started_ = true;
    }
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        complete = depth_ == 0;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      if (depth_ == 0) {  // A bare value ended by its object's brace: not part of it.
        complete = true;
        break;
      }
      complete = --depth_ == 0;
    } else if (depth_ == 0 && (c == ',' || is_space(c))) {
      complete = true;  // A bare number, true, false or null ends here.
      break;
    }
  }
  size_t begin = 0;
  if (calls_.back().arguments.empty()) {
    while (begin < at && is_space(pending_[begin])) ++begin;
  }
  std::string piece = pending_.substr(begin, at - begin);
  if (!piece.empty()) {
    calls_.back().arguments += piece;
    if (!output.calls.empty() && output.calls.back().index == static_cast<int64_t>(calls_.size()) - 1) {
      output.calls.back().arguments += piece;
    } else {
      output.calls.push_back(
          ToolCallDelta{static_cast<int64_t>(calls_.size()) - 1, "", "", std::move(piece)});
    }
  }
  pending_.erase(0, at);
  if (complete) state_ = State::after_call;
}

}  // namespace fornace::text
