// `fornace chat --model M`: a conversation with the model's chat template whose history stays in
// the KV cache (each turn prefills only its new tokens), in a terminal or as JSON lines.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/generation_flags.h"
#include "common/start_up.h"
#include "common/stream_out.h"
#include "engine/generator.h"
#include "fornace/commands.h"
#include "io/files.h"
#include "models/model.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace fornace::tools {
namespace {

constexpr const char* kUsage = "usage: fornace chat --model DIR|FILE.gguf [options]";

constexpr const char* kCommandsHelp =
    "/reset          forget the conversation (the system prompt stays)\n"
    "/system TEXT    set the system prompt and start over (/system alone removes it)\n"
    "/save FILE      write the conversation as JSON (system, messages with role and content)\n"
    "/load FILE      replace the conversation with one that /save wrote\n"
    "/help           this list\n"
    "/quit           leave (as Ctrl-D does)\n"
    "//TEXT          send a message that starts with /TEXT\n"
    "Ctrl-C stops an answer (what came so far stays in the conversation); at the prompt it "
    "leaves.\n";

// Set by SIGINT; an answer being generated stops, a prompt being read ends the program.
std::atomic<bool> interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_interrupt(int) { interrupted.store(true); }

// What a turn that would overflow the context does.
enum class OnFull { error, drop_oldest };

struct ChatFlags {
  ModelFlags model;
  LengthFlags length;
  SamplerOptions sampling;
  int64_t context = 0;
  std::string on_full = "error";
  std::optional<std::string> system;
  bool json = false;
};

// The system prompt and the turns, user and assistant alternating from a user message.
struct Conversation {
  std::optional<std::string> system;
  std::vector<ChatMessage> turns;

  std::vector<ChatMessage> messages() const {
    std::vector<ChatMessage> all;
    if (system) all.push_back({"system", *system});
    all.insert(all.end(), turns.begin(), turns.end());
    return all;
  }
};

nlohmann::json conversation_to_json(const Conversation& conversation) {
  nlohmann::json messages = nlohmann::json::array();
  for (const ChatMessage& message : conversation.turns) {
    messages.push_back({{"role", message.role}, {"content", message.content}});
  }
  return {{"system", conversation.system ? nlohmann::json(*conversation.system) : nullptr},
          {"messages", messages}};
}

// A conversation as conversation_to_json writes it (a leading "system" message stands for the
// system prompt); throws Error naming what is wrong.
Conversation conversation_from_json(const std::string& text) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    fail("not JSON: ", error.what());
  }
  if (!root.is_object()) fail("expects a JSON object with \"messages\"");
  Conversation conversation;
  if (root.contains("system") && !root["system"].is_null()) {
    if (!root["system"].is_string()) fail("\"system\" is not a string");
    conversation.system = root["system"].get<std::string>();
  }
  if (!root.contains("messages") || !root["messages"].is_array()) {
    fail("expects \"messages\", an array");
  }
  for (const nlohmann::json& message : root["messages"]) {
    const size_t index = conversation.turns.size();
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string() ||
        !message.contains("content") || !message["content"].is_string()) {
      fail("message ", index, " is not an object with a string \"role\" and \"content\"");
    }
    std::string role = message["role"];
    std::string content = message["content"];
    if (role == "system" && index == 0 && !conversation.system) {
      conversation.system = content;
      continue;
    }
    const char* expected = index % 2 == 0 ? "user" : "assistant";
    if (role != expected) {
      fail("message ", index, " has the role \"", role, "\" where \"", expected,
           "\" belongs (user and assistant alternate, from a user message)");
    }
    conversation.turns.push_back({role, content});
  }
  if (conversation.turns.size() % 2 != 0) fail("the last message is not the assistant's answer");
  return conversation;
}

// One line of stdin at a time, read with read(2) so that Ctrl-C (EINTR) ends the wait.
class LineReader {
 public:
  enum class Status { line, end, interrupted };

  Status next(std::string& line) {
    while (true) {
      if (size_t newline = buffer_.find('\n'); newline != std::string::npos) {
        line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return Status::line;
      }
      if (interrupted.load()) return Status::interrupted;
      char chunk[4096];
      ssize_t count = ::read(STDIN_FILENO, chunk, sizeof(chunk));
      if (count > 0) {
        buffer_.append(chunk, static_cast<size_t>(count));
      } else if (count < 0 && errno == EINTR) {
        continue;
      } else if (buffer_.empty()) {
        return Status::end;
      } else {
        line.swap(buffer_);
        buffer_.clear();
        return Status::line;
      }
    }
  }

