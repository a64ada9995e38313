// The expression rules of the parser (see parser.h), as Jinja2's parser.py.
#include <algorithm>
#include <string>
#include <utility>

#include "chat/jinja/error.h"
#include "chat/jinja/parser_impl.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja::parser_internal {

namespace {

bool IsCompareOp(const Token& t, CompareOp* op) {
  if (t.type != TokenType::kOperator) return false;
  static constexpr std::pair<std::string_view, CompareOp> kOps[] = {{"==", CompareOp::kEq}, {"!=", CompareOp::kNe},
                                                                    {"<", CompareOp::kLt},  {"<=", CompareOp::kLe},
                                                                    {">", CompareOp::kGt},  {">=", CompareOp::kGe}};
  for (const auto& [text, value] : kOps) {
    if (t.text == text) {
      *op = value;
      return true;
    }
  }
  return false;
}

ExprPtr Binary(ExprKind kind, BinaryOp op, ExprPtr a, ExprPtr b, int line) {
  ExprPtr e = NewExpr(kind, line);
  e->op = op;
  e->a = std::move(a);
  e->b = std::move(b);
  return e;
}

}  // namespace

bool ParserImpl::IsTupleEnd(const Names& extra_end) const {
  const TokenType t = cur().type;
  if (t == TokenType::kVariableEnd || t == TokenType::kBlockEnd || IsOp(")")) return true;
  return t == TokenType::kName && std::find(extra_end.begin(), extra_end.end(), cur().text) != extra_end.end();
}

absl::StatusOr<ExprPtr> ParserImpl::ParseTuple(bool with_condexpr, const Names& extra_end, bool explicit_parentheses) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) JINJA_RETURN_IF_ERROR(ExpectOp(","));
    if (IsTupleEnd(extra_end)) break;
    JINJA_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condexpr));
    items.push_back(std::move(item));
    if (!IsOp(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) return Fail(Cat("Expected an expression, got '", Describe(cur()), "'"));
  }
  ExprPtr e = NewExpr(ExprKind::kTuple, line);
  e->items = std::move(items);
  return e;
}

absl::StatusOr<ExprPtr> ParserImpl::ParseExpression(bool with_condexpr) {
  NestingGuard nest(&depth_);
  JINJA_RETURN_IF_ERROR(CheckDepth());
  return with_condexpr ? ParseCondExpr() : ParseOr();
}

absl::StatusOr<ExprPtr> ParserImpl::ParseCondExpr() {
  JINJA_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
  while (IsName("if")) {
    ExprPtr cond = NewExpr(ExprKind::kCond, cur().line);
    next();
    cond->b = std::move(expr);
    JINJA_ASSIGN_OR_RETURN(cond->a, ParseOr());
    if (SkipName("else")) {
      NestingGuard nest(&depth_);
      JINJA_RETURN_IF_ERROR(CheckDepth());
      JINJA_ASSIGN_OR_RETURN(cond->c, ParseCondExpr());
    }
    expr = std::move(cond);
  }
  return expr;
}

absl::StatusOr<ExprPtr> ParserImpl::ParseLevel(std::initializer_list<LevelOp> ops, Rule operand) {
  JINJA_ASSIGN_OR_RETURN(ExprPtr left, (this->*operand)());
  while (true) {
    const LevelOp* found = nullptr;
    for (const LevelOp& o : ops) {
      if (o.keyword ? IsName(o.text) : IsOp(o.text)) found = &o;
    }
    if (found == nullptr) return left;
    const int line = cur().line;
    next();
    JINJA_ASSIGN_OR_RETURN(ExprPtr right, (this->*operand)());
    left = Binary(found->kind, found->op, std::move(left), std::move(right), line);
  }
}

absl::StatusOr<ExprPtr> ParserImpl::ParseOr() {
  return ParseLevel({{"or", true, ExprKind::kOr, BinaryOp::kAdd}}, &ParserImpl::ParseAnd);
}

absl::StatusOr<ExprPtr> ParserImpl::ParseAnd() {
  return ParseLevel({{"and", true, ExprKind::kAnd, BinaryOp::kAdd}}, &ParserImpl::ParseNot);
}

