// str's methods, as Python defines them. A result derived from a client
// string is client text; a Markup receiver gives Markup results.
#include <string>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/methods.h"
#include "chat/jinja/py_string.h"
#include "chat/jinja/py_unicode.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

using Args = CallArgs;

Value Same(const Value& self, std::string bytes, std::initializer_list<const Value*> more = {}) {
  bool client = HasClient(self);
  for (const Value* v : more) client = client || (v != nullptr && HasClient(*v));
  Text text(std::move(bytes), client);
  return self.markup() ? Value::Markup(std::move(text)) : Value::String(std::move(text));
}

absl::StatusOr<std::optional<std::string>> OptionalString(const BoundArgs& a, size_t i, std::string_view what) {
  if (!a.has(i) || a[i].is_none()) return std::optional<std::string>();
  JINJA_ASSIGN_OR_RETURN(std::string s, ToStringArg(a[i], what));
  return std::optional<std::string>(std::move(s));
}

absl::StatusOr<std::optional<int64_t>> OptionalIndex(const BoundArgs& a, size_t i) {
  if (!a.has(i) || a[i].is_none()) return std::optional<int64_t>();
  JINJA_ASSIGN_OR_RETURN(int64_t v, ToInt(a[i], "slice index"));
  return std::optional<int64_t>(v);
}

template <std::string (*Fn)(std::string_view)>
absl::StatusOr<Value> CaseMethod(Renderer&, const Value& self, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("str method", args, {}).status());
  return Same(self, Fn(self.str()));
}

template <bool kLeft, bool kRight>
absl::StatusOr<Value> StripMethod(Renderer&, const Value& self, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("strip", args, {"chars"}));
  JINJA_ASSIGN_OR_RETURN(auto chars, OptionalString(a, 0, "strip arg"));
  return Same(self, std::string(PyStrip(self.str(), chars, kLeft, kRight)), {&a[0]});
}

absl::StatusOr<Value> PartsList(const Value& self, const std::vector<std::string>& parts, const Value& sep) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const std::string& p : parts) items.push_back(Same(self, p, {&sep}));
  return Value::List(std::move(items));
}

template <bool kRight>
absl::StatusOr<Value> SplitMethod(Renderer& r, const Value& self, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("split", args, {"sep", "maxsplit"}));
  JINJA_ASSIGN_OR_RETURN(auto sep, OptionalString(a, 0, "sep"));
  if (sep.has_value() && sep->empty()) return ValueError("empty separator");
  int64_t maxsplit = -1;
  if (a.has(1)) {
    JINJA_ASSIGN_OR_RETURN(maxsplit, ToInt(a[1], "maxsplit"));
  }
  JINJA_RETURN_IF_ERROR(r.Charge(self.str().size()));
  return PartsList(self, kRight ? PyRSplit(self.str(), sep, maxsplit) : PySplit(self.str(), sep, maxsplit), a[0]);
}

absl::StatusOr<Value> SplitLines(Renderer&, const Value& self, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("splitlines", args, {"keepends"}));
  return PartsList(self, PySplitLines(self.str(), Truthy(a[0])), Value());
}

template <bool kEnd>
absl::StatusOr<Value> AffixMethod(Renderer&, const Value& self, Args& args) {
  const char* name = kEnd ? "endswith" : "startswith";
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind(name, args, {"prefix", "start", "end"}, 1));
  JINJA_ASSIGN_OR_RETURN(auto start, OptionalIndex(a, 1));
  JINJA_ASSIGN_OR_RETURN(auto end, OptionalIndex(a, 2));
  const int64_t length = static_cast<int64_t>(PyLength(self.str()));
  int64_t b = 0;
  int64_t e = 0;
  PyClampRange(length, start, end, &b, &e);
  if (start.value_or(0) > length) return Value::Bool(false);
  const std::string_view window = e >= b ? PySubstr(self.str(), b, e) : std::string_view();
  std::vector<Value> candidates;
  if (a[0].is_list() && a[0].list().kind == ListKind::kTuple) {
    candidates = a[0].items();
  } else {
    candidates.push_back(a[0]);
  }
  for (const Value& c : candidates) {
    if (!c.is_string()) {
      return TypeError(Cat(name, " first arg must be str or a tuple of str, not ", PyTypeName(c)));
    }
    if (e < b) continue;
    if (kEnd ? window.ends_with(c.str()) : window.starts_with(c.str())) return Value::Bool(true);
  }
  return Value::Bool(false);
}

