// Python's arithmetic, comparison, membership and %-formatting operators.
#include <cmath>
#include <limits>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/py_string.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

constexpr std::string_view kOpSymbols[] = {"+", "-", "*", "/", "//", "%", "**"};

std::string TypeOf(const Value& v) { return v.markup() ? "Markup" : PyTypeName(v); }

// A list or tuple (not a generator, range or dict view).
bool IsPlainList(const Value& v) {
  return v.is_list() && v.list().kind != ListKind::kGenerator && v.list().python_type.empty();
}

absl::Status Unsupported2(BinaryOp op, const Value& a, const Value& b) {
  return TypeError(Cat("unsupported operand type(s) for ", kOpSymbols[static_cast<int>(op)], ": '", TypeOf(a),
                       "' and '", TypeOf(b), "'"));
}

absl::Status IntOverflow() { return Unsupported("an integer beyond 64 bits"); }

// Python's float floor division and modulo (CPython's float_divmod).
void FloatDivMod(double a, double b, double* div_out, double* mod_out) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, b);
  }
  double floordiv = 0;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, a / b);
  }
  *div_out = floordiv;
  *mod_out = mod;
}

absl::StatusOr<Value> IntPow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) return TemplateFailure(kZeroDivisionError, "0.0 cannot be raised to a negative power");
    return Value::Float(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return IntOverflow();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return IntOverflow();
  }
  return Value::Int(result);
}

absl::StatusOr<Value> Arithmetic(BinaryOp op, const Value& a, const Value& b) {
  const bool ints = !a.is_float() && !b.is_float();
  const bool client = a.client() || b.client();
  const int64_t x = a.i();
  const int64_t y = b.i();
  int64_t r = 0;
  double fd = 0;
  double fm = 0;
  switch (op) {
    case BinaryOp::kAdd:
      if (!ints) return Value::Float(a.f() + b.f(), client);
      if (__builtin_add_overflow(x, y, &r)) return IntOverflow();
      return Value::Int(r, client);
    case BinaryOp::kSub:
      if (!ints) return Value::Float(a.f() - b.f(), client);
      if (__builtin_sub_overflow(x, y, &r)) return IntOverflow();
      return Value::Int(r, client);
    case BinaryOp::kMul:
      if (!ints) return Value::Float(a.f() * b.f(), client);
      if (__builtin_mul_overflow(x, y, &r)) return IntOverflow();
      return Value::Int(r, client);
    case BinaryOp::kDiv:
      if (b.f() == 0) return TemplateFailure(kZeroDivisionError, "division by zero");
      return Value::Float(a.f() / b.f(), client);
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod:
      if (ints) {
        if (y == 0) {
          return TemplateFailure(kZeroDivisionError, op == BinaryOp::kMod ? "integer modulo by zero"
                                                                          : "integer division or modulo by zero");
        }
        if (x == std::numeric_limits<int64_t>::min() && y == -1) {
          return op == BinaryOp::kMod ? absl::StatusOr<Value>(Value::Int(0, client)) : IntOverflow();
        }
        int64_t q = x / y;
        int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          q -= 1;
        }
        return Value::Int(op == BinaryOp::kMod ? m : q, client);
      }
      if (b.f() == 0) {
        return TemplateFailure(kZeroDivisionError,
                               op == BinaryOp::kMod ? "float modulo" : "float floor division by zero");
      }
      FloatDivMod(a.f(), b.f(), &fd, &fm);
      return Value::Float(op == BinaryOp::kMod ? fm : fd, client);
    case BinaryOp::kPow:
      if (ints) {
        JINJA_ASSIGN_OR_RETURN(Value p, IntPow(x, y));
        return p.is_int() ? Value::Int(p.i(), client) : Value::Float(p.f(), client);
      }
      if (a.f() == 0 && b.f() < 0)
        return TemplateFailure(kZeroDivisionError, "0.0 cannot be raised to a negative power");
      if (a.f() < 0 && b.f() != std::floor(b.f())) return Unsupported("complex numbers");
      return Value::Float(std::pow(a.f(), b.f()), client);
  }
  return Unsupported2(op, a, b);
}

// Markup + str escapes the plain side (markupsafe).
Value EscapedText(const Value& v) {
  if (v.markup()) return v;
  return Derived(HtmlEscape(v.str()), {&v});
}

absl::StatusOr<Value> Concatenate(Renderer& r, const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) {
    const bool markup = a.markup() || b.markup();
    JINJA_RETURN_IF_ERROR(r.Charge(a.str().size() + b.str().size()));
    Text out = markup ? EscapedText(a).text() : a.text();
    out.Append(markup ? EscapedText(b).text() : b.text());
    return markup ? Value::Markup(std::move(out)) : Value::String(std::move(out));
  }
  if (IsPlainList(a) && IsPlainList(b) && a.list().kind == b.list().kind) {
    JINJA_RETURN_IF_ERROR(r.Charge((a.items().size() + b.items().size()) * sizeof(Value)));
    std::vector<Value> items = a.items();
    items.insert(items.end(), b.items().begin(), b.items().end());
    return Value::List(std::move(items), a.list().kind);
  }
  if ((a.is_string() && !a.markup()) || IsPlainList(a)) {
    return TypeError(Cat("can only concatenate ", PyTypeName(a), " (not \"", TypeOf(b), "\") to ", PyTypeName(a)));
  }
  return Unsupported2(BinaryOp::kAdd, a, b);
}

