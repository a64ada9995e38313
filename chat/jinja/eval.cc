// Expressions: names, operators, calls, filters, tests, literals.
#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/nesting.h"
#include "chat/jinja/objects.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/py_unicode.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

constexpr int kMaxEvalDepth = 1000;
constexpr int kMaxValueDepth = 256;

// A filter or test the parser deferred (parser.h): Jinja2's run-time error.
absl::Status UnknownName(const Expr& e) {
  absl::Status known = e.kind == ExprKind::kFilter ? CheckFilterName(e.name) : CheckTestName(e.name);
  if (known.code() != absl::StatusCode::kInvalidArgument) return known;
  return TemplateFailure(kRuntimeError,
                         Cat("No ", e.kind == ExprKind::kFilter ? "filter" : "test", " named '", e.name, "' found."));
}

}  // namespace

absl::StatusOr<Value> Renderer::Eval(const Expr& e, const FramePtr& frame) {
  NestingGuard guard(&depth_);
  if (depth_ > kMaxEvalDepth) return LimitExceeded(Cat("nesting deeper than ", kMaxEvalDepth, " levels"));
  JINJA_RETURN_IF_ERROR(Step());
  absl::StatusOr<Value> v = EvalNode(e, frame);
  if (!v.ok()) return WithLine(v.status(), e.line);
  if (v->depth() > kMaxValueDepth) {
    return WithLine(LimitExceeded(Cat("a list or dict nested deeper than ", kMaxValueDepth, " levels")), e.line);
  }
  return v;
}

absl::StatusOr<Value> Renderer::EvalNode(const Expr& e, const FramePtr& frame) {
  switch (e.kind) {
    case ExprKind::kConst:
      return e.value;
    case ExprKind::kName:
      return EvalName(e, frame);
    case ExprKind::kGetattr: {
      JINJA_ASSIGN_OR_RETURN(Value obj, Eval(*e.a, frame));
      return GetAttribute(*this, obj, e.name);
    }
    case ExprKind::kGetitem:
      return EvalGetitem(e, frame);
    case ExprKind::kCall:
      return EvalCall(e, frame, nullptr);
    case ExprKind::kFilter:
      return EvalFilter(e, frame, nullptr);
    case ExprKind::kTest:
      return EvalTest(e, frame);
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      JINJA_ASSIGN_OR_RETURN(Value v, Eval(*e.a, frame));
      return Negate(v, e.kind == ExprKind::kNeg);
    }
    case ExprKind::kNot: {
      JINJA_ASSIGN_OR_RETURN(Value v, Eval(*e.a, frame));
      return Value::Bool(!Truthy(v));
    }
    case ExprKind::kBinary: {
      JINJA_ASSIGN_OR_RETURN(Value a, Eval(*e.a, frame));
      JINJA_ASSIGN_OR_RETURN(Value b, Eval(*e.b, frame));
      return BinaryOperation(*this, e.op, a, b);
    }
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      JINJA_ASSIGN_OR_RETURN(Value a, Eval(*e.a, frame));
      if (Truthy(a) == (e.kind == ExprKind::kOr)) return a;
      return Eval(*e.b, frame);
    }
    case ExprKind::kCompare:
      return EvalCompare(e, frame);
    case ExprKind::kConcat: {
      Text out;
      for (const ExprPtr& item : e.items) {
        JINJA_ASSIGN_OR_RETURN(Value v, Eval(*item, frame));
        AppendStr(v, &out);
        if (out.size() > OutputLimit()) return LimitExceeded("a concatenated string larger than the output limit");
      }
      JINJA_RETURN_IF_ERROR(Charge(out.size()));
      return Value::String(std::move(out));
    }
    case ExprKind::kCond: {
      JINJA_ASSIGN_OR_RETURN(Value test, Eval(*e.a, frame));
      if (Truthy(test)) return Eval(*e.b, frame);
      if (e.c != nullptr) return Eval(*e.c, frame);
      return Value::Undefined(
          Cat("the inline if-expression on line ", e.line, " evaluated to false and no else section was defined."));
    }
    case ExprKind::kList:
    case ExprKind::kTuple:
    case ExprKind::kDict:
      return EvalCollection(e, frame);
    case ExprKind::kSlice:
      break;
  }
  return TemplateFailure(kSyntaxError, "a slice outside of brackets");
}