absl::StatusOr<Value> Replace(Renderer& r, const Value& self, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("replace", args, {"old", "new", "count"}, 2));
  JINJA_ASSIGN_OR_RETURN(std::string old, ToStringArg(a[0], "replace() argument 1"));
  JINJA_ASSIGN_OR_RETURN(std::string replacement, ToStringArg(a[1], "replace() argument 2"));
  int64_t count = -1;
  if (a.has(2)) {
    JINJA_ASSIGN_OR_RETURN(count, ToInt(a[2], "count"));
  }
  if (self.markup()) {
    if (!a[0].markup()) old = HtmlEscape(old);
    if (!a[1].markup()) replacement = HtmlEscape(replacement);
  }
  JINJA_RETURN_IF_ERROR(r.Charge(PyReplacedSize(self.str(), old, replacement, count)));
  return Same(self, PyReplace(self.str(), old, replacement, count), {&a[0], &a[1]});
}

template <bool kReverse, bool kRaise>
absl::StatusOr<Value> FindMethod(Renderer&, const Value& self, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("find", args, {"sub", "start", "end"}, 1));
  JINJA_ASSIGN_OR_RETURN(std::string sub, ToStringArg(a[0], "must be str"));
  JINJA_ASSIGN_OR_RETURN(auto start, OptionalIndex(a, 1));
  JINJA_ASSIGN_OR_RETURN(auto end, OptionalIndex(a, 2));
  const int64_t at = PyFind(self.str(), sub, start, end, kReverse);
  if (kRaise && at < 0) return ValueError("substring not found");
  return Value::Int(at);
}

absl::StatusOr<Value> Count(Renderer&, const Value& self, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("count", args, {"sub", "start", "end"}, 1));
  JINJA_ASSIGN_OR_RETURN(std::string sub, ToStringArg(a[0], "must be str"));
  JINJA_ASSIGN_OR_RETURN(auto start, OptionalIndex(a, 1));
  JINJA_ASSIGN_OR_RETURN(auto end, OptionalIndex(a, 2));
  return Value::Int(PyCount(self.str(), sub, start, end));
}

absl::StatusOr<Value> Join(Renderer& r, const Value& self, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("join", args, {"iterable"}, 1));
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(a[0]));
  size_t total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return TypeError(Cat("sequence item ", i, ": expected str instance, ", PyTypeName(items[i]), " found"));
    }
    total += items[i].str().size() + self.str().size();
  }
  JINJA_RETURN_IF_ERROR(r.Charge(total));
  Text out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.Append(self.text());
    if (self.markup() && !items[i].markup()) {
      out.Append(HtmlEscape(items[i].str()), items[i].text().has_client());
    } else {
      out.Append(items[i].text());
    }
  }
  return self.markup() ? Value::Markup(std::move(out)) : Value::String(std::move(out));
}

absl::StatusOr<Value> Format(Renderer& r, const Value& self, Args& args) { return StrFormat(r, self, args); }

template <char kAlign>
absl::StatusOr<Value> PadMethod(Renderer& r, const Value& self, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("pad", args, {"width", "fillchar"}, 1));
  JINJA_ASSIGN_OR_RETURN(int64_t width, ToInt(a[0], "width"));
  std::string fill = " ";
  if (a.has(1)) {
    if (!a[1].is_string() || PyLength(a[1].str()) != 1) {
      return TypeError("The fill character must be exactly one character long");
    }
    fill = a[1].str();
  }
  JINJA_RETURN_IF_ERROR(r.Charge(static_cast<size_t>(std::max<int64_t>(width, 0)) * fill.size()));
  return Same(self, PyPad(self.str(), width, fill, kAlign), {&a[1]});
}

absl::StatusOr<Value> Zfill(Renderer& r, const Value& self, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("zfill", args, {"width"}, 1));
  JINJA_ASSIGN_OR_RETURN(int64_t width, ToInt(a[0], "width"));
  JINJA_RETURN_IF_ERROR(r.Charge(static_cast<size_t>(std::max<int64_t>(width, 0))));
  return Same(self, PyZfill(self.str(), width));
}

