// Hugging Face chat templates rendered as transformers renders them (interpreter: text/jinja/).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "text/jinja/value.h"
#include "text/tokenizer_config.h"

namespace fornace::text {

// A parsed template. Parsing throws Error for syntax errors and for anything outside the subset
// (naming it, its line and --prompt as the way around); render() throws Error for run-time
// errors (undefined values used, raise_exception(), limits).
class ChatTemplate {
 public:
  explicit ChatTemplate(std::string_view source);
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  // Renders with `variables` as the template's globals (messages, add_generation_prompt, ...).
  std::string render(const TemplateValue::Dict& variables,
                     const ChatTemplateLimits& limits = ChatTemplateLimits()) const;

  struct Program;

 private:
  std::unique_ptr<Program> program_;
};

// The globals transformers renders a chat template with: messages, add_generation_prompt, tools
// (a list of function definitions, or None), documents as None, and bos_token / eos_token when
// they are set.
TemplateValue::Dict chat_template_variables(const TokenizerConfig& config, TemplateValue messages,
                                            bool add_generation_prompt,
                                            TemplateValue tools = TemplateValue::none());

}  // namespace fornace::text
