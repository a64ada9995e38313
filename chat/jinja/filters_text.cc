// Jinja2's string and number filters (filters.py), and transformers' tojson.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/json.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/py_string.h"
#include "chat/jinja/py_unicode.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

using Args = CallArgs;

// soft_str: str(value), keeping a Markup string as it is.
Value SoftStr(const Value& v) {
  if (v.is_string()) return v;
  return Value::String(ToText(v));
}

// A result of string filter `input`: client when any input is, Markup when
// the input was (soft_str keeps it).
Value Like(const Value& input, std::string bytes, std::initializer_list<const Value*> more = {}) {
  bool client = HasClient(input);
  for (const Value* v : more) client = client || HasClient(*v);
  Text text(std::move(bytes), client);
  return input.markup() ? Value::Markup(std::move(text)) : Value::String(std::move(text));
}

template <std::string (*Fn)(std::string_view)>
absl::StatusOr<Value> CaseFilter(Renderer&, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("filter", args, {}).status());
  const Value s = SoftStr(input);
  return Like(s, Fn(s.str()));
}

// Jinja2's title: words start after - ( { [ < and whitespace.
std::string JinjaTitle(std::string_view s) {
  std::string out;
  bool start = true;
  for (const PyChar& c : PyChars(s)) {
    const bool separator = PyIsSpace(c.cp) || c.cp == '-' || c.cp == '(' || c.cp == '{' || c.cp == '[' || c.cp == '<';
    const std::string_view bytes = s.substr(c.offset, c.size);
    if (separator) {
      out.append(bytes);
      start = true;
    } else {
      out += start ? PyUpper(bytes) : PyLower(bytes);
      start = false;
    }
  }
  return out;
}

absl::StatusOr<Value> Trim(Renderer&, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_trim", args, {"chars"}));
  std::optional<std::string> chars;
  if (a.has(0) && !a[0].is_none()) {
    JINJA_ASSIGN_OR_RETURN(chars, ToStringArg(a[0], "strip arg"));
  }
  const Value s = SoftStr(input);
  return Like(s, std::string(PyStrip(s.str(), chars, true, true)), {&a[0]});
}

absl::StatusOr<Value> Center(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_center", args, {"width"}));
  int64_t width = 80;
  if (a.has(0)) {
    JINJA_ASSIGN_OR_RETURN(width, ToInt(a[0], "width"));
  }
  JINJA_RETURN_IF_ERROR(r.Charge(static_cast<size_t>(std::max<int64_t>(0, width))));
  const Value s = SoftStr(input);
  return Like(s, PyPad(s.str(), width, " ", '^'));
}

absl::StatusOr<Value> Indent(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_indent", args, {"width", "first", "blank"}));
  // Jinja2 appends "\n" to the value, then splits its lines: what Python
  // does with `s += "\n"` for anything but a string.
  if (input.is_undefined()) return UndefinedFailure(input);
  if (input.is_list() && input.list().kind == ListKind::kList && input.list().python_type.empty()) {
    return TemplateFailure("AttributeError", "'list' object has no attribute 'splitlines'");
  }
  if (input.is_list() && input.list().kind == ListKind::kTuple) {
    return TypeError("can only concatenate tuple (not \"str\") to tuple");
  }
  if (!input.is_string())
    return TypeError(Cat("unsupported operand type(s) for +=: '", PyTypeName(input), "' and 'str'"));
  std::string indention = "    ";
  if (a.has(0)) {
    if (a[0].is_string()) {
      indention = a[0].str();
    } else {
      JINJA_ASSIGN_OR_RETURN(int64_t width, ToInt(a[0], "width"));
      JINJA_RETURN_IF_ERROR(r.Charge(static_cast<size_t>(std::max<int64_t>(0, width))));
      indention = std::string(static_cast<size_t>(std::max<int64_t>(0, width)), ' ');
    }
  }
  const std::vector<std::string> lines = PySplitLines(input.str() + "\n", false);
  JINJA_RETURN_IF_ERROR(r.Charge(input.str().size() + lines.size() * (indention.size() + 1)));
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    const bool indent_line = i > 0 && (Truthy(a[2]) || !lines[i].empty());
    if (indent_line) out += indention;
    out += lines[i];
  }
  if (Truthy(a[1])) out = indention + out;
  return Like(input, std::move(out), {&a[0]});
}

