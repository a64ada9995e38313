#include "chat/jinja/parser.h"

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_join.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/parser_impl.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace parser_internal {

ExprPtr NewExpr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

std::unique_ptr<Stmt> NewStmt(StmtKind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

std::string Describe(const Token& t) {
  switch (t.type) {
    case TokenType::kData:
      return "template data / text";
    case TokenType::kVariableBegin:
      return "begin of print statement";
    case TokenType::kVariableEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kString:
      return "string";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kEof:
      return "end of template";
    default:
      return t.text;
  }
}

absl::StatusOr<Body> ParserImpl::ParseTemplate() {
  JINJA_ASSIGN_OR_RETURN(Body body, Subparse({}));
  if (cur().type != TokenType::kEof) return Fail(Cat("unexpected '", Describe(cur()), "'"));
  return body;
}

bool ParserImpl::SkipOp(std::string_view op) {
  if (!IsOp(op)) return false;
  next();
  return true;
}

bool ParserImpl::SkipName(std::string_view name) {
  if (!IsName(name)) return false;
  next();
  return true;
}

absl::Status ParserImpl::Fail(std::string_view message, int line) const {
  return WithLine(TemplateFailure(kSyntaxError, message), line > 0 ? line : cur().line);
}

absl::Status ParserImpl::Unexpected(std::string_view what) const {
  if (cur().type == TokenType::kEof) return Fail(Cat("unexpected end of template, expected '", what, "'."));
  return Fail(Cat("expected token '", what, "', got '", Describe(cur()), "'"));
}

absl::Status ParserImpl::Expect(TokenType type, std::string_view what) {
  if (cur().type != type) return Unexpected(what);
  next();
  return absl::OkStatus();
}

absl::Status ParserImpl::ExpectOp(std::string_view op) {
  if (!IsOp(op)) return Unexpected(op);
  next();
  return absl::OkStatus();
}

absl::StatusOr<std::string> ParserImpl::ExpectName() {
  if (cur().type != TokenType::kName) {
    return Unexpected("name");
  }
  std::string name = cur().text;
  next();
  return name;
}

absl::Status ParserImpl::CheckDepth() const {
  if (depth_ <= kMaxParseDepth) return absl::OkStatus();
  return WithLine(LimitExceeded(Cat("nesting deeper than ", kMaxParseDepth, " levels")), cur().line);
}

absl::Status ParserImpl::FailEndOfTemplate(std::string_view tag) const {
  std::string message = tag.empty() ? "Unexpected end of template." : Cat("Encountered unknown tag '", tag, "'.");
  if (!end_stack_.empty()) {
    std::vector<std::string> quoted;
    for (std::string_view n : end_stack_.back()) quoted.push_back(Cat("'", n, "'"));
    CatAppend(&message, " Jinja was looking for the following tags: ", absl::StrJoin(quoted, " or "), ".");
  }
  if (!tag_stack_.empty()) {
    CatAppend(&message, " The innermost block that needs to be closed is '", tag_stack_.back(), "'.");
  }
  return Fail(message);
}

absl::StatusOr<Body> ParserImpl::Subparse(const Names& end) {
  NestingGuard nest(&depth_);
  JINJA_RETURN_IF_ERROR(CheckDepth());
  if (!end.empty()) end_stack_.push_back(end);
  Body body;
  while (cur().type != TokenType::kEof) {
    const Token& t = cur();
    if (t.type == TokenType::kData) {
      auto s = NewStmt(StmtKind::kData, t.line);
      s->text = t.text;
      body.push_back(std::move(s));
      next();
    } else if (t.type == TokenType::kVariableBegin) {
      next();
      auto s = NewStmt(StmtKind::kPrint, cur().line);
      JINJA_ASSIGN_OR_RETURN(s->expr, ParseTuple(true, {}, false));
      JINJA_RETURN_IF_ERROR(Expect(TokenType::kVariableEnd, "end of print statement"));
      body.push_back(std::move(s));
    } else if (t.type == TokenType::kBlockBegin) {
      next();
      if (cur().type == TokenType::kName && std::find(end.begin(), end.end(), cur().text) != end.end()) {
        end_stack_.pop_back();
        return body;
      }
      JINJA_ASSIGN_OR_RETURN(auto s, Statement());
      JINJA_RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "end of statement block"));
      body.push_back(std::move(s));
    } else {
      return Fail(Cat("unexpected '", Describe(t), "'"));
    }
  }
  if (!end.empty()) end_stack_.pop_back();
  return body;
}