absl::StatusOr<Value> Renderer::EvalName(const Expr& e, const FramePtr& frame) {
  if (const Value* v = frame->Find(e.name)) return *v;
  if (std::optional<Value> global = FindGlobal(e.name)) return *std::move(global);
  return Value::Undefined(Cat("'", e.name, "' is undefined"));
}

absl::StatusOr<Value> Renderer::EvalGetitem(const Expr& e, const FramePtr& frame) {
  JINJA_ASSIGN_OR_RETURN(Value obj, Eval(*e.a, frame));
  if (e.b->kind != ExprKind::kSlice) {
    JINJA_ASSIGN_OR_RETURN(Value key, Eval(*e.b, frame));
    return GetItem(*this, obj, key);
  }
  const Expr& s = *e.b;
  Value bounds[3] = {Value::None(), Value::None(), Value::None()};
  const Expr* parts[3] = {s.a.get(), s.b.get(), s.c.get()};
  for (int i = 0; i < 3; ++i) {
    if (parts[i] != nullptr) {
      JINJA_ASSIGN_OR_RETURN(bounds[i], Eval(*parts[i], frame));
    }
  }
  absl::StatusOr<Value> slice = SliceValue(*this, obj, bounds[0], bounds[1], bounds[2]);
  // Folding, Jinja2 slices through the sandbox's getitem: what Python
  // refuses with a TypeError is Undefined.
  if (folding_ && !slice.ok() && std::string(slice.status().message()).starts_with(kTypeError)) {
    return Value::Undefined(Cat(ObjectTypeRepr(obj), " has no element slice(", ToRepr(bounds[0]), ", ",
                                ToRepr(bounds[1]), ", ", ToRepr(bounds[2]), ")"));
  }
  return slice;
}

absl::StatusOr<CallArgs> Renderer::EvalArgs(const ArgsExpr& args, const FramePtr& frame) {
  CallArgs out;
  for (const ExprPtr& a : args.positional) {
    JINJA_ASSIGN_OR_RETURN(Value v, Eval(*a, frame));
    out.positional.push_back(std::move(v));
  }
  for (const auto& [key, a] : args.keyword) {
    JINJA_ASSIGN_OR_RETURN(Value v, Eval(*a, frame));
    out.keyword.emplace_back(key, std::move(v));
  }
  if (args.star != nullptr) {
    JINJA_ASSIGN_OR_RETURN(Value v, Eval(*args.star, frame));
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    out.positional.insert(out.positional.end(), items.begin(), items.end());
  }
  if (args.star_star != nullptr) {
    JINJA_ASSIGN_OR_RETURN(Value v, Eval(*args.star_star, frame));
    if (!v.is_dict()) return TypeError(Cat("argument after ** must be a mapping, not ", PyTypeName(v)));
    for (const auto& [key, value] : v.dict().entries()) {
      if (!key.is_string()) return TypeError("keywords must be strings");
      out.keyword.emplace_back(key.str(), value);
    }
  }
  return out;
}

absl::StatusOr<Value> Renderer::EvalCall(const Expr& e, const FramePtr& frame, const Value* caller) {
  JINJA_ASSIGN_OR_RETURN(Value callee, Eval(*e.a, frame));
  JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e.args, frame));
  if (caller != nullptr) args.keyword.emplace_back("caller", *caller);
  return Call(callee, std::move(args));
}

absl::StatusOr<Value> Renderer::Call(const Value& callee, CallArgs args) {
  if (callee.is_undefined()) return UndefinedFailure(callee);
  if (callee.is_object() && callee.object()->callable()) return callee.object()->Call(*this, std::move(args));
  return TypeError(Cat("'", PyTypeName(callee), "' object is not callable"));
}