absl::StatusOr<Value> Replace(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_replace", args, {"old", "new", "count"}, 2));
  const std::string s = ToStr(input);
  const std::string old = ToStr(a[0]);
  const std::string replacement = ToStr(a[1]);
  int64_t count = -1;
  if (a.has(2) && !a[2].is_none()) {
    JINJA_ASSIGN_OR_RETURN(count, ToInt(a[2], "count"));
  }
  JINJA_RETURN_IF_ERROR(r.Charge(PyReplacedSize(s, old, replacement, count)));
  return Derived(PyReplace(s, old, replacement, count), {&input, &a[0], &a[1]});
}

absl::StatusOr<Value> Escape(Renderer&, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("escape", args, {}).status());
  if (input.markup()) return input;
  return Derived(HtmlEscape(ToStr(input)), {&input}, true);
}

absl::StatusOr<Value> ForceEscape(Renderer&, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("do_forceescape", args, {}).status());
  return Derived(HtmlEscape(ToStr(input)), {&input}, true);
}

absl::StatusOr<Value> Safe(Renderer&, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("do_mark_safe", args, {}).status());
  return Value::Markup(ToText(input));
}

absl::StatusOr<Value> String(Renderer&, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("soft_str", args, {}).status());
  return SoftStr(input);
}

absl::StatusOr<Value> Format(Renderer& r, const Value& input, Args& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    return TemplateFailure("FilterArgumentError", "can't handle positional and keyword arguments at the same time");
  }
  Value values;
  if (!args.keyword.empty()) {
    Dict d;
    for (auto& [key, value] : args.keyword) JINJA_RETURN_IF_ERROR(d.Set(Value::String(key), value));
    values = Value::FromDict(std::move(d));
  } else {
    values = Value::List(args.positional, ListKind::kTuple);
  }
  return PercentFormat(r, SoftStr(input), values);
}

absl::StatusOr<Value> StripTags(Renderer&, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("do_striptags", args, {}).status());
  const std::string s = ToStr(input);
  // Markup.striptags: drop comments and tags, unescape, collapse whitespace.
  std::string text;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 4, "<!--") == 0) {
      const size_t end = s.find("-->", i + 4);
      if (end == std::string::npos) {
        text += s.substr(i);
        break;
      }
      i = end + 3;
    } else if (s[i] == '<' && s.find('>', i + 1) != std::string::npos) {
      i = s.find('>', i + 1) + 1;
    } else {
      text.push_back(s[i++]);
    }
  }
  std::string out = absl::StrJoin(PySplit(text, std::nullopt, -1), " ");
  for (const auto& [entity, c] : {std::pair<std::string_view, std::string_view>{"&lt;", "<"},
                                  {"&gt;", ">"},
                                  {"&#34;", "\""},
                                  {"&#39;", "'"},
                                  {"&quot;", "\""},
                                  {"&amp;", "&"}}) {
    out = PyReplace(out, entity, c, -1);
  }
  return Derived(std::move(out), {&input});
}

absl::StatusOr<Value> Truncate(Renderer&, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_truncate", args, {"length", "killwords", "end", "leeway"}));
  int64_t length = 255;
  int64_t leeway = 5;
  if (a.has(0)) {
    JINJA_ASSIGN_OR_RETURN(length, ToInt(a[0], "length"));
  }
  if (a.has(3) && !a[3].is_none()) {
    JINJA_ASSIGN_OR_RETURN(leeway, ToInt(a[3], "leeway"));
  }
  const std::string end = a.has(2) ? ToStr(a[2]) : "...";
  const int64_t end_length = static_cast<int64_t>(PyLength(end));
  if (length < end_length)
    return TemplateFailure("AssertionError", Cat("expected length >= ", end_length, ", got ", length));
  if (leeway < 0) return TemplateFailure("AssertionError", Cat("expected leeway >= 0, got ", leeway));
  if (!input.is_string()) {
    // len(s), then s[:n] + end or s[:n].rsplit(...): only strings get through.
    const bool sized = input.is_undefined() || input.is_dict() || (input.is_list() && !input.is_generator());
    if (!sized) return TypeError(Cat("object of type '", PyTypeName(input), "' has no len()"));
    const size_t n = input.is_dict() ? input.dict().size() : input.items().size();
    if (static_cast<int64_t>(n) <= length + leeway) return input;
    return TemplateFailure("AttributeError", Cat("'", PyTypeName(input), "' object has no attribute 'rsplit'"));
  }
  const std::string& s = input.str();
  if (static_cast<int64_t>(PyLength(s)) <= length + leeway) return input;
  std::string head(PySubstr(s, 0, length - end_length));
  if (!Truthy(a[1])) head = PyRSplit(head, std::string(" "), 1)[0];
  return Derived(head + end, {&input, &a[2]});
}

