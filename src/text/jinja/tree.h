// The template as a tree of expressions and statements, built by the parser, walked to render.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace fornace::text::jinja {

enum class ExprKind {
  literal,
  name,
  list,
  dict,
  attribute,  // operands[0].name
  subscript,  // operands[0][operands[1]]
  slice,      // operands[0][operands[1]:operands[2]:operands[3]], absent bounds null
  negate,
  plus,
  logical_not,
  binary,   // operands[0] name operands[1]
  concat,   // operands joined by ~
  compare,  // operands[0] comparisons[0] operands[1] comparisons[1] ...
  logical_and,
  logical_or,
  conditional,  // operands[1] if operands[0] else operands[2] (may be null)
  filter,       // name(operands[0], operands[1:], keywords)
  test,         // operands[0] is [not] name
  method,       // operands[0].name(operands[1:], keywords)
  function,     // name(operands, keywords): raise_exception, namespace, range
};

struct Expr {
  ExprKind kind;
  int line = 0;
  int depth = 1;
  std::string name;
  TemplateValue literal;
  bool negated = false;
  std::vector<std::unique_ptr<Expr>> operands;
  std::vector<std::string> comparisons;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> keywords;
};
using ExprPtr = std::unique_ptr<Expr>;

enum class NodeKind { text, output, branch, loop, assign };

struct Node {
  Node(NodeKind node_kind, int node_line) : kind(node_kind), line(node_line) {}
  NodeKind kind;
  int line;
  std::string text;                       // text; the loop variable; the assigned name
  std::string attribute;                  // assign: set name.attribute
  ExprPtr expression;                     // output; the loop's iterable; the assigned value
  std::vector<ExprPtr> conditions;        // branch: if / elif conditions
  std::vector<std::vector<Node>> bodies;  // branch: one per condition; loop: the body
  std::vector<Node> else_body;            // branch and loop
  // loop: names that start each iteration Undefined (Jinja's scoping; see analyze_scopes).
  std::vector<std::string> undefined_at_start;
};
using Body = std::vector<Node>;

}  // namespace fornace::text::jinja