template <bool kRight>
absl::StatusOr<Value> Partition(Renderer&, const Value& self, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("partition", args, {"sep"}, 1));
  JINJA_ASSIGN_OR_RETURN(std::string sep, ToStringArg(a[0], "must be str"));
  if (sep.empty()) return ValueError("empty separator");
  const std::string& s = self.str();
  const size_t at = kRight ? s.rfind(sep) : s.find(sep);
  std::vector<std::string> parts;
  if (at == std::string::npos) {
    parts = kRight ? std::vector<std::string>{"", "", s} : std::vector<std::string>{s, "", ""};
  } else {
    parts = {s.substr(0, at), sep, s.substr(at + sep.size())};
  }
  std::vector<Value> items;
  for (std::string& p : parts) items.push_back(Same(self, std::move(p), {&a[0]}));
  return Value::List(std::move(items), ListKind::kTuple);
}

template <bool kSuffix>
absl::StatusOr<Value> RemoveAffix(Renderer&, const Value& self, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("removeprefix", args, {"affix"}, 1));
  JINJA_ASSIGN_OR_RETURN(std::string affix, ToStringArg(a[0], "must be str"));
  std::string_view s = self.str();
  if (kSuffix ? s.ends_with(affix) : s.starts_with(affix)) {
    s = kSuffix ? s.substr(0, s.size() - affix.size()) : s.substr(affix.size());
  }
  return Same(self, std::string(s));
}

template <uint16_t kMask>
absl::StatusOr<Value> IsMethod(Renderer&, const Value& self, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("is", args, {}).status());
  return Value::Bool(PyAllChars(self.str(), kMask));
}

template <bool (*Fn)(std::string_view)>
absl::StatusOr<Value> CaseTest(Renderer&, const Value& self, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("is", args, {}).status());
  return Value::Bool(Fn(self.str()));
}

bool IsAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; });
}

constexpr uint16_t kAlnum = kPyAlpha | kPyDecimal | kPyDigit | kPyNumeric;

constexpr NamedMethod kStrMethods[] = {
    {"capitalize", CaseMethod<PyCapitalize>},
    {"casefold", CaseMethod<PyLower>},
    {"center", PadMethod<'^'>},
    {"count", Count},
    {"endswith", AffixMethod<true>},
    {"find", FindMethod<false, false>},
    {"format", Format},
    {"index", FindMethod<false, true>},
    {"isalnum", IsMethod<kAlnum>},
    {"isalpha", IsMethod<kPyAlpha>},
    {"isascii", CaseTest<IsAscii>},
    {"isdecimal", IsMethod<kPyDecimal>},
    {"isdigit", IsMethod<kPyDigit>},
    {"islower", CaseTest<PyIsLower>},
    {"isnumeric", IsMethod<kPyNumeric>},
    {"isspace", IsMethod<kPySpace>},
    {"istitle", CaseTest<PyIsTitle>},
    {"isupper", CaseTest<PyIsUpper>},
    {"join", Join},
    {"ljust", PadMethod<'<'>},
    {"lower", CaseMethod<PyLower>},
    {"lstrip", StripMethod<true, false>},
    {"partition", Partition<false>},
    {"removeprefix", RemoveAffix<false>},
    {"removesuffix", RemoveAffix<true>},
    {"replace", Replace},
    {"rfind", FindMethod<true, false>},
    {"rindex", FindMethod<true, true>},
    {"rjust", PadMethod<'>'>},
    {"rpartition", Partition<true>},
    {"rsplit", SplitMethod<true>},
    {"rstrip", StripMethod<false, true>},
    {"split", SplitMethod<false>},
    {"splitlines", SplitLines},
    {"startswith", AffixMethod<false>},
    {"strip", StripMethod<true, true>},
    {"swapcase", CaseMethod<PySwapcase>},
    {"title", CaseMethod<PyTitle>},
    {"upper", CaseMethod<PyUpper>},
    {"zfill", Zfill},
};

}  // namespace

std::span<const NamedMethod> StrMethods() { return kStrMethods; }

}  // namespace cairn::jinja