absl::StatusOr<Value> WordCount(Renderer&, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("do_wordcount", args, {}).status());
  int64_t words = 0;
  bool in_word = false;
  for (const PyChar& c : PyChars(ToStr(input))) {
    const bool word = c.cp == '_' || PyIsAlnum(c.cp);
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value::Int(words);
}

// textwrap.wrap without hyphen breaking: greedy words within `width`.
absl::StatusOr<Value> WordWrap(Renderer&, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a,
                         Bind("do_wordwrap", args, {"width", "break_long_words", "wrapstring", "break_on_hyphens"}));
  if (!input.is_string())
    return input.is_undefined() ? UndefinedFailure(input) : TypeError("wordwrap expects a string");
  int64_t width = 79;
  if (a.has(0)) {
    JINJA_ASSIGN_OR_RETURN(width, ToInt(a[0], "width"));
  }
  if (width <= 0) return ValueError(Cat("invalid width ", width, " (must be > 0)"));
  const bool break_long = !a.has(1) || Truthy(a[1]);
  const std::string wrap = a.has(2) && !a[2].is_none() ? ToStr(a[2]) : "\n";
  std::vector<std::string> paragraphs;
  for (const std::string& line : PySplitLines(input.str(), false)) {
    std::vector<std::string> lines;
    std::string current;
    for (std::string word : PySplit(line, std::nullopt, -1)) {
      while (break_long && static_cast<int64_t>(PyLength(word)) > width) {
        if (!current.empty()) lines.push_back(std::move(current)), current.clear();
        lines.emplace_back(PySubstr(word, 0, width));
        word = std::string(PySubstr(word, width, static_cast<int64_t>(PyLength(word))));
      }
      if (!current.empty() && static_cast<int64_t>(PyLength(current) + 1 + PyLength(word)) > width) {
        lines.push_back(std::move(current));
        current.clear();
      }
      if (!word.empty()) current += (current.empty() ? "" : " ") + word;
    }
    if (!current.empty()) lines.push_back(std::move(current));
    paragraphs.push_back(absl::StrJoin(lines, wrap));
  }
  return Derived(absl::StrJoin(paragraphs, wrap), {&input});
}

absl::StatusOr<Value> UrlEncode(Renderer& r, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("do_urlencode", args, {}).status());
  const auto quote = [](std::string_view s, bool for_query) {
    std::string out;
    for (unsigned char c : s) {
      if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || (!for_query && c == '/')) {
        out.push_back(static_cast<char>(c));
      } else {
        CatAppend(&out, "%", absl::AsciiStrToUpper(Cat(absl::Hex(c, absl::kZeroPad2))));
      }
    }
    return for_query ? PyReplace(out, "%20", "+", -1) : out;
  };
  if (input.is_string() || !(input.is_dict() || input.is_list())) return Derived(quote(ToStr(input), false), {&input});
  // A mapping's items, or any other iterable of pairs.
  std::vector<std::pair<Value, Value>> pairs;
  if (input.is_dict()) {
    pairs = input.dict().entries();
  } else {
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(input));
    for (const Value& item : items) {
      JINJA_ASSIGN_OR_RETURN(std::vector<Value> pair, r.Iterate(item));
      if (pair.size() != 2) {
        return ValueError(pair.size() > 2 ? "too many values to unpack (expected 2)"
                                          : Cat("not enough values to unpack (expected 2, got ", pair.size(), ")"));
      }
      pairs.emplace_back(pair[0], pair[1]);
    }
  }
  std::vector<std::string> parts;
  for (const auto& [key, value] : pairs) parts.push_back(Cat(quote(ToStr(key), true), "=", quote(ToStr(value), true)));
  return Derived(absl::StrJoin(parts, "&"), {&input});
}

absl::StatusOr<Value> XmlAttr(Renderer&, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_xmlattr", args, {"autospace"}));
  if (input.is_undefined()) return UndefinedFailure(input);
  if (!input.is_dict())
    return TemplateFailure("AttributeError", Cat("'", PyTypeName(input), "' object has no attribute 'items'"));
  std::vector<std::string> items;
  for (const auto& [key, value] : input.dict().entries()) {
    if (value.is_none() || value.is_undefined()) continue;
    const std::string k = ToStr(key);
    if (k.find_first_of(" \t\n\r\f\v/>=") != std::string::npos) {
      return ValueError(Cat("Invalid character in attribute name: ", PyStrRepr(k)));
    }
    items.push_back(Cat(HtmlEscape(k), "=\"", HtmlEscape(ToStr(value)), "\""));
  }
  std::string out = absl::StrJoin(items, " ");
  if ((!a.has(0) || Truthy(a[0])) && !out.empty()) out = " " + out;
  return Derived(std::move(out), {&input});
}

