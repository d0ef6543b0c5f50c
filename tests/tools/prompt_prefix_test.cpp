// fornace puts the tokenizer's leading special token (Gemma's <bos>) before a plain prompt, as
// Hugging Face's encode does by default, and not a second time before a chat template's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/run_fornace.h"
#include "common/test_models.h"

namespace fornace {
namespace {

int64_t prompt_tokens(const std::string& model, const std::string& flags) {
  Outcome outcome =
      run_fornace("--model " + model + " " + flags + " --max-new-tokens 1 --json --quiet");
  EXPECT_EQ(outcome.exit_code, 0) << outcome.err;
  return nlohmann::json::parse(outcome.out.substr(outcome.out.rfind('{')))["prompt_tokens"];
}

int64_t encoded_length(const std::string& model, const std::string& text) {
  Outcome outcome = run_shell_capturing("printf '%s\\n' '\"" + text + "\"' | " + fornace_binary() +
                                        " tokenize --model " + model + " >{out} 2>{err}");
  EXPECT_EQ(outcome.exit_code, 0) << outcome.err;
  return static_cast<int64_t>(nlohmann::json::parse(outcome.out).size());
}

TEST(PromptPrefix, GemmaGetsBosBeforeAPlainPromptAndOnlyOnceWithChat) {
  std::string gemma = synthetic_model_directory("tiny-gemma3", DType::f32);
  EXPECT_EQ(prompt_tokens(gemma, "--prompt 'Alice was beginning'"),
            encoded_length(gemma, "Alice was beginning") + 1);
  // The template writes <bos> itself: its encoding starts with it, and nothing is added.
  Outcome chat = run_fornace("--model " + gemma +
                             " --prompt Hi --chat --max-new-tokens 1 --json --quiet");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  std::string rendered = "<bos><start_of_turn>user\\nHi<end_of_turn>\\n<start_of_turn>model\\n";
  EXPECT_EQ(nlohmann::json::parse(chat.out.substr(chat.out.rfind('{')))["prompt_tokens"],
            encoded_length(gemma, rendered));
}

TEST(PromptPrefix, QwenGetsNoPrefix) {
  std::string qwen = tiny_model_directory(DType::f32);
  EXPECT_EQ(prompt_tokens(qwen, "--prompt 'Alice was beginning'"),
            encoded_length(qwen, "Alice was beginning"));
}

}  // namespace
}  // namespace fornace
