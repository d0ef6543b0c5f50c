// The parser: tokens to the tree, refusing at parse time what the subset lacks.
#include "text/jinja/parser.h"

#include <algorithm>

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"

namespace fornace::text::jinja {
namespace {

constexpr int kMaxExpressionDepth = 200;
constexpr int kMaxBlockDepth = 100;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_template() {
    Body body;
    parse_body(body, {}, 0);
    return body;
  }

 private:
  const Token& current() const { return tokens_[index_]; }
  const Token& peek_next() const { return tokens_[std::min(index_ + 1, tokens_.size() - 1)]; }
  Token take() { return tokens_[index_ < tokens_.size() - 1 ? index_++ : index_]; }
  bool is_op(std::string_view op) const {
    return current().type == TokenType::op && current().value == op;
  }
  bool is_name(std::string_view name) const {
    return current().type == TokenType::name && current().value == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    ++index_;
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    ++index_;
    return true;
  }

  std::string describe(const Token& token) const {
    switch (token.type) {
      case TokenType::end:
        return "the end of the template";
      case TokenType::variable_end:
        return "'}}'";
      case TokenType::block_end:
        return "'%}'";
      case TokenType::text:
        return "text";
      default:
        return "'" + token.value + "'";
    }
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op))
      syntax_error(current().line, concat("expected '", op, "', found ", describe(current())));
  }
  std::string expect_name(std::string_view what) {
    if (current().type != TokenType::name)
      syntax_error(current().line, concat("expected ", what, ", found ", describe(current())));
    return take().value;
  }
  void expect_block_end(std::string_view tag) {
    if (current().type != TokenType::block_end)
      syntax_error(current().line,
                   concat("expected '%}' after '", tag, "', found ", describe(current())));
    ++index_;
  }

  // Parses nodes into `body` until one of `end_tags` (returned, the stream after its name) or
  // the end of the template (returns "").
  std::string parse_body(Body& body, const std::vector<std::string_view>& end_tags, int depth) {
    if (depth > kMaxBlockDepth)
      syntax_error(current().line, concat("blocks nest deeper than ", kMaxBlockDepth, " levels"));
    while (true) {
      const Token& token = current();
      if (token.type == TokenType::end) return "";
      if (token.type == TokenType::text) {
        Node node(NodeKind::text, token.line);
        node.text = token.value;
        body.push_back(std::move(node));
        ++index_;
        continue;
      }
      if (token.type == TokenType::variable_begin) {
        ++index_;
        Node node(NodeKind::output, token.line);
        node.expression = parse_expression();
        if (current().type != TokenType::variable_end)
          syntax_error(current().line, concat("expected '}}', found ", describe(current())));
        ++index_;
        body.push_back(std::move(node));
        continue;
      }
      if (token.type != TokenType::block_begin)
        syntax_error(token.line, concat("unexpected ", describe(token)));
      ++index_;
      int line = current().line;
      std::string tag = expect_name("a tag name");
      if (std::find(end_tags.begin(), end_tags.end(), tag) != end_tags.end()) return tag;
      if (tag == "if") {
        body.push_back(parse_if(line, depth));
      } else if (tag == "for") {
        body.push_back(parse_for(line, depth));
      } else if (tag == "set") {
        body.push_back(parse_set(line));
      } else if (tag == "elif" || tag == "else" || tag == "endif" || tag == "endfor" ||
                 tag == "endset") {
        syntax_error(line, concat("unexpected '{% ", tag, " %}'"));
      } else {
        unsupported(concat("the tag '{% ", tag, " %}'"), line);
      }
    }
  }

  void expect_closed(const std::string& stopped, int line, std::string_view opener,
                     std::string_view closer) {
    if (stopped.empty())
      syntax_error(line, concat("'{% ", opener, " %}' is never closed by '{% ", closer, " %}'"));
  }

  Node parse_if(int line, int depth) {
    Node node(NodeKind::branch, line);
    node.conditions.push_back(parse_expression());
    expect_block_end("if");
    while (true) {
      node.bodies.emplace_back();
      std::string stopped = parse_body(node.bodies.back(), {"elif", "else", "endif"}, depth + 1);
      expect_closed(stopped, line, "if", "endif");
      if (stopped == "elif") {
        node.conditions.push_back(parse_expression());
        expect_block_end("elif");
        continue;
      }
      if (stopped == "else") {
        expect_block_end("else");
        stopped = parse_body(node.else_body, {"endif"}, depth + 1);
        expect_closed(stopped, line, "if", "endif");
      }
      expect_block_end("endif");
      return node;
    }
  }

  Node parse_for(int line, int depth) {
    Node node(NodeKind::loop, line);
    node.text = expect_name("a loop variable");
    if (is_op(",")) unsupported("unpacking several loop variables", line);
    if (!skip_name("in"))
      syntax_error(current().line, concat("expected 'in', found ", describe(current())));
    node.expression = parse_or();
    if (is_name("if")) unsupported("a loop filter ('for ... if')", line);
    if (is_name("recursive")) unsupported("a recursive loop", line);
    expect_block_end("for");
    node.bodies.emplace_back();
    std::string stopped = parse_body(node.bodies.back(), {"else", "endfor"}, depth + 1);
    expect_closed(stopped, line, "for", "endfor");
    if (stopped == "else") {
      expect_block_end("else");
      stopped = parse_body(node.else_body, {"endfor"}, depth + 1);
      expect_closed(stopped, line, "for", "endfor");
    }
    expect_block_end("endfor");
    return node;
  }

  Node parse_set(int line) {
    Node node(NodeKind::assign, line);
    node.text = expect_name("a variable name");
    if (skip_op(".")) node.attribute = expect_name("an attribute name");
    if (is_op(",")) unsupported("assigning several variables at once", line);
    if (current().type == TokenType::block_end)
      unsupported("a block '{% set %}...{% endset %}'", line);
    expect_op("=");
    node.expression = parse_expression();
    expect_block_end("set");
    return node;
  }

  // Makes a node, checking that the tree stays shallow enough to walk recursively.
  ExprPtr make(ExprKind kind, int line, std::vector<ExprPtr> operands = {}) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->line = line;
    expr->operands = std::move(operands);
    finish(*expr);
    return expr;
  }

  void finish(Expr& expr) {
    int depth = 0;
    for (const ExprPtr& operand : expr.operands)
      if (operand) depth = std::max(depth, operand->depth);
    for (const auto& keyword : expr.keywords) depth = std::max(depth, keyword.second->depth);
    expr.depth = depth + 1;
    if (expr.depth > kMaxExpressionDepth)
      syntax_error(expr.line,
                   concat("an expression nests deeper than ", kMaxExpressionDepth, " levels"));
  }

  // Guards the parser's own recursion (parentheses, unary operators).
  struct DepthGuard {
    Parser& parser;
    explicit DepthGuard(Parser& owner, int line) : parser(owner) {
      if (++parser.recursion_ > kMaxExpressionDepth)
        syntax_error(line,
                     concat("an expression nests deeper than ", kMaxExpressionDepth, " levels"));
    }
    ~DepthGuard() { --parser.recursion_; }
  };

  ExprPtr parse_expression() {
    DepthGuard guard(*this, current().line);
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      int line = take().line;
      ExprPtr condition = parse_or();
      ExprPtr otherwise;
      if (skip_name("else")) otherwise = parse_expression();
      std::vector<ExprPtr> operands;
      operands.push_back(std::move(condition));
      operands.push_back(std::move(expr));
      operands.push_back(std::move(otherwise));
      expr = make(ExprKind::conditional, line, std::move(operands));
    }
    return expr;
  }

  ExprPtr binary(ExprKind kind, int line, ExprPtr left, ExprPtr right, std::string name = "") {
    std::vector<ExprPtr> operands;
    operands.push_back(std::move(left));
    operands.push_back(std::move(right));
    ExprPtr expr = make(kind, line, std::move(operands));
    expr->name = std::move(name);
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      int line = take().line;
      left = binary(ExprKind::logical_or, line, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      int line = take().line;
      left = binary(ExprKind::logical_and, line, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this, current().line);
      int line = take().line;
      std::vector<ExprPtr> operands;
      operands.push_back(parse_not());
      return make(ExprKind::logical_not, line, std::move(operands));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = current().line;
    ExprPtr first = parse_math1();
    std::vector<ExprPtr> operands;
    std::vector<std::string> comparisons;
    while (true) {
      std::string op;
      if (current().type == TokenType::op &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">="))) {
        op = take().value;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && peek_next().type == TokenType::name &&
                 peek_next().value == "in") {
        index_ += 2;
        op = "not in";
      } else {
        break;
      }
      if (operands.empty()) operands.push_back(std::move(first));
      operands.push_back(parse_math1());
      comparisons.push_back(op);
    }
    if (operands.empty()) return first;
    ExprPtr expr = make(ExprKind::compare, line, std::move(operands));
    expr->comparisons = std::move(comparisons);
    return expr;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      Token op = take();
      left = binary(ExprKind::binary, op.line, std::move(left), parse_concat(), op.value);
    }
    return left;
  }

  ExprPtr parse_concat() {
    int line = current().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    std::vector<ExprPtr> operands;
    operands.push_back(std::move(first));
    while (skip_op("~")) operands.push_back(parse_math2());
    return make(ExprKind::concat, line, std::move(operands));
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      Token op = take();
      left = binary(ExprKind::binary, op.line, std::move(left), parse_pow(), op.value);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      Token op = take();
      left = binary(ExprKind::binary, op.line, std::move(left), parse_unary(true), op.value);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr expr;
    if (is_op("-") || is_op("+")) {
      DepthGuard guard(*this, current().line);
      Token op = take();
      std::vector<ExprPtr> operands;
      operands.push_back(parse_unary(false));
      expr =
          make(op.value == "-" ? ExprKind::negate : ExprKind::plus, op.line, std::move(operands));
    } else {
      expr = parse_primary();
    }
    expr = parse_postfix(std::move(expr));
    if (with_filter) expr = parse_filters(std::move(expr));
    return expr;
  }

  ExprPtr parse_primary() {
    const Token& token = current();
    int line = token.line;
    switch (token.type) {
      case TokenType::name: {
        std::string name = take().value;
        if (name == "true" || name == "True" || name == "false" || name == "False") {
          ExprPtr expr = make(ExprKind::literal, line);
          expr->literal = TemplateValue::boolean(name == "true" || name == "True");
          return expr;
        }
        if (name == "none" || name == "None") {
          ExprPtr expr = make(ExprKind::literal, line);
          expr->literal = TemplateValue::none();
          return expr;
        }
        ExprPtr expr = make(ExprKind::name, line);
        expr->name = std::move(name);
        return expr;
      }
      case TokenType::string: {
        std::string value;
        while (current().type == TokenType::string) value += take().value;
        ExprPtr expr = make(ExprKind::literal, line);
        expr->literal = TemplateValue::string(std::move(value));
        return expr;
      }
      case TokenType::integer:
      case TokenType::floating: {
        Token number = take();
        ExprPtr expr = make(ExprKind::literal, line);
        expr->literal = number.type == TokenType::integer
                            ? TemplateValue::integer(number.integer)
                            : TemplateValue::floating(number.floating);
        return expr;
      }
      case TokenType::op:
        if (skip_op("(")) {
          if (is_op(")")) unsupported("a tuple", line);
          ExprPtr inner = parse_expression();
          if (is_op(",")) unsupported("a tuple", line);
          expect_op(")");
          return inner;
        }
        if (skip_op("[")) {
          DepthGuard guard(*this, line);
          std::vector<ExprPtr> items;
          while (!is_op("]")) {
            if (!items.empty()) expect_op(",");
            if (is_op("]")) break;
            items.push_back(parse_expression());
          }
          expect_op("]");
          return make(ExprKind::list, line, std::move(items));
        }
        if (skip_op("{")) {
          DepthGuard guard(*this, line);
          std::vector<ExprPtr> items;  // key, value, key, value, ...
          while (!is_op("}")) {
            if (!items.empty()) expect_op(",");
            if (is_op("}")) break;
            items.push_back(parse_expression());
            expect_op(":");
            items.push_back(parse_expression());
          }
          expect_op("}");
          return make(ExprKind::dict, line, std::move(items));
        }
        break;
      default:
        break;
    }
    syntax_error(line, concat("expected an expression, found ", describe(token)));
  }

  // Positional and keyword arguments up to ')', the '(' already consumed.
  void parse_arguments(Expr& call) {
    DepthGuard guard(*this, call.line);
    for (bool first = true; !is_op(")"); first = false) {
      if (!first) expect_op(",");
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) unsupported("'*' and '**' arguments", current().line);
      if (current().type == TokenType::name && peek_next().type == TokenType::op &&
          peek_next().value == "=") {
        std::string keyword = take().value;
        ++index_;
        call.keywords.emplace_back(keyword, parse_expression());
      } else {
        if (!call.keywords.empty())
          syntax_error(current().line, "a positional argument follows a keyword argument");
        call.operands.push_back(parse_expression());
      }
    }
    expect_op(")");
    finish(call);
  }

  ExprPtr parse_postfix(ExprPtr expr) {
    while (true) {
      int line = current().line;
      if (skip_op(".")) {
        if (current().type == TokenType::integer) unsupported("'.N' item access", line);
        std::string name = expect_name("an attribute name");
        std::vector<ExprPtr> operands;
        operands.push_back(std::move(expr));
        expr = make(ExprKind::attribute, line, std::move(operands));
        expr->name = std::move(name);
      } else if (skip_op("[")) {
        expr = parse_subscript(std::move(expr), line);
      } else if (skip_op("(")) {
        expr = parse_call(std::move(expr), line);
      } else {
        return expr;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr subject, int line) {
    DepthGuard guard(*this, line);
    std::vector<ExprPtr> operands;
    operands.push_back(std::move(subject));
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression();
      if (!is_op(":")) {
        if (is_op(",")) unsupported("a tuple subscript", line);
        expect_op("]");
        operands.push_back(std::move(start));
        return make(ExprKind::subscript, line, std::move(operands));
      }
    }
    expect_op(":");
    ExprPtr stop, step;
    if (!is_op("]") && !is_op(":")) stop = parse_expression();
    if (skip_op(":") && !is_op("]")) step = parse_expression();
    expect_op("]");
    operands.push_back(std::move(start));
    operands.push_back(std::move(stop));
    operands.push_back(std::move(step));
    return make(ExprKind::slice, line, std::move(operands));
  }

  ExprPtr parse_call(ExprPtr callee, int line) {
    auto call = std::make_unique<Expr>();
    call->line = line;
    if (callee->kind == ExprKind::name) {
      if (!is_function(callee->name)) unsupported(concat("calling '", callee->name, "()'"), line);
      call->kind = ExprKind::function;
      call->name = callee->name;
    } else if (callee->kind == ExprKind::attribute) {
      if (!is_method(callee->name)) unsupported(concat("the method '.", callee->name, "()'"), line);
      call->kind = ExprKind::method;
      call->name = callee->name;
      call->operands.push_back(std::move(callee->operands[0]));
    } else {
      unsupported("calling the result of an expression", line);
    }
    parse_arguments(*call);
    return call;
  }

  ExprPtr parse_filters(ExprPtr expr) {
    while (true) {
      int line = current().line;
      if (skip_op("|")) {
        std::string name = expect_name("a filter name");
        if (!is_filter(name)) unsupported(concat("the filter '", name, "'"), line);
        auto filter = std::make_unique<Expr>();
        filter->kind = ExprKind::filter;
        filter->line = line;
        filter->name = std::move(name);
        filter->operands.push_back(std::move(expr));
        if (skip_op("(")) {
          parse_arguments(*filter);
        } else {
          finish(*filter);
        }
        expr = std::move(filter);
      } else if (skip_name("is")) {
        bool negated = skip_name("not");
        std::string name = expect_name("a test name");
        if (!is_test(name)) unsupported(concat("the test '", name, "'"), line);
        const Token& next = current();
        bool argument_follows = next.type == TokenType::string || next.type == TokenType::integer ||
                                next.type == TokenType::floating ||
                                (next.type == TokenType::op &&
                                 (next.value == "(" || next.value == "[" || next.value == "{")) ||
                                (next.type == TokenType::name && next.value != "else" &&
                                 next.value != "or" && next.value != "and");
        if (argument_follows) unsupported(concat("an argument to the test '", name, "'"), line);
        std::vector<ExprPtr> operands;
        operands.push_back(std::move(expr));
        expr = make(ExprKind::test, line, std::move(operands));
        expr->name = std::move(name);
        expr->negated = negated;
      } else if (is_op("(")) {
        unsupported("calling the result of a filter or test", line);
      } else {
        return expr;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t index_ = 0;
  int recursion_ = 0;
};

}  // namespace

Body parse(std::vector<Token> tokens) { return Parser(std::move(tokens)).parse_template(); }

}  // namespace fornace::text::jinja