absl::StatusOr<Value> FileSizeFormat(Renderer&, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_filesizeformat", args, {"binary"}));
  if (!input.is_number())
    return input.is_undefined() ? UndefinedFailure(input) : TypeError("filesizeformat expects a number");
  const bool binary = Truthy(a[0]);
  const double bytes = input.f();
  const double base = binary ? 1024 : 1000;
  static constexpr std::string_view kDecimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static constexpr std::string_view kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  if (bytes == 1) return Value::String("1 Byte");
  if (bytes < base) return Value::String(Cat(static_cast<int64_t>(bytes), " Bytes"));
  char buf[64];
  for (int i = 0; i < 8; ++i) {
    const double unit = std::pow(base, i + 2);
    if (bytes < unit || i == 7) {
      std::snprintf(buf, sizeof(buf), "%.1f %s", base * bytes / unit,
                    std::string(binary ? kBinary[i] : kDecimal[i]).c_str());
      break;
    }
  }
  return Value::String(buf);
}

absl::StatusOr<Value> ToJsonFilter(Renderer& r, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonOptions options;
  options.ensure_ascii = a.has(0) && Truthy(a[0]);
  options.sort_keys = a.has(3) && Truthy(a[3]);
  if (a.has(1) && !a[1].is_none()) {
    if (a[1].is_string()) {
      options.indent = a[1].str();
    } else {
      JINJA_ASSIGN_OR_RETURN(int64_t spaces, ToInt(a[1], "indent"));
      if (spaces > 1 << 16) return LimitExceeded("a tojson indent over 65536 spaces");
      options.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, spaces)), ' ');
    }
  }
  if (a.has(2) && !a[2].is_none()) {
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> seps, r.Iterate(a[2]));
    if (seps.size() != 2) return ValueError(Cat("too many values to unpack (expected 2)"));
    JINJA_ASSIGN_OR_RETURN(options.item_separator, ToStringArg(seps[0], "separator"));
    JINJA_ASSIGN_OR_RETURN(options.key_separator, ToStringArg(seps[1], "separator"));
  }
  JINJA_ASSIGN_OR_RETURN(Text json, ToJson(input, options, r.OutputLimit()));
  JINJA_RETURN_IF_ERROR(r.Charge(json.size()));
  return Value::String(std::move(json));
}

absl::StatusOr<Value> Pprint(Renderer&, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("do_pprint", args, {}).status());
  Text out;
  AppendRepr(input, &out);
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Abs(Renderer&, const Value& input, Args& args) {
  JINJA_RETURN_IF_ERROR(Bind("abs", args, {}).status());
  if (input.is_float()) return Value::Float(std::fabs(input.f()), input.client());
  if (input.is_int() || input.is_bool()) {
    if (input.i() == INT64_MIN) return Unsupported("an integer beyond 64 bits");
    return Value::Int(input.i() < 0 ? -input.i() : input.i(), input.client());
  }
  if (input.is_undefined() && !input.undefined_security()) {
    return TypeError("bad operand type for abs(): 'Undefined'");
  }
  return TypeError(Cat("bad operand type for abs(): '", PyTypeName(input), "'"));
}

// Python's int(text, base): optional sign, digits with single
// underscores, a 0x / 0o / 0b prefix matching the base (or base 0).
std::optional<int64_t> ParsePyInt(std::string_view text, int64_t base) {
  std::string_view s = PyStrip(text, std::nullopt, true, true);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) negative = s[0] == '-', s.remove_prefix(1);
  if (s.size() >= 2 && s[0] == '0') {
    const char p = static_cast<char>(s[1] | 0x20);
    const int64_t prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed != 0 && (base == 0 || base == prefixed)) {
      base = prefixed;
      s.remove_prefix(2);
      if (!s.empty() && s[0] == '_') s.remove_prefix(1);
    }
  }
  if (base == 0) base = 10;
  if (base < 2 || base > 36 || s.empty()) return std::nullopt;
  uint64_t value = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && s[i + 1] != '_') continue;
    const char c = static_cast<char>(s[i] | 0x20);
    const int64_t d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (value > (static_cast<uint64_t>(INT64_MAX) - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) {
      return std::nullopt;
    }
    value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  return negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
}

