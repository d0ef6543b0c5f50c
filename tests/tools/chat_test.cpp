// `fornace chat`: JSON lines from a pipe, and the terminal session driven through tmux's pty.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/run_fornace.h"
#include "common/source_paths.h"
#include "common/test_models.h"

namespace fornace {
namespace {

std::string scratch_file(const std::string& name) {
  return fornace::test_paths::build("chat-") + std::to_string(::getpid()) + "-" + name;
}

// The stdout lines of a run.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t end = text.find('\n'); end != std::string::npos; end = text.find('\n', start)) {
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// The lines of stderr that are errors (the others are notices and statistics).
std::vector<std::string> error_lines(const std::string& err) {
  std::vector<std::string> errors;
  for (const std::string& line : lines_of(err)) {
    if (line.rfind("error: ", 0) == 0) errors.push_back(line);
  }
  return errors;
}

class Chat : public ::testing::Test {
 protected:
  std::string model = tiny_model_directory(DType::f32);

  // Runs `fornace chat` with `input` on stdin (a file, not a terminal).
  Outcome chat(const std::string& input, const std::string& arguments) {
    std::string input_path = scratch_file("input.txt");
    std::ofstream(input_path, std::ios::binary) << input;
    Outcome outcome = run_shell_capturing(fornace_binary() + " chat --model " + model + " " +
                                          arguments + " <" + input_path + " >{out} 2>{err}");
    std::remove(input_path.c_str());
    return outcome;
  }

  // The JSON objects that a --json run wrote, one per line.
  std::vector<nlohmann::json> answers(const Outcome& outcome) {
    std::vector<nlohmann::json> objects;
    for (const std::string& line : lines_of(outcome.out))
      objects.push_back(nlohmann::json::parse(line));
    return objects;
  }