absl::StatusOr<Body> ParserImpl::Statements(const Names& end, bool drop) {
  SkipOp(":");
  JINJA_RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "end of statement block"));
  JINJA_ASSIGN_OR_RETURN(Body body, Subparse(end));
  if (cur().type == TokenType::kEof) {
    end_stack_.push_back(end);
    absl::Status st = FailEndOfTemplate("");
    end_stack_.pop_back();
    return st;
  }
  if (drop) next();
  return body;
}

absl::StatusOr<Body> ParserImpl::FunctionBody(const Names& end) {
  const int loops = loop_depth_;
  loop_depth_ = 0;
  auto body = Statements(end, true);
  loop_depth_ = loops;
  return body;
}

absl::StatusOr<std::unique_ptr<Stmt>> ParserImpl::Statement() {
  if (cur().type != TokenType::kName) return Fail("tag name expected");
  const std::string tag = cur().text;
  tag_stack_.push_back(tag);
  auto result = StatementNamed(tag);
  tag_stack_.pop_back();
  return result;
}

absl::StatusOr<std::unique_ptr<Stmt>> ParserImpl::StatementNamed(const std::string& tag) {
  if (tag == "for") return For();
  if (tag == "if") return If();
  if (tag == "set") return Set();
  if (tag == "macro") return Macro();
  if (tag == "call") return CallBlock();
  if (tag == "filter") return FilterBlock();
  if (tag == "with") return With();
  if (tag == "print") return Print();
  if (tag == "generation") return Generation();
  if (tag == "break" || tag == "continue") return LoopControl(tag);
  for (std::string_view loader : {"extends", "include", "import", "from", "block", "autoescape"}) {
    if (tag == loader) return WithLine(Unsupported(Cat("the '", tag, "' tag")), cur().line);
  }
  tag_stack_.pop_back();
  absl::Status st = FailEndOfTemplate(tag);
  tag_stack_.push_back(tag);
  return st;
}

absl::StatusOr<std::unique_ptr<Stmt>> ParserImpl::For() {
  auto s = NewStmt(StmtKind::kFor, cur().line);
  next();
  JINJA_ASSIGN_OR_RETURN(s->target, ParseTarget({"in"}, false));
  if (!SkipName("in")) return Unexpected("in");
  JINJA_ASSIGN_OR_RETURN(s->expr, ParseTuple(false, {"recursive"}, false));
  if (SkipName("if")) {
    JINJA_ASSIGN_OR_RETURN(s->condition, ParseExpression(true));
  }
  s->recursive = SkipName("recursive");
  ++loop_depth_;
  auto body = Statements({"endfor", "else"}, false);
  --loop_depth_;
  if (!body.ok()) return body.status();
  s->body = *std::move(body);
  const bool has_else = IsName("else");
  next();
  if (has_else) {
    JINJA_ASSIGN_OR_RETURN(s->else_body, Statements({"endfor"}, true));
  }
  return s;
}

absl::StatusOr<std::unique_ptr<Stmt>> ParserImpl::If() {
  auto s = NewStmt(StmtKind::kIf, cur().line);
  next();
  while (true) {
    JINJA_ASSIGN_OR_RETURN(ExprPtr test, ParseTuple(false, {}, false));
    JINJA_ASSIGN_OR_RETURN(Body body, Statements({"elif", "else", "endif"}, false));
    s->branches.emplace_back(std::move(test), std::move(body));
    const std::string token = cur().text;
    next();
    if (token == "elif") continue;
    if (token == "else") {
      JINJA_ASSIGN_OR_RETURN(s->else_body, Statements({"endif"}, true));
    }
    return s;
  }
}

absl::StatusOr<std::unique_ptr<Stmt>> ParserImpl::Set() {
  const int line = cur().line;
  next();
  JINJA_ASSIGN_OR_RETURN(Target target, ParseTarget({}, true));
  if (SkipOp("=")) {
    auto s = NewStmt(StmtKind::kSet, line);
    s->target = std::move(target);
    JINJA_ASSIGN_OR_RETURN(s->expr, ParseTuple(true, {}, false));
    return s;
  }
  auto s = NewStmt(StmtKind::kSetBlock, line);
  s->target = std::move(target);
  JINJA_ASSIGN_OR_RETURN(s->filter, ParseFilters(nullptr, false));
  JINJA_ASSIGN_OR_RETURN(s->body, Statements({"endset"}, true));
  return s;
}

absl::Status ParserImpl::Signature(MacroDef* def) {
  JINJA_RETURN_IF_ERROR(ExpectOp("("));
  while (!IsOp(")")) {
    if (!def->params.empty()) JINJA_RETURN_IF_ERROR(ExpectOp(","));
    JINJA_ASSIGN_OR_RETURN(std::string name, ExpectName());
    if (SkipOp("=")) {
      JINJA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      def->defaults.push_back(std::move(value));
    } else if (!def->defaults.empty()) {
      return Fail("non-default argument follows default argument");
    }
    def->params.push_back(std::move(name));
  }
  return ExpectOp(")");
}

