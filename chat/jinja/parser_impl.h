// The parser's state and rules (internal to parser.cc and parser_expr.cc;
// see parser.h for what it accepts).
#ifndef CAIRN_CHAT_JINJA_PARSER_IMPL_H_
#define CAIRN_CHAT_JINJA_PARSER_IMPL_H_

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"
#include "chat/jinja/nesting.h"

namespace cairn::jinja::parser_internal {

using Names = std::vector<std::string_view>;

ExprPtr NewExpr(ExprKind kind, int line);
std::unique_ptr<Stmt> NewStmt(StmtKind kind, int line);
// How Jinja2 names a token in messages ("end of print statement", "}").
std::string Describe(const Token& t);
// Fails on a filter or test no one defines, outside soft frames (parser.h).
absl::Status CheckNames(Body& body, bool soft);

class ParserImpl {
 public:
  explicit ParserImpl(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<Body> ParseTemplate();

 private:
  const Token& cur() const { return tokens_[pos_]; }
  void next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  const Token& peek() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  bool IsOp(std::string_view op) const { return cur().type == TokenType::kOperator && cur().text == op; }
  bool IsName(std::string_view name) const { return cur().type == TokenType::kName && cur().text == name; }
  bool SkipOp(std::string_view op);
  bool SkipName(std::string_view name);
  absl::Status Fail(std::string_view message, int line = 0) const;
  // "expected token 'x', got 'y'" (or "unexpected end of template").
  absl::Status Unexpected(std::string_view what) const;
  absl::Status Expect(TokenType type, std::string_view what);
  absl::Status ExpectOp(std::string_view op);
  absl::StatusOr<std::string> ExpectName();
  absl::Status CheckDepth() const;
  absl::Status FailEndOfTemplate(std::string_view tag) const;

  // Statements (parser.cc).
  absl::StatusOr<Body> Subparse(const Names& end);
  absl::StatusOr<Body> Statements(const Names& end, bool drop);
  absl::StatusOr<Body> FunctionBody(const Names& end);
  absl::StatusOr<std::unique_ptr<Stmt>> Statement();
  absl::StatusOr<std::unique_ptr<Stmt>> StatementNamed(const std::string& tag);
  absl::StatusOr<std::unique_ptr<Stmt>> For();
  absl::StatusOr<std::unique_ptr<Stmt>> If();
  absl::StatusOr<std::unique_ptr<Stmt>> Set();
  absl::Status Signature(MacroDef* def);
  absl::StatusOr<Body> MacroBody(MacroDef* def, const Names& end);
  absl::StatusOr<std::unique_ptr<Stmt>> Macro();
  absl::StatusOr<std::unique_ptr<Stmt>> CallBlock();
  absl::StatusOr<std::unique_ptr<Stmt>> FilterBlock();
  absl::StatusOr<std::unique_ptr<Stmt>> With();
  absl::StatusOr<std::unique_ptr<Stmt>> Print();
  absl::StatusOr<std::unique_ptr<Stmt>> Generation();
  absl::StatusOr<std::unique_ptr<Stmt>> LoopControl(const std::string& tag);
  absl::StatusOr<Target> ParseTarget(const Names& extra_end, bool with_namespace);
  absl::StatusOr<Target> ParseTargetPrimary(bool with_namespace);

  // Expressions (parser_expr.cc).
  bool IsTupleEnd(const Names& extra_end) const;
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr, const Names& extra_end, bool explicit_parentheses);
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr);
  absl::StatusOr<ExprPtr> ParseCondExpr();
  // One precedence level of left-associative binary operators:
  // operand (op operand)*.
  using Rule = absl::StatusOr<ExprPtr> (ParserImpl::*)();
  struct LevelOp {
    std::string_view text;
    bool keyword;  // `or`, `and` rather than an operator token
    ExprKind kind;
    BinaryOp op;
  };
  absl::StatusOr<ExprPtr> ParseLevel(std::initializer_list<LevelOp> ops, Rule operand);
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ExprPtr> ParseFilteredUnary();
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParseList();
  absl::StatusOr<ExprPtr> ParseDict();
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseCall(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscribed();
  absl::Status ParseCallArgs(ArgsExpr* args);
  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr node, bool start_inline);
  absl::StatusOr<ExprPtr> ParseTest(ExprPtr node);
  absl::StatusOr<std::string> DottedName();

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<Names> end_stack_;
  std::vector<std::string> tag_stack_;
  std::vector<MacroDef*> macros_;
};

}  // namespace cairn::jinja::parser_internal

#endif  // CAIRN_CHAT_JINJA_PARSER_IMPL_H_