absl::StatusOr<Value> Renderer::EvalFilter(const Expr& e, const FramePtr& frame, const Value* block_input) {
  Value input;
  if (e.a == nullptr) {
    if (block_input != nullptr) input = *block_input;
  } else if (block_input != nullptr && e.a->kind == ExprKind::kFilter) {
    JINJA_ASSIGN_OR_RETURN(input, EvalFilter(*e.a, frame, block_input));
  } else {
    JINJA_ASSIGN_OR_RETURN(input, Eval(*e.a, frame));
  }
  JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e.args, frame));
  if (e.unknown) return UnknownName(e);
  return ApplyFilter(e.name, input, std::move(args));
}

absl::StatusOr<Value> Renderer::ApplyFilter(std::string_view name, const Value& input, CallArgs args) {
  FilterFn fn = FindFilter(name);
  if (fn == nullptr) {
    absl::Status known = CheckFilterName(name);
    if (known.code() != absl::StatusCode::kInvalidArgument) return known;
    return TemplateFailure(kRuntimeError, Cat("No filter named '", name, "'."));
  }
  return fn(*this, input, args);
}

absl::StatusOr<Value> Renderer::EvalTest(const Expr& e, const FramePtr& frame) {
  JINJA_ASSIGN_OR_RETURN(Value input, Eval(*e.a, frame));
  JINJA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e.args, frame));
  if (e.unknown) return UnknownName(e);
  JINJA_ASSIGN_OR_RETURN(bool result, ApplyTest(e.name, input, std::move(args)));
  return Value::Bool(result);
}

absl::StatusOr<bool> Renderer::ApplyTest(std::string_view name, const Value& input, CallArgs args) {
  TestFn fn = FindTest(name);
  if (fn == nullptr) return TemplateFailure(kRuntimeError, Cat("No test named '", name, "'."));
  return fn(*this, input, args);
}

absl::StatusOr<Value> Renderer::EvalCompare(const Expr& e, const FramePtr& frame) {
  JINJA_ASSIGN_OR_RETURN(Value left, Eval(*e.items[0], frame));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    JINJA_ASSIGN_OR_RETURN(Value right, Eval(*e.items[i + 1], frame));
    JINJA_ASSIGN_OR_RETURN(bool holds, Compare(e.ops[i], left, right));
    if (!holds) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

absl::StatusOr<Value> Renderer::EvalCollection(const Expr& e, const FramePtr& frame) {
  std::vector<Value> values;
  values.reserve(e.items.size());
  for (const ExprPtr& item : e.items) {
    JINJA_ASSIGN_OR_RETURN(Value v, Eval(*item, frame));
    values.push_back(std::move(v));
  }
  JINJA_RETURN_IF_ERROR(Charge(values.size() * sizeof(Value)));
  if (e.kind != ExprKind::kDict) {
    return Value::List(std::move(values), e.kind == ExprKind::kTuple ? ListKind::kTuple : ListKind::kList);
  }
  Dict dict;
  for (size_t i = 0; i + 1 < values.size(); i += 2) JINJA_RETURN_IF_ERROR(dict.Set(values[i], values[i + 1]));
  return Value::FromDict(std::move(dict));
}

absl::StatusOr<std::vector<Value>> Renderer::Iterate(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return std::vector<Value>();
    case ValueKind::kList: {
      const ListData& list = v.list();
      JINJA_RETURN_IF_ERROR(Step(1 + static_cast<int64_t>(list.items.size() / 64)));
      if (list.kind != ListKind::kGenerator) return list.items;
      if (list.consumed) return std::vector<Value>();
      list.consumed = true;
      JINJA_RETURN_IF_ERROR(list.error);
      return list.items;
    }
    case ValueKind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().size());
      for (const auto& [key, value] : v.dict().entries()) keys.push_back(key);
      return keys;
    }
    case ValueKind::kString: {
      const bool client = v.text().has_client();
      std::vector<Value> chars;
      for (const PyChar& c : PyChars(v.str())) {
        Text t(v.str().substr(c.offset, c.size), client);
        chars.push_back(v.markup() ? Value::Markup(std::move(t)) : Value::String(std::move(t)));
      }
      JINJA_RETURN_IF_ERROR(Charge(chars.size() * sizeof(Value)));
      return chars;
    }
    default:
      return TypeError(Cat("'", PyTypeName(v), "' object is not iterable"));
  }
}

}  // namespace cairn::jinja