absl::StatusOr<Value> Repeat(Renderer& r, const Value& seq, const Value& count) {
  if (!count.is_int() && !count.is_bool()) {
    return TypeError(Cat("can't multiply sequence by non-int of type '", TypeOf(count), "'"));
  }
  const int64_t n = std::max<int64_t>(0, count.i());
  const size_t unit = seq.is_string() ? seq.str().size() : seq.items().size() * sizeof(Value);
  if (n > 0 && unit > 0 && static_cast<uint64_t>(n) > (uint64_t{1} << 62) / unit) {
    return LimitExceeded("a repeated string or list larger than the output limit");
  }
  JINJA_RETURN_IF_ERROR(r.Charge(unit * static_cast<size_t>(n)));
  if (seq.is_string()) {
    Text out;
    for (int64_t i = 0; i < n; ++i) out.Append(seq.text());
    return seq.markup() ? Value::Markup(std::move(out)) : Value::String(std::move(out));
  }
  std::vector<Value> items;
  for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq.items().begin(), seq.items().end());
  return Value::List(std::move(items), seq.list().kind);
}

bool IsSequence(const Value& v) { return v.is_string() || IsPlainList(v); }

}  // namespace

absl::StatusOr<Value> BinaryOperation(Renderer& r, BinaryOp op, const Value& a, const Value& b) {
  // str % x formats whatever x is (an Undefined prints empty).
  if (op == BinaryOp::kMod && a.is_string()) return PercentFormat(r, a, b);
  if (a.is_undefined()) return UndefinedFailure(a);
  if (b.is_undefined()) return UndefinedFailure(b);
  if (a.is_number() && b.is_number()) return Arithmetic(op, a, b);
  switch (op) {
    case BinaryOp::kAdd:
      return Concatenate(r, a, b);
    case BinaryOp::kMul:
      if (IsSequence(a)) return Repeat(r, a, b);
      if (IsSequence(b)) return Repeat(r, b, a);
      break;
    case BinaryOp::kMod:
      if (a.is_string()) return PercentFormat(r, a, b);
      break;
    default:
      break;
  }
  return Unsupported2(op, a, b);
}

absl::StatusOr<Value> Negate(const Value& v, bool minus) {
  if (v.is_undefined()) return UndefinedFailure(v);
  if (v.is_float()) return Value::Float(minus ? -v.f() : v.f(), v.client());
  if (v.is_int() || v.is_bool()) {
    if (minus && v.i() == std::numeric_limits<int64_t>::min()) return IntOverflow();
    return Value::Int(minus ? -v.i() : v.i(), v.client());
  }
  return TypeError(Cat("bad operand type for unary ", minus ? "-" : "+", ": '", TypeOf(v), "'"));
}

namespace {

// <0, 0, >0 for a < b, equal, a > b; TypeError when Python cannot order them.
absl::StatusOr<int> Order(const Value& a, const Value& b, std::string_view symbol) {
  if (a.is_undefined()) return UndefinedFailure(a);
  if (b.is_undefined()) return UndefinedFailure(b);
  if (a.is_number() && b.is_number()) {
    if (Equals(a, b)) return 0;
    if (!a.is_float() && !b.is_float()) return a.i() < b.i() ? -1 : 1;
    return a.f() < b.f() ? -1 : 1;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (IsPlainList(a) && IsPlainList(b) && a.list().kind == b.list().kind) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return Order(x[i], y[i], symbol);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return TypeError(Cat("'", symbol, "' not supported between instances of '", TypeOf(a), "' and '", TypeOf(b), "'"));
}

}  // namespace

absl::StatusOr<bool> Compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq:
      return Equals(a, b);
    case CompareOp::kNe:
      return !Equals(a, b);
    case CompareOp::kIn:
      return Contains(b, a);
    case CompareOp::kNotIn: {
      auto in = Contains(b, a);
      if (!in.ok()) return in.status();
      return !*in;
    }
    default:
      break;
  }
  static constexpr std::string_view kSymbols[] = {"==", "!=", "<", "<=", ">", ">="};
  JINJA_ASSIGN_OR_RETURN(const int c, Order(a, b, kSymbols[static_cast<int>(op)]));
  switch (op) {
    case CompareOp::kLt:
      return c < 0;
    case CompareOp::kLe:
      return c <= 0;
    case CompareOp::kGt:
      return c > 0;
    case CompareOp::kGe:
      return c >= 0;
    default:
      return false;
  }
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case ValueKind::kString:
      if (!item.is_string()) {
        return TypeError(Cat("'in <string>' requires string as left operand, not ", TypeOf(item)));
      }
      return container.str().find(item.str()) != std::string::npos;
    case ValueKind::kList: {
      const ListData& list = container.list();
      if (list.kind == ListKind::kGenerator) {
        if (list.consumed) return false;
        list.consumed = true;
      }
      for (const Value& v : list.items) {
        if (Equals(v, item)) return true;
      }
      JINJA_RETURN_IF_ERROR(list.error);  // a generator that fails when consumed to its end
      return false;
    }
    case ValueKind::kDict: {
      auto key = HashKey(item);
      if (!key.ok()) return key.status();
      return container.dict().Find(item) != nullptr;
    }
    case ValueKind::kUndefined:
      return false;
    default:
      break;
  }
  return TypeError(Cat("argument of type '", TypeOf(container), "' is not iterable"));
}

}  // namespace cairn::jinja