 private:
  std::string buffer_;
};

// How the conversation shows: a terminal (prompt and colours where a stream is one), plain lines
// when stdin is not a terminal, or JSON lines (--json).
struct Display {
  bool json = false;
  bool interactive = false;  // stdin is a terminal and not --json: a prompt before each line.
  bool colour_out = false;
  bool colour_err = false;

  // A dim line on stderr (notices, the stats of each answer).
  void notice(const std::string& text) const {
    std::fprintf(stderr, "%s%s%s\n", colour_err ? "\x1b[2m" : "", text.c_str(),
                 colour_err ? "\x1b[0m" : "");
  }
  void error(const std::string& text) const {
    std::fprintf(stderr, "%serror:%s %s\n", colour_err ? "\x1b[31m" : "",
                 colour_err ? "\x1b[0m" : "", text.c_str());
  }
  void prompt() const {
    if (interactive) write_out(colour_out ? "\x1b[1;32m> \x1b[0m" : "> ");
  }
};

class ChatSession {
 public:
  ChatSession(const ChatFlags& flags, Model& model, const Tokenizer& tokenizer,
              const Display& display)
      : flags_(flags),
        tokenizer_(tokenizer),
        display_(display),
        on_full_(flags.on_full == "error" ? OnFull::error : OnFull::drop_oldest),
        generator_(model, parse_kv_cache_kind(flags.model.kv_cache), flags.context,
                   flags.sampling) {
    conversation_.system = flags.system;
    options_.max_new_tokens = flags.length.max_new_tokens;
    options_.ignore_eos = flags.length.ignore_eos;
    options_.eos_ids = end_of_sequence_ids(model.config(), &tokenizer);
    // Chat templates end a turn with the tokenizer's eos token, which config.json may not list.
    if (std::optional<uint32_t> eos = tokenizer.eos_token_id();
        eos && std::find(options_.eos_ids.begin(), options_.eos_ids.end(), *eos) ==
                   options_.eos_ids.end()) {
      options_.eos_ids.push_back(*eos);
    }
    options_.prefill_chunk = flags.model.prefill_chunk;
    options_.reuse_cache = true;
    options_.should_stop = [] { return interrupted.load(); };
  }

  // Handles one line of input; false when the conversation should end (/quit).
  bool handle(const std::string& line) {
    if (line.empty()) return true;
    if (line[0] == '/' && line.rfind("//", 0) != 0) return command(line);
    answer(line[0] == '/' ? line.substr(1) : line);
    return true;
  }

 private:
  bool command(const std::string& line) {
    size_t space = line.find(' ');
    std::string name = line.substr(0, space);
    std::string argument = space == std::string::npos ? "" : line.substr(space + 1);
    if (name == "/quit") return false;
    if (name == "/help") {
      std::fputs(kCommandsHelp, stderr);
    } else if (name == "/reset") {
      conversation_.turns.clear();
      display_.notice("the conversation is reset");
    } else if (name == "/system") {
      if (!valid_utf8(argument, "the system prompt")) return true;
      conversation_.turns.clear();
      conversation_.system = argument.empty() ? std::nullopt : std::optional<std::string>(argument);
      display_.notice(argument.empty() ? "no system prompt; the conversation is reset"
                                       : "system prompt set; the conversation is reset");
    } else if (name == "/save" || name == "/load") {
      if (argument.empty()) {
        display_.error(name + " needs a file name");
      } else {
        try {
          name == "/save" ? save(argument) : load(argument);
        } catch (const Error& error) {
          display_.error(error.what());
        }
      }
    } else {
      display_.error("unknown command " + name + " (/help lists the commands)");
    }
    return true;
  }

  void save(const std::string& path) {
    write_file_atomically(path,
                          [&](std::ostream& out) { out << conversation_to_json(conversation_); });
    display_.notice(concat("saved ", conversation_.turns.size(), " messages to ", path));
  }

  void load(const std::string& path) {
    std::string text = read_file(path);
    try {
      conversation_ = conversation_from_json(text);
    } catch (const Error& error) {
      fail(path, ": ", error.what());
    }
    display_.notice(concat("loaded ", conversation_.turns.size(), " messages from ", path));
  }