absl::StatusOr<Body> ParserImpl::MacroBody(MacroDef* def, const Names& end) {
  macros_.push_back(def);
  auto body = FunctionBody(end);
  macros_.pop_back();
  return body;
}

absl::StatusOr<std::unique_ptr<Stmt>> ParserImpl::Macro() {
  auto s = NewStmt(StmtKind::kMacro, cur().line);
  next();
  s->macro = std::make_unique<MacroDef>();
  s->macro->line = s->line;
  JINJA_ASSIGN_OR_RETURN(s->macro->name, ExpectName());
  JINJA_RETURN_IF_ERROR(Signature(s->macro.get()));
  JINJA_ASSIGN_OR_RETURN(s->macro->body, MacroBody(s->macro.get(), {"endmacro"}));
  return s;
}

absl::StatusOr<std::unique_ptr<Stmt>> ParserImpl::CallBlock() {
  auto s = NewStmt(StmtKind::kCallBlock, cur().line);
  next();
  s->macro = std::make_unique<MacroDef>();
  s->macro->name = "caller";
  s->macro->line = s->line;
  if (IsOp("(")) JINJA_RETURN_IF_ERROR(Signature(s->macro.get()));
  JINJA_ASSIGN_OR_RETURN(s->expr, ParseExpression(true));
  if (s->expr->kind != ExprKind::kCall) return Fail("expected call", s->line);
  JINJA_ASSIGN_OR_RETURN(s->macro->body, MacroBody(s->macro.get(), {"endcall"}));
  return s;
}

absl::StatusOr<std::unique_ptr<Stmt>> ParserImpl::FilterBlock() {
  auto s = NewStmt(StmtKind::kFilterBlock, cur().line);
  next();
  JINJA_ASSIGN_OR_RETURN(s->filter, ParseFilters(nullptr, true));
  JINJA_ASSIGN_OR_RETURN(s->body, Statements({"endfilter"}, true));
  return s;
}

absl::StatusOr<std::unique_ptr<Stmt>> ParserImpl::With() {
  auto s = NewStmt(StmtKind::kWith, cur().line);
  next();
  while (cur().type != TokenType::kBlockEnd) {
    if (!s->assignments.empty()) JINJA_RETURN_IF_ERROR(ExpectOp(","));
    JINJA_ASSIGN_OR_RETURN(Target target, ParseTarget({}, false));
    JINJA_RETURN_IF_ERROR(ExpectOp("="));
    JINJA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
    s->assignments.emplace_back(std::move(target), std::move(value));
  }
  JINJA_ASSIGN_OR_RETURN(s->body, Statements({"endwith"}, true));
  return s;
}

absl::StatusOr<std::unique_ptr<Stmt>> ParserImpl::Print() {
  auto s = NewStmt(StmtKind::kScope, cur().line);
  next();
  while (cur().type != TokenType::kBlockEnd) {
    if (!s->body.empty()) JINJA_RETURN_IF_ERROR(ExpectOp(","));
    auto p = NewStmt(StmtKind::kPrint, cur().line);
    JINJA_ASSIGN_OR_RETURN(p->expr, ParseExpression(true));
    s->body.push_back(std::move(p));
  }
  return s;
}

absl::StatusOr<std::unique_ptr<Stmt>> ParserImpl::Generation() {
  auto s = NewStmt(StmtKind::kScope, cur().line);
  next();
  JINJA_ASSIGN_OR_RETURN(s->body, FunctionBody({"endgeneration"}));
  s->own_frame = true;
  return s;
}

absl::StatusOr<std::unique_ptr<Stmt>> ParserImpl::LoopControl(const std::string& tag) {
  const int line = cur().line;
  // Python's own compiler refuses it (SyntaxError, not Jinja's).
  if (loop_depth_ == 0) return WithLine(TemplateFailure("SyntaxError", Cat("'", tag, "' outside loop")), line);
  next();
  return NewStmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line);
}

absl::StatusOr<Target> ParserImpl::ParseTarget(const Names& extra_end, bool with_namespace) {
  NestingGuard nest(&depth_);
  JINJA_RETURN_IF_ERROR(CheckDepth());
  std::vector<Target> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) JINJA_RETURN_IF_ERROR(ExpectOp(","));
    if (IsTupleEnd(extra_end)) break;
    JINJA_ASSIGN_OR_RETURN(Target item, ParseTargetPrimary(with_namespace));
    items.push_back(std::move(item));
    if (!IsOp(",")) break;
    is_tuple = true;
  }
  if (!is_tuple && items.size() == 1) return std::move(items[0]);
  if (items.empty() && !is_tuple) return Fail(Cat("can't assign to '", Describe(cur()), "'"));
  Target t;
  t.kind = Target::Kind::kTuple;
  t.items = std::move(items);
  return t;
}

