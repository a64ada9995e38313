// What templates call (internal to the interpreter): Jinja2's filters and
// tests, the globals, the str / list / dict methods, the sandbox's attribute
// and item access, Python's operators, and Python-style argument binding.
#ifndef CAIRN_CHAT_JINJA_BUILTINS_H_
#define CAIRN_CHAT_JINJA_BUILTINS_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"

namespace cairn::jinja {

class Renderer;

using FilterFn = absl::StatusOr<Value> (*)(Renderer& r, const Value& input, CallArgs& args);
using TestFn = absl::StatusOr<bool> (*)(Renderer& r, const Value& input, CallArgs& args);

struct NamedFilter {
  std::string_view name;
  FilterFn fn;
};
struct NamedTest {
  std::string_view name;
  TestFn fn;
};

// The tables of each part (filters_text.cc, filters_seq.cc, predicates.cc).
std::span<const NamedFilter> TextFilters();
std::span<const NamedFilter> SequenceFilters();
std::span<const NamedTest> Tests();

// nullptr when cairn has no such filter / test.
FilterFn FindFilter(std::string_view name);
TestFn FindTest(std::string_view name);
// OK for a known name; TemplateAssertionError "No filter named 'x'." for a
// name Jinja2 does not define; UNIMPLEMENTED for one cairn leaves out.
absl::Status CheckFilterName(std::string_view name);
absl::Status CheckTestName(std::string_view name);

// range, namespace, dict, cycler, joiner, lipsum, raise_exception,
// strftime_now; nullopt for another name.
std::optional<Value> FindGlobal(std::string_view name);

// obj.name and obj[key] as the immutable sandbox resolves them: attribute
// first for `.`, item first for `[]`; methods are bound; what would modify a
// value, and names starting with "_", are unsafe (an Undefined raising
// SecurityError when used); a miss is an Undefined naming it.
absl::StatusOr<Value> GetAttribute(Renderer& r, const Value& obj, std::string_view name);
absl::StatusOr<Value> GetItem(Renderer& r, const Value& obj, const Value& key);
// obj[start:stop:step] (each may be None/undefined).
absl::StatusOr<Value> SliceValue(Renderer& r, const Value& obj, const Value& start, const Value& stop,
                                 const Value& step);
// A str, list or dict method bound to `receiver`, or nullopt.
std::optional<Value> BindMethod(const Value& receiver, std::string_view name);

// Python's operators.
absl::StatusOr<Value> BinaryOperation(Renderer& r, BinaryOp op, const Value& a, const Value& b);
absl::StatusOr<Value> Negate(const Value& v, bool minus);
absl::StatusOr<bool> Compare(CompareOp op, const Value& a, const Value& b);
// `a in b`.
absl::StatusOr<bool> Contains(const Value& container, const Value& item);
// format % args (printf-style, as str.__mod__).
absl::StatusOr<Value> PercentFormat(Renderer& r, const Value& format, const Value& args);
// format.format(*args, **kwargs) (str.format, fields resolved through the
// sandbox).
absl::StatusOr<Value> StrFormat(Renderer& r, const Value& format, const CallArgs& args);
// The UndefinedError (or SecurityError) that using `v` raises.
absl::Status UndefinedFailure(const Value& v);

// Arguments bound to parameter names, Python-style (positional first, then
// by keyword); a parameter not given reads as missing.
class BoundArgs {
 public:
  bool has(size_t i) const { return i < given_.size() && given_[i]; }
  const Value& operator[](size_t i) const { return values_[i]; }
  const Value& get(size_t i, const Value& fallback) const { return has(i) ? values_[i] : fallback; }
  std::vector<Value> rest;                                   // extra positionals (star)
  std::vector<std::pair<std::string, Value>> rest_keywords;  // extra keywords (star)

 private:
  friend absl::StatusOr<BoundArgs> Bind(std::string_view, const CallArgs&, std::initializer_list<std::string_view>,
                                        size_t, bool);
  std::vector<Value> values_;
  std::vector<bool> given_;
};
// TypeError (as Python words it) for too many or unknown arguments, or a
// missing required one. With `star`, extra ones go to rest / rest_keywords.
absl::StatusOr<BoundArgs> Bind(std::string_view function, const CallArgs& args,
                               std::initializer_list<std::string_view> names, size_t required = 0, bool star = false);

// Conversions with Python's errors.
absl::StatusOr<int64_t> ToInt(const Value& v, std::string_view what);
// A string argument (TypeError naming `what` otherwise).
absl::StatusOr<std::string> ToStringArg(const Value& v, std::string_view what);

// A string derived from `inputs` (a filter's or method's result): client
// text when any input has client text, Markup when `markup`.
Value Derived(std::string bytes, std::initializer_list<const Value*> inputs, bool markup = false);
bool HasClient(const Value& v);

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_BUILTINS_H_
