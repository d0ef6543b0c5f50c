// The tree walker: statements, expressions and scopes, bounded in steps and sizes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/tree.h"

namespace fornace::text::jinja {

class Renderer {
 public:
  // `variables` are the template's globals; `undefined_at_start` the names that start it
  // Undefined (analyze_scopes).
  Renderer(const Dict& variables, const std::vector<std::string>& undefined_at_start,
           const ChatTemplateLimits& limits);

  void render(const Body& body, std::string& out);
  TemplateValue evaluate(const Expr& expr);
  // Counts one step; throws past the limit.
  void step(int line);
  // Throws when a string or list of `size` would pass the limit.
  void check_size(size_t size, int line) const;
  TemplateValue make_string(std::string text, int line) const;
  // The items a for loop visits: a list's items, a string's characters, a dict's keys.
  List iterate(const TemplateValue& value, int line);
  // The arguments of a call from operands[first_operand] on, positional then keyword, matched
  // to `names`; a missing one stays Undefined.
  std::vector<TemplateValue> arguments(const Expr& expr, size_t first_operand,
                                       const std::vector<std::string_view>& names);

 private:
  void render(const Node& node, std::string& out);
  void render_loop(const Node& node, std::string& out);
  void assign(const Node& node);
  TemplateValue lookup(const std::string& name) const;
  TemplateValue get_attribute(const TemplateValue& subject, const std::string& name,
                              int line) const;
  TemplateValue get_item(const TemplateValue& subject, const TemplateValue& key, int line) const;
  TemplateValue slice(const Expr& expr);

  const ChatTemplateLimits& limits_;
  std::vector<Dict> scopes_;
  size_t steps_ = 0;
};

}  // namespace fornace::text::jinja
