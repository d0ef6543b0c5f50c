// Jinja's scoping analysis: which names start a frame (the template, a loop body) Undefined.
#include "text/jinja/scope.h"

#include <map>
#include <set>

namespace fornace::text::jinja {
namespace {

// Jinja's symbol tracking for one frame (the template or a loop body), which decides what a name
// holds before the frame assigns it: the enclosing frame's variable (alias), the render globals
// (resolve), or Undefined when the frame's first use of it is an unconditional {% set %} and no
// enclosing frame refers to it. A loop nested in the frame sees that Undefined.
struct Symbols {
  enum class Start { resolve, alias, undefined, parameter };
  const Symbols* parent = nullptr;
  std::map<std::string, Start> references;
  std::set<std::string> stores;

  bool find(const std::string& name) const {
    return references.count(name) || (parent && parent->find(name));
  }
  void load(const std::string& name) {
    if (!find(name)) references[name] = Start::resolve;
  }
  void store(const std::string& name) {
    stores.insert(name);
    if (!references.count(name))
      references[name] = parent && parent->find(name) ? Start::alias : Start::undefined;
  }
  // Merges the if, elif and else branches: a name that not all three store starts as the
  // enclosing frame's or the globals'.
  void merge_branches(const std::vector<Symbols>& branches) {
    std::map<std::string, size_t> counts;
    for (const Symbols& branch : branches)
      for (const std::string& name : branch.stores)
        if (!stores.count(name)) ++counts[name];
    for (const Symbols& branch : branches) {
      for (const auto& [name, start] : branch.references) {
        // An Undefined start gives way to a branch that reads the name first.
        auto found = references.find(name);
        if (found == references.end() || found->second == Start::undefined)
          references[name] = start;
      }
      stores.insert(branch.stores.begin(), branch.stores.end());
    }
    for (const auto& [name, count] : counts) {
      if (count == branches.size()) continue;
      references[name] = parent && parent->find(name) ? Start::alias : Start::resolve;
    }
  }
};

void load_names(const Expr& expr, Symbols& symbols) {
  if (expr.kind == ExprKind::name) symbols.load(expr.name);
  for (const ExprPtr& operand : expr.operands)
    if (operand) load_names(*operand, symbols);
  for (const auto& keyword : expr.keywords) load_names(*keyword.second, symbols);
}

// Visits one frame's own level in order; loop bodies are frames of their own, collected in `loops`.
void visit_level(Body& body, Symbols& symbols, std::vector<Node*>& loops) {
  for (Node& node : body) {
    switch (node.kind) {
      case NodeKind::text:
        break;
      case NodeKind::output:
        load_names(*node.expression, symbols);
        break;
      case NodeKind::assign:
        load_names(*node.expression, symbols);
        if (node.attribute.empty()) {
          symbols.store(node.text);
        } else {
          symbols.load(node.text);
        }
        break;
      case NodeKind::loop:
        load_names(*node.expression, symbols);
        loops.push_back(&node);
        break;
      case NodeKind::branch: {
        // As Jinja: the first test, then three branches (body, the elifs together, else).
        load_names(*node.conditions[0], symbols);
        std::vector<Symbols> branches(3, symbols);
        visit_level(node.bodies[0], branches[0], loops);
        for (size_t index = 1; index < node.conditions.size(); ++index) {
          // Each elif is an if of its own with no else: what it stores is partial there.
          load_names(*node.conditions[index], branches[1]);
          std::vector<Symbols> elif_branches(3, branches[1]);
          visit_level(node.bodies[index], elif_branches[0], loops);
          branches[1].merge_branches(elif_branches);
        }
        visit_level(node.else_body, branches[2], loops);
        symbols.merge_branches(branches);
        break;
      }
    }
  }
}

// Analyzes a frame, then the loops in it with this frame as their parent; returns the names
// that start the frame Undefined.
std::vector<std::string> analyze_frame(Body& body, Symbols& symbols) {
  std::vector<Node*> loops;
  visit_level(body, symbols, loops);
  for (Node* loop : loops) {
    Symbols inner;
    inner.parent = &symbols;
    inner.references[loop->text] = Symbols::Start::parameter;
    inner.references["loop"] = Symbols::Start::parameter;
    loop->undefined_at_start = analyze_frame(loop->bodies[0], inner);
    Symbols else_frame;
    else_frame.parent = &symbols;
    analyze_frame(loop->else_body, else_frame);
  }
  std::vector<std::string> undefined;
  for (const auto& [name, start] : symbols.references)
    if (start == Symbols::Start::undefined) undefined.push_back(name);
  return undefined;
}

}  // namespace

std::vector<std::string> analyze_scopes(Body& body) {
  Symbols root;
  return analyze_frame(body, root);
}

}  // namespace fornace::text::jinja