// Python's float(text).
std::optional<double> ParsePyFloat(std::string_view text) {
  std::string s(PyStrip(text, std::nullopt, true, true));
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      continue;
    }
    clean.push_back(s[i]);
  }
  double value = 0;
  if (clean.empty() || !absl::SimpleAtod(clean, &value)) return std::nullopt;
  return value;
}

absl::StatusOr<Value> IntFilter(Renderer&, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_int", args, {"default", "base"}));
  const Value fallback = a.has(0) ? a[0] : Value::Int(0);
  if (input.is_undefined()) return UndefinedFailure(input);
  if (input.is_int() || input.is_bool()) return Value::Int(input.i(), input.client());
  if (input.is_float()) {
    if (!std::isfinite(input.f()) || std::fabs(input.f()) >= 9.2e18) return fallback;
    return Value::Int(static_cast<int64_t>(input.f()), input.client());
  }
  if (!input.is_string()) return fallback;
  int64_t base = 10;
  if (a.has(1)) {
    JINJA_ASSIGN_OR_RETURN(base, ToInt(a[1], "base"));
  }
  const bool client = HasClient(input);
  if (auto v = ParsePyInt(input.str(), base)) return Value::Int(*v, client);
  if (auto f = ParsePyFloat(input.str()); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18) {
    return Value::Int(static_cast<int64_t>(*f), client);
  }
  return fallback;
}

absl::StatusOr<Value> FloatFilter(Renderer&, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_float", args, {"default"}));
  const Value fallback = a.has(0) ? a[0] : Value::Float(0.0);
  if (input.is_undefined()) return UndefinedFailure(input);
  if (input.is_number()) return Value::Float(input.f(), input.client());
  if (input.is_string()) {
    if (auto f = ParsePyFloat(input.str())) return Value::Float(*f, HasClient(input));
  }
  return fallback;
}

// Python's round(x, digits): correctly rounded, halves to even.
double RoundFloat(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits >= 0) {
    if (digits > 300) return x;
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(digits), x);
    double out = 0;
    return absl::SimpleAtod(buf, &out) ? out : x;
  }
  if (digits < -308) return 0.0 * x;
  const double p = std::pow(10.0, static_cast<double>(-digits));
  return std::nearbyint(x / p) * p;
}

absl::StatusOr<Value> RoundFilter(Renderer&, const Value& input, Args& args) {
  JINJA_ASSIGN_OR_RETURN(BoundArgs a, Bind("do_round", args, {"precision", "method"}));
  int64_t precision = 0;
  if (a.has(0)) {
    JINJA_ASSIGN_OR_RETURN(precision, ToInt(a[0], "precision"));
  }
  const std::string method = a.has(1) ? ToStr(a[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    return TemplateFailure("FilterArgumentError", "method must be common, ceil or floor");
  }
  if (!input.is_number()) {
    return TypeError(Cat("type ", PyTypeName(input), " doesn't define __round__ method"));
  }
  if (method == "common") {
    if (!input.is_float()) return Value::Int(input.i(), input.client());
    return Value::Float(RoundFloat(input.f(), precision), input.client());
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = input.f() * scale;
  return Value::Float((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale, input.client());
}

constexpr NamedFilter kTextFilters[] = {
    {"abs", Abs},
    {"capitalize", CaseFilter<PyCapitalize>},
    {"center", Center},
    {"e", Escape},
    {"escape", Escape},
    {"filesizeformat", FileSizeFormat},
    {"float", FloatFilter},
    {"forceescape", ForceEscape},
    {"format", Format},
    {"indent", Indent},
    {"int", IntFilter},
    {"lower", CaseFilter<PyLower>},
    {"pprint", Pprint},
    {"replace", Replace},
    {"round", RoundFilter},
    {"safe", Safe},
    {"string", String},
    {"striptags", StripTags},
    {"title", CaseFilter<JinjaTitle>},
    {"tojson", ToJsonFilter},
    {"trim", Trim},
    {"truncate", Truncate},
    {"upper", CaseFilter<PyUpper>},
    {"urlencode", UrlEncode},
    {"wordcount", WordCount},
    {"wordwrap", WordWrap},
    {"xmlattr", XmlAttr},
};

}  // namespace

std::span<const NamedFilter> TextFilters() { return kTextFilters; }

}  // namespace cairn::jinja