  // The ids of `text` as `fornace tokenize` encodes it.
  size_t token_count(const std::string& text) {
    std::string path = scratch_file("tokenize");
    std::ofstream(path) << nlohmann::json(text).dump() << "\n";
    Outcome outcome = run_shell_capturing(fornace_binary() + " tokenize --model " + model + " <" +
                                          path + " >{out} 2>{err}");
    std::remove(path.c_str());
    EXPECT_EQ(outcome.exit_code, 0) << outcome.err;
    return nlohmann::json::parse(outcome.out).size();
  }
};

TEST_F(Chat, LaterTurnsReuseTheHistoryAndAnswerAsAFreshPrefillWould) {
  std::string saved = scratch_file("three-turns.json");
  const std::string flags = "--json --max-new-tokens 8 --ignore-eos";
  Outcome outcome = chat(
      "Hello there\nTell me more\nWhy is that?\n/save " + saved + "\nAnd then what happened?\n",
      flags);
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  std::vector<nlohmann::json> turns = answers(outcome);
  ASSERT_EQ(turns.size(), 4u) << outcome.out;
  EXPECT_EQ(turns[0]["reused_tokens"], 0);
  for (size_t turn = 0; turn < turns.size(); ++turn) {
    const nlohmann::json& answer = turns[turn];
    EXPECT_EQ(answer["role"], "assistant");
    EXPECT_EQ(answer["tokens"], 8);
    EXPECT_EQ(answer["finish_reason"], "length");
    EXPECT_GT(answer["ttft_ms"].get<double>(), 0.0);
    EXPECT_EQ(answer["prefilled_tokens"].get<int64_t>() + answer["reused_tokens"].get<int64_t>(),
              answer["prompt_tokens"].get<int64_t>());
    if (turn == 0) continue;
    // The previous turn's prompt is the start of this one's and stays in the cache: only the
    // new message (and the previous answer's tokens that re-encode differently) runs again.
    EXPECT_GE(answer["reused_tokens"], turns[turn - 1]["prompt_tokens"]) << answer;
  }

  // The history is rendered as ChatML, the tiny model's template, written out by hand here.
  nlohmann::json conversation = nlohmann::json::parse(slurp(saved));
  ASSERT_EQ(conversation["messages"].size(), 6u);
  std::string chatml;
  for (const nlohmann::json& message : conversation["messages"]) {
    chatml += "<|im_start|>" + message["role"].get<std::string>() + "\n" +
              message["content"].get<std::string>() + "<|im_end|>\n";
  }
  chatml += "<|im_start|>user\nAnd then what happened?<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(turns[3]["prompt_tokens"], token_count(chatml));

  // A fresh process that loads the first three turns has nothing cached: it prefills the whole
  // conversation and must give turn 4 the same greedy answer.
  Outcome fresh = chat("/load " + saved + "\nAnd then what happened?\n", flags);
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  std::vector<nlohmann::json> fresh_turns = answers(fresh);
  ASSERT_EQ(fresh_turns.size(), 1u) << fresh.out;
  EXPECT_EQ(fresh_turns[0]["reused_tokens"], 0);
  EXPECT_EQ(fresh_turns[0]["prompt_tokens"], turns[3]["prompt_tokens"]);
  EXPECT_EQ(fresh_turns[0]["content"], turns[3]["content"]);
  std::remove(saved.c_str());
}

TEST_F(Chat, AFullContextIsAnErrorThatKeepsTheConversation) {
  std::string saved = scratch_file("full.json");
  Outcome outcome =
      chat("one\ntwo\nthree\n/save " + saved + "\n/reset\nfour\n",
           "--json --max-new-tokens 8 --ignore-eos --context 60 --system 'Be brief.'");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  std::vector<nlohmann::json> turns = answers(outcome);
  ASSERT_EQ(turns.size(), 4u) << outcome.out;
  EXPECT_EQ(turns[0]["content"].is_string(), true);
  EXPECT_EQ(turns[1]["content"].is_string(), true);
  ASSERT_TRUE(turns[2].contains("error")) << turns[2];
  EXPECT_NE(turns[2]["error"].get<std::string>().find("exceed the context of 60"),
            std::string::npos);
  EXPECT_EQ(error_lines(outcome.err),
            std::vector<std::string>{"error: " + turns[2]["error"].get<std::string>()});
  for (int turn : {0, 1, 3}) {
    EXPECT_LE(turns[turn]["prompt_tokens"].get<int64_t>() + 8, 60) << turns[turn];
  }
  // Turn 3 left no trace: the saved conversation holds turns 1 and 2.
  nlohmann::json conversation = nlohmann::json::parse(slurp(saved));
  EXPECT_EQ(conversation["system"], "Be brief.");
  ASSERT_EQ(conversation["messages"].size(), 4u);
  EXPECT_EQ(conversation["messages"][0]["content"], "one");
  EXPECT_EQ(conversation["messages"][1]["content"], turns[0]["content"]);
  EXPECT_EQ(conversation["messages"][2]["content"], "two");
  // After /reset the first turn's prompt again: the system prompt and one message.
  EXPECT_EQ(turns[3]["prompt_tokens"], turns[0]["prompt_tokens"]);
  std::remove(saved.c_str());
}

TEST_F(Chat, DropOldestKeepsTheSystemPromptAndTheLatestTurns) {
  std::string saved = scratch_file("dropped.json");
  std::string long_message;
  for (int word = 0; word < 80; ++word) long_message += "word ";
  Outcome outcome =
      chat("one\ntwo\nthree\nfour\nfive\n/save " + saved + "\n" + long_message + "\n",
           "--json --max-new-tokens 8 --ignore-eos --context 60 --on-full drop-oldest "
           "--system 'Be brief.'");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  std::vector<nlohmann::json> turns = answers(outcome);
  ASSERT_EQ(turns.size(), 6u) << outcome.out;
  int64_t dropped = 0;
  for (int turn = 0; turn < 5; ++turn) {
    ASSERT_TRUE(turns[turn].contains("content")) << turns[turn];
    EXPECT_LE(turns[turn]["prompt_tokens"].get<int64_t>() + 8, 60) << turns[turn];
    dropped += turns[turn]["dropped_turns"].get<int64_t>();
    // The system prompt heads every prompt, so its positions stay in the cache.
    if (turn > 0) EXPECT_GT(turns[turn]["reused_tokens"], 0) << turns[turn];
  }
  EXPECT_GT(dropped, 0);
  nlohmann::json conversation = nlohmann::json::parse(slurp(saved));
  EXPECT_EQ(conversation["system"], "Be brief.");
  const nlohmann::json& messages = conversation["messages"];
  EXPECT_EQ(static_cast<int64_t>(messages.size()), 2 * (5 - dropped));
  EXPECT_EQ(messages[messages.size() - 2]["content"], "five");
  EXPECT_EQ(messages.back()["content"], turns[4]["content"]);
  EXPECT_EQ(messages[0]["content"],
            std::vector<std::string>({"one", "two", "three", "four", "five"})[dropped]);
  // A message that cannot fit even alone is an error.
  ASSERT_TRUE(turns[5].contains("error")) << turns[5];
  EXPECT_NE(turns[5]["error"].get<std::string>().find("even with no earlier turns"),
            std::string::npos);
  std::remove(saved.c_str());
}

TEST_F(Chat, CommandsResetSetTheSystemPromptSaveAndLoad) {
  std::string first = scratch_file("first.json");
  std::string second = scratch_file("second.json");
  std::string not_json = scratch_file("not-json.json");
  std::string wrong_role = scratch_file("wrong-role.json");
  std::ofstream(not_json) << "{\"messages\": [";
  std::ofstream(wrong_role) << R"({"messages": [{"role": "assistant", "content": "Hi"}]})";
  Outcome outcome = chat("Hello\n//slash at the start\n/save " + first + "\n/load " + not_json +
                             "\n/load " + wrong_role + "\n/load " + first +
                             ".missing\n/bogus\n/save\n/save " + second + "\n/help\n",
                         "--json --max-new-tokens 4");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  EXPECT_EQ(answers(outcome).size(), 2u);
  // Every failed command left the conversation as it was.
  EXPECT_EQ(slurp(first), slurp(second));
  nlohmann::json conversation = nlohmann::json::parse(slurp(first));
  EXPECT_TRUE(conversation["system"].is_null());
  ASSERT_EQ(conversation["messages"].size(), 4u);
  EXPECT_EQ(conversation["messages"][2]["content"], "/slash at the start");
  std::vector<std::string> errors = error_lines(outcome.err);
  ASSERT_EQ(errors.size(), 5u) << outcome.err;
  EXPECT_NE(errors[0].find(not_json + ": not JSON"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("message 0 has the role \"assistant\""), std::string::npos);
  EXPECT_NE(errors[2].find(".missing"), std::string::npos) << errors[2];
  EXPECT_EQ(errors[3], "error: unknown command /bogus (/help lists the commands)");
  EXPECT_EQ(errors[4], "error: /save needs a file name");
  for (const char* command :
       {"/reset", "/system TEXT", "/save FILE", "/load FILE", "/help", "/quit"}) {
    EXPECT_NE(outcome.err.find(command), std::string::npos) << command;
  }

  // A loaded conversation continues; /system starts over with the new prompt; /reset keeps it.
  Outcome next = chat("/load " + first + "\nMore\n/save " + second + "\n/system Be terse.\n/save " +
                          first + "\nHi\n/reset\n/save " + not_json + "\n",
                      "--json --max-new-tokens 4");
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(second))["messages"].size(), 6u);
  nlohmann::json after_system = nlohmann::json::parse(slurp(first));
  EXPECT_EQ(after_system["system"], "Be terse.");
  EXPECT_TRUE(after_system["messages"].empty());
  nlohmann::json after_reset = nlohmann::json::parse(slurp(not_json));
  EXPECT_EQ(after_reset["system"], "Be terse.");
  EXPECT_TRUE(after_reset["messages"].empty());
  for (const std::string& path : {first, second, not_json, wrong_role}) std::remove(path.c_str());
}

TEST_F(Chat, PlainLinesWithoutATerminalAndQuitEndsTheInput) {
  Outcome outcome = chat("Hello\n/quit\nNever read\n", "--max-new-tokens 4 --ignore-eos");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.err;
  // One answer line, no prompt decoration, no colours; one stats line on stderr.
  EXPECT_EQ(lines_of(outcome.out).size(), 1u) << outcome.out;
  EXPECT_EQ(outcome.out.find("\x1b"), std::string::npos);
  EXPECT_EQ(outcome.out.find("> "), std::string::npos);
  EXPECT_TRUE(std::regex_search(outcome.err,
                                std::regex("^4 tokens, .* prompt \\d+ prefilled \\+ 0 reused\n$")))
      << outcome.err;
}

TEST_F(Chat, BadFlagsAndMessagesGetOneErrorLine) {
  expect_error(chat("", "--on-full drop-newest"), 2, "--on-full");
  expect_error(chat("", "--context 8 --max-new-tokens 8"), 2, "leaves no room");
  expect_error(chat("", "--context 5000"), 1, "max_position_embeddings");
  Outcome outcome = chat("caf\xc3\n", "--json --max-new-tokens 2");
  ASSERT_EQ(outcome.exit_code, 0);
  EXPECT_EQ(outcome.err, "error: the message is not valid UTF-8 at byte offset 3\n");
  EXPECT_EQ(outcome.out, "{\"error\":\"the message is not valid UTF-8 at byte offset 3\"}\n");
}

TEST_F(Chat, HelpNamesTheFlags) {
  Outcome outcome = run_fornace("chat --help");
  ASSERT_EQ(outcome.exit_code, 0);
  for (const char* flag :
       {"--model", "--context", "--on-full", "--system", "--json", "--max-new-tokens",
        "--temperature", "--top-p", "--top-k", "--seed", "--threads", "--dtype"}) {
    EXPECT_NE(outcome.out.find(std::string("  ") + flag + " "), std::string::npos) << flag;
  }
  EXPECT_NE(outcome.out.find("drop-oldest"), std::string::npos);
  EXPECT_NE(run_fornace("--help").out.find("  chat "), std::string::npos);
}

// `fornace chat` in a tmux pane of its own server: keys typed into the pty, the screen read back.
class TmuxChat {
 public:
  explicit TmuxChat(const std::string& command)
      : socket_("fornace-chat-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++)),
        exit_path_(scratch_file(socket_ + ".exit")) {
    std::remove(exit_path_.c_str());
    // The shell ignores Ctrl-C (its trap runs once the chat ends) and records the exit status.
    std::string script = "trap : INT; " + command + "; echo $? > " + exit_path_ + "; sleep 30";
    EXPECT_EQ(tmux("new-session -d -x 150 -y 50 -s chat bash -c " + quote(script)), 0);
  }
  ~TmuxChat() {
    tmux("kill-server");
    std::remove(exit_path_.c_str());
  }

  void type(const std::string& text) { tmux("send-keys -t chat -l " + quote(text)); }
  void key(const std::string& name) { tmux("send-keys -t chat " + name); }

  std::string screen() {
    std::string path = scratch_file(socket_ + ".screen");
    tmux("capture-pane -p -J -t chat -S - > " + path);
    std::string text = slurp(path);
    std::remove(path.c_str());
    return text;
  }

  // Waits (up to two minutes, a guard against a hang, not a timing) until `done` holds for the
  // screen; returns the screen.
  std::string wait_for(const std::function<bool(const std::string&)>& done) {
    std::string text;
    for (auto start = std::chrono::steady_clock::now();
         std::chrono::steady_clock::now() - start < std::chrono::minutes(2);) {
      text = screen();
      if (done(text)) return text;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the screen never showed what was awaited:\n" << text;
    return text;
  }

  // The exit status once the chat has ended, or -1 after two minutes.
  int exit_status() {
    for (auto start = std::chrono::steady_clock::now();
         std::chrono::steady_clock::now() - start < std::chrono::minutes(2);) {
      std::string text = slurp(exit_path_);
      if (!text.empty()) return std::stoi(text);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

 private:
  static std::string quote(const std::string& text) {
    std::string quoted = "'";
    for (char character : text)
      quoted += character == '\'' ? std::string("'\\''") : std::string(1, character);
    return quoted + "'";
  }
  int tmux(const std::string& arguments) {
    return std::system(("tmux -L " + socket_ + " -f /dev/null " + arguments).c_str());
  }

  static inline int counter_ = 0;
  std::string socket_;
  std::string exit_path_;
};

// The stats lines on a screen: {tokens, prefilled, reused, stopped}.
struct Stats {
  int64_t tokens, prefilled, reused;
  bool stopped;
};
std::vector<Stats> stats_lines(const std::string& screen) {
  std::vector<Stats> all;
  std::regex line(
      R"((\d+) tokens, [0-9.]+ tok/s, first token \d+ ms, prompt (\d+) prefilled \+ (\d+) reused( \(stopped\))?)");
  for (auto match = std::sregex_iterator(screen.begin(), screen.end(), line);
       match != std::sregex_iterator(); ++match) {
    all.push_back({std::stoll((*match)[1]), std::stoll((*match)[2]), std::stoll((*match)[3]),
                   (*match)[4].matched});
  }
  return all;
}

TEST_F(Chat, TerminalTurnsReuseTheHistoryAndCtrlDLeaves) {
  TmuxChat session(fornace_binary() + " chat --model " + model +
                   " --max-new-tokens 6 --ignore-eos");
  session.wait_for(
      [](const std::string& screen) { return screen.find("Ctrl-D leaves") != std::string::npos; });
  session.type("Hello there");
  session.key("Enter");
  session.wait_for([](const std::string& screen) { return stats_lines(screen).size() == 1; });
  session.type("/bogus");
  session.key("Enter");
  session.wait_for([](const std::string& screen) {
    return screen.find("error: unknown command /bogus") != std::string::npos;
  });
  session.type("Tell me more");
  session.key("Enter");
  std::string screen =
      session.wait_for([](const std::string& screen) { return stats_lines(screen).size() == 2; });
  std::vector<Stats> stats = stats_lines(screen);
  EXPECT_EQ(stats[0].reused, 0);
  EXPECT_GT(stats[1].reused, stats[0].prefilled);
  EXPECT_EQ(stats[1].tokens, 6);
  EXPECT_NE(screen.find("> Hello there\n"), std::string::npos) << screen;
  session.key("C-d");
  EXPECT_EQ(session.exit_status(), 0);
}

TEST_F(Chat, CtrlCStopsTheAnswerNotTheProgram) {
  TmuxChat session(fornace_binary() + " chat --model " + model +
                   " --max-new-tokens 2000 --ignore-eos --context 4096");
  session.wait_for(
      [](const std::string& screen) { return screen.find("Ctrl-D leaves") != std::string::npos; });
  // Sends `message`, waits for some of its answer, and stops it with Ctrl-C.
  auto ask_and_stop = [&](const std::string& message, size_t answers_before) {
    session.type(message);
    session.key("Enter");
    session.wait_for([&](const std::string& screen) {
      size_t at = screen.find("> " + message + "\n");
      return at != std::string::npos &&
             screen.find_first_not_of(" \n", at + message.size() + 3) != std::string::npos;
    });
    session.key("C-c");
    std::string screen = session.wait_for([&](const std::string& screen) {
      return stats_lines(screen).size() == answers_before + 1;
    });
    Stats stats = stats_lines(screen)[answers_before];
    EXPECT_TRUE(stats.stopped) << screen;
    EXPECT_LT(stats.tokens, 2000);
    return stats;
  };
  Stats stopped = ask_and_stop("Hello", 0);
  // Still running: the next line gets an answer, after the stopped one that stays in the history
  // (and in the cache).
  Stats next = ask_and_stop("And then?", 1);
  EXPECT_GT(next.reused, stopped.prefilled);
  // Ctrl-C at the prompt leaves.
  session.wait_for([](const std::string& screen) {
    return screen.find_last_not_of(" \n") != std::string::npos &&
           screen[screen.find_last_not_of(" \n")] == '>';
  });
  session.key("C-c");
  EXPECT_EQ(session.exit_status(), 0);
}

}  // namespace
}  // namespace fornace
