// Jinja2's tests (tests.py): `x is defined`, `x is string`, ...
#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/py_string.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

using Args = CallArgs;

template <bool (*Fn)(const Value&)>
absl::StatusOr<bool> Unary(Renderer&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("test", args, {}).status());
  return Fn(v);
}

bool IsDefined(const Value& v) { return !v.is_undefined(); }
bool IsUndefined(const Value& v) { return v.is_undefined(); }
bool IsNone(const Value& v) { return v.is_none(); }
bool IsBoolean(const Value& v) { return v.is_bool(); }
bool IsFalse(const Value& v) { return v.is_bool() && !v.b(); }
bool IsTrue(const Value& v) { return v.is_bool() && v.b(); }
bool IsInteger(const Value& v) { return v.is_int(); }
bool IsFloat(const Value& v) { return v.is_float(); }
bool IsNumber(const Value& v) { return v.is_number(); }
bool IsString(const Value& v) { return v.is_string(); }
bool IsMapping(const Value& v) { return v.is_dict(); }
bool IsEscaped(const Value& v) { return v.markup(); }
// Has __len__ and __getitem__ (Undefined has both).
bool IsSequence(const Value& v) {
  return v.is_undefined() || v.is_string() || v.is_dict() || (v.is_list() && !v.is_generator());
}
// iter(v) works.
bool IsIterable(const Value& v) {
  return v.is_undefined() || v.is_string() || v.is_dict() || v.is_list() ||
         (v.is_object() && v.object()->type_name() == "LoopContext");
}
// Undefined defines __call__ (to raise), so it counts as callable.
bool IsCallable(const Value& v) { return v.is_undefined() || (v.is_object() && v.object()->callable()); }

absl::StatusOr<bool> Odd(Renderer& r, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("test_odd", args, {}).status());
  JINJA_ASSIGN_OR_RETURN(Value m, BinaryOperation(r, BinaryOp::kMod, v, Value::Int(2)));
  return Equals(m, Value::Int(1));
}

absl::StatusOr<bool> Even(Renderer& r, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("test_even", args, {}).status());
  JINJA_ASSIGN_OR_RETURN(Value m, BinaryOperation(r, BinaryOp::kMod, v, Value::Int(2)));
  return Equals(m, Value::Int(0));
}

absl::StatusOr<bool> DivisibleBy(Renderer& r, const Value& v, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("test_divisibleby", args, {"num"}, 1));
  JINJA_ASSIGN_OR_RETURN(Value m, BinaryOperation(r, BinaryOp::kMod, v, a[0]));
  return Equals(m, Value::Int(0));
}

template <CompareOp kOp>
absl::StatusOr<bool> Comparison(Renderer&, const Value& v, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("compare", args, {"other"}, 1));
  return Compare(kOp, v, a[0]);
}

absl::StatusOr<bool> In(Renderer&, const Value& v, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("test_in", args, {"seq"}, 1));
  return Contains(a[0], v);
}

absl::StatusOr<bool> SameAs(Renderer&, const Value& v, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("test_sameas", args, {"other"}, 1));
  const Value& o = a[0];
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case ValueKind::kNone:
    case ValueKind::kUndefined:
      return v.identity() == o.identity();
    case ValueKind::kBool:
      return v.b() == o.b();
    // CPython caches small ints; others are distinct objects.
    case ValueKind::kInt:
      return v.i() == o.i() && v.i() >= -5 && v.i() <= 256;
    default:
      return v.identity() != nullptr && v.identity() == o.identity();
  }
}

template <bool (*Fn)(std::string_view)>
absl::StatusOr<bool> CaseTest(Renderer&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("test", args, {}).status());
  return Fn(ToStr(v));
}

absl::StatusOr<bool> IsFilter(Renderer&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("test_filter", args, {}).status());
  return v.is_string() && FindFilter(v.str()) != nullptr;
}

absl::StatusOr<bool> IsTest(Renderer&, const Value& v, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("test_test", args, {}).status());
  return v.is_string() && FindTest(v.str()) != nullptr;
}

constexpr NamedTest kTests[] = {
    {"!=", Comparison<CompareOp::kNe>},
    {"<", Comparison<CompareOp::kLt>},
    {"<=", Comparison<CompareOp::kLe>},
    {"==", Comparison<CompareOp::kEq>},
    {">", Comparison<CompareOp::kGt>},
    {">=", Comparison<CompareOp::kGe>},
    {"boolean", Unary<IsBoolean>},
    {"callable", Unary<IsCallable>},
    {"defined", Unary<IsDefined>},
    {"divisibleby", DivisibleBy},
    {"eq", Comparison<CompareOp::kEq>},
    {"equalto", Comparison<CompareOp::kEq>},
    {"escaped", Unary<IsEscaped>},
    {"even", Even},
    {"false", Unary<IsFalse>},
    {"filter", IsFilter},
    {"float", Unary<IsFloat>},
    {"ge", Comparison<CompareOp::kGe>},
    {"greaterthan", Comparison<CompareOp::kGt>},
    {"gt", Comparison<CompareOp::kGt>},
    {"in", In},
    {"integer", Unary<IsInteger>},
    {"iterable", Unary<IsIterable>},
    {"le", Comparison<CompareOp::kLe>},
    {"lessthan", Comparison<CompareOp::kLt>},
    {"lower", CaseTest<PyIsLower>},
    {"lt", Comparison<CompareOp::kLt>},
    {"mapping", Unary<IsMapping>},
    {"ne", Comparison<CompareOp::kNe>},
    {"none", Unary<IsNone>},
    {"number", Unary<IsNumber>},
    {"odd", Odd},
    {"sameas", SameAs},
    {"sequence", Unary<IsSequence>},
    {"string", Unary<IsString>},
    {"test", IsTest},
    {"true", Unary<IsTrue>},
    {"undefined", Unary<IsUndefined>},
    {"upper", CaseTest<PyIsUpper>},
};

}  // namespace

std::span<const NamedTest> Tests() { return kTests; }

}  // namespace cairn::jinja