absl::StatusOr<Target> ParserImpl::ParseTargetPrimary(bool with_namespace) {
  Target t;
  if (cur().type == TokenType::kName && !IsName("true") && !IsName("false") && !IsName("none") && !IsName("True") &&
      !IsName("False") && !IsName("None")) {
    t.name = cur().text;
    next();
    if (with_namespace && IsOp(".")) {
      next();
      t.kind = Target::Kind::kNamespaceAttr;
      JINJA_ASSIGN_OR_RETURN(t.attr, ExpectName());
    }
    return t;
  }
  if (SkipOp("(")) {
    JINJA_ASSIGN_OR_RETURN(t, ParseTarget({}, false));
    JINJA_RETURN_IF_ERROR(ExpectOp(")"));
    return t;
  }
  const TokenType type = cur().type;
  const bool literal = type == TokenType::kString || type == TokenType::kInteger || type == TokenType::kFloat ||
                       type == TokenType::kName;
  return Fail(Cat("can't assign to '", literal ? "const" : Describe(cur()), "'"));
}

// Filters and tests must exist, except where Jinja2 defers the check to
// run time: inside an if (its tests and bodies) or a conditional expression,
// a "soft" frame; loop, macro and block bodies start a frame of their own.
absl::Status CheckNames(Expr& e, bool soft) {
  if (e.kind == ExprKind::kFilter || e.kind == ExprKind::kTest) {
    absl::Status known = e.kind == ExprKind::kFilter ? CheckFilterName(e.name) : CheckTestName(e.name);
    if (!known.ok()) {
      if (!soft) return WithLine(known, e.line);
      e.unknown = true;
    }
  }
  soft = soft || e.kind == ExprKind::kCond;
  for (Expr* child : {e.a.get(), e.b.get(), e.c.get(), e.args.star.get(), e.args.star_star.get()}) {
    if (child != nullptr) JINJA_RETURN_IF_ERROR(CheckNames(*child, soft));
  }
  for (ExprPtr& item : e.items) JINJA_RETURN_IF_ERROR(CheckNames(*item, soft));
  for (ExprPtr& arg : e.args.positional) JINJA_RETURN_IF_ERROR(CheckNames(*arg, soft));
  for (auto& [name, arg] : e.args.keyword) JINJA_RETURN_IF_ERROR(CheckNames(*arg, soft));
  return absl::OkStatus();
}

absl::Status CheckNames(Stmt& s, bool soft) {
  const auto check = [](ExprPtr& e, bool in_soft) { return e ? CheckNames(*e, in_soft) : absl::OkStatus(); };
  JINJA_RETURN_IF_ERROR(check(s.expr, soft || s.kind == StmtKind::kIf));
  JINJA_RETURN_IF_ERROR(check(s.filter, soft));
  JINJA_RETURN_IF_ERROR(check(s.condition, false));
  for (auto& [target, value] : s.assignments) JINJA_RETURN_IF_ERROR(check(value, soft));
  for (auto& [test, body] : s.branches) {
    JINJA_RETURN_IF_ERROR(check(test, true));
    JINJA_RETURN_IF_ERROR(CheckNames(body, true));
  }
  if (s.macro != nullptr) {
    for (ExprPtr& d : s.macro->defaults) JINJA_RETURN_IF_ERROR(check(d, false));
    JINJA_RETURN_IF_ERROR(CheckNames(s.macro->body, false));
  }
  const bool body_soft = s.kind == StmtKind::kScope && !s.own_frame ? soft : false;
  JINJA_RETURN_IF_ERROR(CheckNames(s.body, body_soft));
  return CheckNames(s.else_body, s.kind == StmtKind::kIf || soft);
}

absl::Status CheckNames(Body& body, bool soft) {
  for (auto& s : body) JINJA_RETURN_IF_ERROR(CheckNames(*s, soft));
  return absl::OkStatus();
}

}  // namespace parser_internal

absl::StatusOr<Body> Parse(std::vector<Token> tokens) {
  if (tokens.empty() || tokens.back().type != TokenType::kEof) tokens.push_back(Token{TokenType::kEof, 0, ""});
  JINJA_ASSIGN_OR_RETURN(Body body, parser_internal::ParserImpl(std::move(tokens)).ParseTemplate());
  JINJA_RETURN_IF_ERROR(parser_internal::CheckNames(body, false));
  return body;
}

}  // namespace cairn::jinja