  bool valid_utf8(const std::string& text, const std::string& what) {
    size_t offset = text::first_invalid_utf8(text);
    if (offset == std::string::npos) return true;
    turn_error(concat(what, " is not valid UTF-8 at byte offset ", offset));
    return false;
  }

  // An error of a user turn: a line on stderr and, with --json, an object on stdout, so that each
  // user line gets one object.
  void turn_error(const std::string& message) {
    display_.error(message);
    if (display_.json) write_out(nlohmann::json{{"error", message}}.dump() + "\n");
  }

  // The conversation's ids with a generation prompt.
  std::vector<uint32_t> render(const Conversation& conversation) const {
    return encode_prompt(tokenizer_, tokenizer_.apply_chat_template(conversation.messages(), true));
  }

  void answer(const std::string& text) {
    const auto start = std::chrono::steady_clock::now();
    if (!valid_utf8(text, "the message")) return;
    Conversation next = conversation_;
    next.turns.push_back({"user", text});
    const int64_t context = flags_.context;
    const int64_t new_tokens = flags_.length.max_new_tokens;
    std::vector<uint32_t> prompt = render(next);
    int64_t dropped = 0;
    while (static_cast<int64_t>(prompt.size()) + new_tokens > context) {
      if (on_full_ == OnFull::error || next.turns.size() < 3) {
        turn_error(concat("the conversation (", prompt.size(), " tokens) and ", new_tokens,
                          " new tokens exceed the context of ", context,
                          on_full_ == OnFull::error ? " (/reset starts over; --on-full drop-oldest)"
                                                    : " even with no earlier turns"));
        return;
      }
      next.turns.erase(next.turns.begin(), next.turns.begin() + 2);
      ++dropped;
      prompt = render(next);
    }
    if (dropped > 0 && !display_.json) {
      display_.notice(concat("dropped the oldest ", dropped, " turn", dropped == 1 ? "" : "s",
                             " to fit the context"));
    }

    IncrementalDecoder decoder(tokenizer_, true);
    std::string content;
    double first_token_ms = 0;
    auto on_token = [&](uint32_t id) {
      if (first_token_ms == 0) first_token_ms = ms_since(start);
      std::string piece = decoder.push(id);
      content += piece;
      if (!display_.json) write_out(piece);
    };
    interrupted.store(false);
    GenerationResult result = generator_.generate(prompt, options_, on_token);
    const bool stopped = interrupted.exchange(false) &&
                         static_cast<int64_t>(result.generated.size()) < new_tokens &&
                         !result.stopped_at_eos;
    std::string rest = decoder.flush();
    content += rest;
    next.turns.push_back({"assistant", content});
    conversation_ = std::move(next);

    const int64_t reused = result.reused_tokens;
    const int64_t prefilled = static_cast<int64_t>(prompt.size()) - reused;
    const int64_t tokens = static_cast<int64_t>(result.generated.size());
    const char* finish = stopped ? "stopped" : result.stopped_at_eos ? "eos" : "length";
    if (display_.json) {
      nlohmann::ordered_json line = {
          {"role", "assistant"},       {"content", content},
          {"tokens", tokens},          {"prompt_tokens", prompt.size()},
          {"reused_tokens", reused},   {"prefilled_tokens", prefilled},
          {"ttft_ms", first_token_ms}, {"tokens_per_second", result.decode_tokens_per_second()},
          {"finish_reason", finish},   {"dropped_turns", dropped}};
      write_out(line.dump() + "\n");
      return;
    }
    write_out(rest + "\n");
    char stats[192];
    std::snprintf(stats, sizeof(stats),
                  "%lld tokens, %.1f tok/s, first token %.0f ms, prompt %lld prefilled + %lld "
                  "reused%s",
                  static_cast<long long>(tokens), result.decode_tokens_per_second(), first_token_ms,
                  static_cast<long long>(prefilled), static_cast<long long>(reused),
                  stopped ? " (stopped)" : "");
    display_.notice(stats);
  }

  const ChatFlags& flags_;
  const Tokenizer& tokenizer_;
  const Display& display_;
  OnFull on_full_;
  Generator generator_;
  GenerationOptions options_;
  Conversation conversation_;
};