absl::StatusOr<ExprPtr> ParserImpl::ParseNot() {
  if (!IsName("not")) return ParseCompare();
  NestingGuard nest(&depth_);
  JINJA_RETURN_IF_ERROR(CheckDepth());
  ExprPtr e = NewExpr(ExprKind::kNot, cur().line);
  next();
  JINJA_ASSIGN_OR_RETURN(e->a, ParseNot());
  return e;
}

absl::StatusOr<ExprPtr> ParserImpl::ParseCompare() {
  const int line = cur().line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  ExprPtr cmp;
  while (true) {
    CompareOp op;
    if (IsCompareOp(cur(), &op)) {
      next();
    } else if (SkipName("in")) {
      op = CompareOp::kIn;
    } else if (IsName("not") && peek().type == TokenType::kName && peek().text == "in") {
      next();
      next();
      op = CompareOp::kNotIn;
    } else {
      break;
    }
    if (cmp == nullptr) {
      cmp = NewExpr(ExprKind::kCompare, line);
      cmp->items.push_back(std::move(first));
    }
    JINJA_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
    cmp->ops.push_back(op);
    cmp->items.push_back(std::move(operand));
  }
  return cmp != nullptr ? std::move(cmp) : std::move(first);
}

absl::StatusOr<ExprPtr> ParserImpl::ParseMath1() {
  return ParseLevel({{"+", false, ExprKind::kBinary, BinaryOp::kAdd}, {"-", false, ExprKind::kBinary, BinaryOp::kSub}},
                    &ParserImpl::ParseConcat);
}

absl::StatusOr<ExprPtr> ParserImpl::ParseConcat() {
  const int line = cur().line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
  if (!IsOp("~")) return first;
  ExprPtr concat = NewExpr(ExprKind::kConcat, line);
  concat->items.push_back(std::move(first));
  while (SkipOp("~")) {
    JINJA_ASSIGN_OR_RETURN(ExprPtr item, ParseMath2());
    concat->items.push_back(std::move(item));
  }
  return concat;
}

absl::StatusOr<ExprPtr> ParserImpl::ParseMath2() {
  return ParseLevel({{"*", false, ExprKind::kBinary, BinaryOp::kMul},
                     {"/", false, ExprKind::kBinary, BinaryOp::kDiv},
                     {"//", false, ExprKind::kBinary, BinaryOp::kFloorDiv},
                     {"%", false, ExprKind::kBinary, BinaryOp::kMod}},
                    &ParserImpl::ParsePow);
}

// ** is left-associative in Jinja2, and binds looser than unary minus.
absl::StatusOr<ExprPtr> ParserImpl::ParsePow() {
  return ParseLevel({{"**", false, ExprKind::kBinary, BinaryOp::kPow}}, &ParserImpl::ParseFilteredUnary);
}

absl::StatusOr<ExprPtr> ParserImpl::ParseFilteredUnary() { return ParseUnary(true); }

absl::StatusOr<ExprPtr> ParserImpl::ParseUnary(bool with_filter) {
  NestingGuard nest(&depth_);
  JINJA_RETURN_IF_ERROR(CheckDepth());
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    node = NewExpr(IsOp("-") ? ExprKind::kNeg : ExprKind::kPos, cur().line);
    next();
    JINJA_ASSIGN_OR_RETURN(node->a, ParseUnary(false));
  } else {
    JINJA_ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  JINJA_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    JINJA_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

absl::StatusOr<ExprPtr> ParserImpl::ParsePrimary() {
  const Token& t = cur();
  const int line = t.line;
  if (t.type == TokenType::kName) {
    ExprPtr e = NewExpr(ExprKind::kConst, line);
    if (t.text == "true" || t.text == "True") {
      e->value = Value::Bool(true);
    } else if (t.text == "false" || t.text == "False") {
      e->value = Value::Bool(false);
    } else if (t.text == "none" || t.text == "None") {
      e->value = Value::None();
    } else {
      e->kind = ExprKind::kName;
      e->name = t.text;
      // Jinja2 looks for these names through nested macros and call blocks.
      for (MacroDef* def : macros_) {
        def->uses_caller |= e->name == "caller";
        def->uses_varargs |= e->name == "varargs";
        def->uses_kwargs |= e->name == "kwargs";
      }
    }
    next();
    return e;
  }
  if (t.type == TokenType::kString) {
    std::string text;
    while (cur().type == TokenType::kString) {
      text += cur().text;
      next();
    }
    ExprPtr e = NewExpr(ExprKind::kConst, line);
    e->value = Value::String(std::move(text));
    return e;
  }
  if (t.type == TokenType::kInteger || t.type == TokenType::kFloat) {
    ExprPtr e = NewExpr(ExprKind::kConst, line);
    e->value = t.type == TokenType::kInteger ? Value::Int(t.integer) : Value::Float(t.number);
    next();
    return e;
  }
  if (IsOp("(")) {
    next();
    JINJA_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(true, {}, true));
    JINJA_RETURN_IF_ERROR(ExpectOp(")"));
    return e;
  }
  if (IsOp("[")) return ParseList();
  if (IsOp("{")) return ParseDict();
  return Fail(Cat("unexpected '", Describe(t), "'"), line);
}

