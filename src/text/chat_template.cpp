// ChatTemplate over the interpreter in text/jinja/, and the globals transformers renders with.
#include "text/chat_template.h"

#include "core/error.h"
#include "text/jinja/lexer.h"
#include "text/jinja/parser.h"
#include "text/jinja/render.h"
#include "text/jinja/scope.h"
#include "text/utf8.h"

namespace fornace::text {

struct ChatTemplate::Program {
  jinja::Body body;
  std::vector<std::string> undefined_at_start;
};

ChatTemplate::ChatTemplate(std::string_view source) : program_(std::make_unique<Program>()) {
  size_t invalid = first_invalid_utf8(source);
  if (invalid != std::string_view::npos)
    fail("chat template: not valid UTF-8 at byte offset ", invalid);
  program_->body = jinja::parse(jinja::tokenize(source));
  program_->undefined_at_start = jinja::analyze_scopes(program_->body);
}

ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

std::string ChatTemplate::render(const TemplateValue::Dict& variables,
                                 const ChatTemplateLimits& limits) const {
  std::string out;
  jinja::Renderer(variables, program_->undefined_at_start, limits).render(program_->body, out);
  return out;
}

TemplateValue::Dict chat_template_variables(const TokenizerConfig& config, TemplateValue messages,
                                            bool add_generation_prompt, TemplateValue tools) {
  TemplateValue::Dict variables{
      {"messages", std::move(messages)},
      {"add_generation_prompt", TemplateValue::boolean(add_generation_prompt)},
      {"tools", std::move(tools)},
      {"documents", TemplateValue::none()}};
  if (config.bos_token)
    variables.emplace_back("bos_token", TemplateValue::string(*config.bos_token));
  if (config.eos_token)
    variables.emplace_back("eos_token", TemplateValue::string(*config.eos_token));
  return variables;
}

}  // namespace fornace::text