void add_chat_flags(CommandLine& app, ChatFlags& flags) {
  add_model_flags(app, flags.model);
  flags.length.max_new_tokens = 512;
  add_length_flags(app, flags.length, "the most tokens an answer has");
  add_sampling_flags(app, flags.sampling);
  app.add_option("--context", flags.context,
                 "positions the KV cache holds: the conversation's "
                 "tokens and an answer's --max-new-tokens")
      ->type_name("N")
      ->transform(integer_in(1, INT64_MAX / 4))
      ->default_str("4096 or the model's max_position_embeddings if fewer");
  app.add_option("--on-full", flags.on_full,
                 "a turn that would not fit the context: error (an error line; the "
                 "conversation stays as it was) | drop-oldest (drop the oldest user and "
                 "assistant turns, keeping the system prompt, until it fits)")
      ->type_name("WHAT")
      ->check(CLI::IsMember({"error", "drop-oldest"}));
  app.add_option("--system", flags.system, "the system prompt")
      ->type_name("TEXT")
      ->default_str("none");
  app.add_flag("--json", flags.json,
               "read user lines from stdin and write one JSON object per answer (role, content, "
               "tokens, prompt_tokens, reused_tokens, prefilled_tokens, ttft_ms, "
               "tokens_per_second, finish_reason, dropped_turns), or {\"error\": ...} when a "
               "turn fails");
}

int chat(ChatFlags& flags, const EngineSettings& settings) {
  set_num_threads(static_cast<int>(flags.model.threads));
  require_model_path(flags.model.model_path);
  if (flags.system && text::first_invalid_utf8(*flags.system) != std::string::npos) {
    throw UsageError("--system is not valid UTF-8");
  }
  std::shared_ptr<const ModelFiles> files = open_model_files(flags.model.model_path, settings);
  std::unique_ptr<Model> model = load_model(files, model_options(flags.model, settings));
  Tokenizer tokenizer = Tokenizer::load(*files);
  // A model with no chat template fails here rather than at the first message.
  tokenizer.apply_chat_template({{"user", "Hi"}}, true);
  const ModelConfig& config = model->config();
  if (flags.context == 0) flags.context = std::min<int64_t>(4096, config.max_position_embeddings);
  check_context(*model, flags.context, "--context");
  if (flags.length.max_new_tokens >= flags.context) {
    throw UsageError(concat("--max-new-tokens ", flags.length.max_new_tokens,
                            " leaves no room for a message in the context of ", flags.context));
  }

  Display display;
  display.json = flags.json;
  display.interactive = !flags.json && ::isatty(STDIN_FILENO);
  display.colour_out = display.interactive && ::isatty(STDOUT_FILENO);
  display.colour_err = !flags.json && ::isatty(STDERR_FILENO);

  struct sigaction action = {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // No SA_RESTART: a read at the prompt returns EINTR.
  sigaction(SIGINT, &action, nullptr);

  ChatSession session(flags, *model, tokenizer, display);
  if (display.interactive) {
    display.notice(concat("fornace chat: ", flags.model.model_path, ", context ", flags.context,
                          ". /help lists the commands; Ctrl-C stops an answer; Ctrl-D leaves."));
  }
  LineReader reader;
  std::string line;
  try {
    while (true) {
      interrupted.store(false);
      display.prompt();
      LineReader::Status status = reader.next(line);
      if (status != LineReader::Status::line) {
        if (display.interactive) write_out("\n");
        break;
      }
      if (!session.handle(line)) break;
    }
  } catch (const OutputClosed&) {
  }
  return 0;
}

}  // namespace

int chat_command(int argc, char** argv, const EngineSettings& settings) {
  std::signal(SIGPIPE, SIG_IGN);
  CommandLine app("fornace chat", kUsage,
                  "A conversation with the model through its chat template. The history stays in "
                  "the KV cache, so each turn runs only its new tokens through the model. In a "
                  "terminal: a prompt, the answer streamed, and a line of statistics on stderr "
                  "after each answer (tokens, tokens/s, time to first token, prompt tokens "
                  "prefilled and reused). With stdin not a terminal, each line is a message and "
                  "the answers are plain lines; with --json, one JSON object per answer. Type "
                  "/help for the commands (/reset, /system, /save, /load, /quit).");
  ChatFlags flags;
  add_chat_flags(app, flags);
  return app.parse_and_run(argc, argv, [&] { return chat(flags, settings); });
}

}  // namespace fornace::tools