absl::StatusOr<ExprPtr> ParserImpl::ParseList() {
  ExprPtr e = NewExpr(ExprKind::kList, cur().line);
  next();
  while (!IsOp("]")) {
    if (!e->items.empty()) JINJA_RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp("]")) break;
    JINJA_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
    e->items.push_back(std::move(item));
  }
  JINJA_RETURN_IF_ERROR(ExpectOp("]"));
  return e;
}

absl::StatusOr<ExprPtr> ParserImpl::ParseDict() {
  ExprPtr e = NewExpr(ExprKind::kDict, cur().line);
  next();
  while (!IsOp("}")) {
    if (!e->items.empty()) JINJA_RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp("}")) break;
    JINJA_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
    JINJA_RETURN_IF_ERROR(ExpectOp(":"));
    JINJA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
    e->items.push_back(std::move(key));
    e->items.push_back(std::move(value));
  }
  JINJA_RETURN_IF_ERROR(ExpectOp("}"));
  return e;
}

absl::StatusOr<ExprPtr> ParserImpl::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".") || IsOp("[")) {
      JINJA_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      JINJA_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ParserImpl::ParseCall(ExprPtr node) {
  ExprPtr call = NewExpr(ExprKind::kCall, cur().line);
  call->a = std::move(node);
  JINJA_RETURN_IF_ERROR(ParseCallArgs(&call->args));
  return call;
}

absl::StatusOr<ExprPtr> ParserImpl::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      JINJA_ASSIGN_OR_RETURN(node, ParseFilters(std::move(node), false));
    } else if (IsName("is")) {
      JINJA_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp("(")) {
      JINJA_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ParserImpl::ParseSubscript(ExprPtr node) {
  const int line = cur().line;
  if (SkipOp(".")) {
    const Token& attr = cur();
    if (attr.type == TokenType::kName) {
      ExprPtr e = NewExpr(ExprKind::kGetattr, line);
      e->a = std::move(node);
      e->name = attr.text;
      next();
      return e;
    }
    if (attr.type != TokenType::kInteger) return Fail("expected name or number", attr.line);
    ExprPtr e = NewExpr(ExprKind::kGetitem, line);
    e->a = std::move(node);
    e->b = NewExpr(ExprKind::kConst, line);
    e->b->value = Value::Int(attr.integer);
    next();
    return e;
  }
  next();  // [
  std::vector<ExprPtr> args;
  while (!IsOp("]")) {
    if (!args.empty()) JINJA_RETURN_IF_ERROR(ExpectOp(","));
    JINJA_ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
    args.push_back(std::move(arg));
  }
  JINJA_RETURN_IF_ERROR(ExpectOp("]"));
  ExprPtr e = NewExpr(ExprKind::kGetitem, line);
  e->a = std::move(node);
  if (args.size() == 1) {
    e->b = std::move(args[0]);
  } else {
    e->b = NewExpr(ExprKind::kTuple, line);
    e->b->items = std::move(args);
  }
  return e;
}

absl::StatusOr<ExprPtr> ParserImpl::ParseSubscribed() {
  ExprPtr slice = NewExpr(ExprKind::kSlice, cur().line);
  if (!SkipOp(":")) {
    JINJA_ASSIGN_OR_RETURN(ExprPtr start, ParseExpression(true));
    if (!SkipOp(":")) return start;
    slice->a = std::move(start);
  }
  if (!IsOp(":") && !IsOp("]") && !IsOp(",")) {
    JINJA_ASSIGN_OR_RETURN(slice->b, ParseExpression(true));
  }
  if (SkipOp(":") && !IsOp("]") && !IsOp(",")) {
    JINJA_ASSIGN_OR_RETURN(slice->c, ParseExpression(true));
  }
  return slice;
}

absl::Status ParserImpl::ParseCallArgs(ArgsExpr* args) {
  const int line = cur().line;
  JINJA_RETURN_IF_ERROR(ExpectOp("("));
  const auto ensure = [&](bool ok) {
    return ok ? absl::OkStatus() : Fail("invalid syntax for function call expression", line);
  };
  bool require_comma = false;
  while (!IsOp(")")) {
    if (require_comma) {
      JINJA_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
    }
    if (SkipOp("*")) {
      JINJA_RETURN_IF_ERROR(ensure(args->star == nullptr && args->star_star == nullptr));
      JINJA_ASSIGN_OR_RETURN(args->star, ParseExpression(true));
    } else if (SkipOp("**")) {
      JINJA_RETURN_IF_ERROR(ensure(args->star_star == nullptr));
      JINJA_ASSIGN_OR_RETURN(args->star_star, ParseExpression(true));
    } else if (cur().type == TokenType::kName && peek().type == TokenType::kOperator && peek().text == "=") {
      JINJA_RETURN_IF_ERROR(ensure(args->star_star == nullptr));
      std::string key = cur().text;
      next();
      next();
      JINJA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      args->keyword.emplace_back(std::move(key), std::move(value));
    } else {
      JINJA_RETURN_IF_ERROR(ensure(args->star == nullptr && args->star_star == nullptr && args->keyword.empty()));
      JINJA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      args->positional.push_back(std::move(value));
    }
    require_comma = true;
  }
  return ExpectOp(")");
}

absl::StatusOr<std::string> ParserImpl::DottedName() {
  JINJA_ASSIGN_OR_RETURN(std::string name, ExpectName());
  while (SkipOp(".")) {
    JINJA_ASSIGN_OR_RETURN(std::string part, ExpectName());
    CatAppend(&name, ".", part);
  }
  return name;
}

absl::StatusOr<ExprPtr> ParserImpl::ParseFilters(ExprPtr node, bool start_inline) {
  while (IsOp("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    ExprPtr filter = NewExpr(ExprKind::kFilter, cur().line);
    JINJA_ASSIGN_OR_RETURN(filter->name, DottedName());
    if (IsOp("(")) JINJA_RETURN_IF_ERROR(ParseCallArgs(&filter->args));
    filter->a = std::move(node);
    node = std::move(filter);
  }
  return node;
}

absl::StatusOr<ExprPtr> ParserImpl::ParseTest(ExprPtr node) {
  const int line = cur().line;
  next();  // is
  const bool negated = SkipName("not");
  ExprPtr test = NewExpr(ExprKind::kTest, line);
  JINJA_ASSIGN_OR_RETURN(test->name, DottedName());
  test->a = std::move(node);
  const TokenType t = cur().type;
  if (IsOp("(")) {
    JINJA_RETURN_IF_ERROR(ParseCallArgs(&test->args));
  } else if ((t == TokenType::kName || t == TokenType::kString || t == TokenType::kInteger || t == TokenType::kFloat ||
              IsOp("[") || IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) return Fail("You cannot chain multiple tests with is");
    JINJA_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    JINJA_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    test->args.positional.push_back(std::move(arg));
  }
  if (!negated) return test;
  ExprPtr not_expr = NewExpr(ExprKind::kNot, line);
  not_expr->a = std::move(test);
  return not_expr;
}

}  // namespace cairn::jinja::parser_internal
