// Python's string formatting: printf-style `format % args` (also the
// `format` filter) and str.format with the format-spec mini-language.
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "backends/model/unicode.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/py_string.h"
#include "chat/jinja/py_unicode.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/status_macros.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

struct Spec {
  std::string flags;
  int64_t width = -1;
  int64_t precision = -1;
  char type = 0;
};

// Pads `s` to spec.width characters (left-aligned with '-').
std::string PadText(std::string s, const Spec& spec) {
  if (spec.precision >= 0 && (spec.type == 's' || spec.type == 'r' || spec.type == 'a')) {
    s = std::string(PySubstr(s, 0, spec.precision));
  }
  const bool left = spec.flags.find('-') != std::string::npos;
  return PyPad(s, spec.width, " ", left ? '<' : '>');
}

absl::StatusOr<std::string> FormatNumber(const Value& arg, const Spec& spec) {
  const char t = spec.type;
  const bool integer = t == 'd' || t == 'i' || t == 'u' || t == 'o' || t == 'x' || t == 'X';
  if (!arg.is_number()) {
    if (arg.is_undefined()) return UndefinedFailure(arg);
    return TypeError(Cat("%", std::string(1, t),
                         " format: ", integer && t != 'd' && t != 'i' && t != 'u' ? "an integer" : "a real number",
                         " is required, not ", PyTypeName(arg)));
  }
  if ((t == 'o' || t == 'x' || t == 'X') && arg.is_float()) {
    return TypeError(Cat("%", std::string(1, t), " format: an integer is required, not float"));
  }
  std::string fmt = "%" + spec.flags;
  if (spec.width >= 0) CatAppend(&fmt, spec.width);
  if (spec.precision >= 0) CatAppend(&fmt, ".", spec.precision);
  char buf[512];
  if (integer) {
    const int64_t v = arg.is_float() ? static_cast<int64_t>(arg.f()) : arg.i();
    CatAppend(&fmt, "ll", std::string(1, t == 'i' || t == 'u' ? 'd' : t));
    std::snprintf(buf, sizeof(buf), fmt.c_str(), static_cast<long long>(v));
  } else {
    CatAppend(&fmt, std::string(1, t));
    std::snprintf(buf, sizeof(buf), fmt.c_str(), arg.f());
  }
  return std::string(buf);
}

absl::StatusOr<std::string> FormatOne(const Value& arg, const Spec& spec, bool escape) {
  switch (spec.type) {
    case 's':
    case 'r':
    case 'a': {
      std::string s = spec.type == 's' ? ToStr(arg) : ToRepr(arg);
      if (escape && !arg.markup()) s = HtmlEscape(s);
      return PadText(std::move(s), spec);
    }
    case 'c': {
      std::string s;
      if (arg.is_string() && PyLength(arg.str()) == 1) {
        s = arg.str();
      } else if (arg.is_int() && arg.i() >= 0 && arg.i() <= 0x10FFFF) {
        AppendUtf8(static_cast<uint32_t>(arg.i()), &s);
      } else {
        return TypeError("%c requires int or char");
      }
      return PadText(std::move(s), spec);
    }
    default:
      return FormatNumber(arg, spec);
  }
}

// Parses one conversion after '%' at `i`; advances `i` past it.
absl::Status ParseSpec(std::string_view f, size_t* i, Spec* spec, std::string* key, bool* star_width,
                       bool* star_precision) {
  if (*i < f.size() && f[*i] == '(') {
    const size_t close = f.find(')', *i);
    if (close == std::string_view::npos) return ValueError("incomplete format key");
    *key = std::string(f.substr(*i + 1, close - *i - 1));
    *i = close + 1;
  }
  while (*i < f.size() && std::string_view("-+ #0").find(f[*i]) != std::string_view::npos) spec->flags += f[(*i)++];
  const auto number = [&](int64_t* out, bool* star) {
    if (*i < f.size() && f[*i] == '*') {
      *star = true;
      ++*i;
      return;
    }
    while (*i < f.size() && f[*i] >= '0' && f[*i] <= '9') *out = std::max<int64_t>(*out, 0) * 10 + (f[(*i)++] - '0');
  };
  number(&spec->width, star_width);
  if (*i < f.size() && f[*i] == '.') {
    ++*i;
    spec->precision = 0;
    number(&spec->precision, star_precision);
  }
  while (*i < f.size() && (f[*i] == 'h' || f[*i] == 'l' || f[*i] == 'L')) ++*i;
  if (*i >= f.size()) return ValueError("incomplete format");
  spec->type = f[(*i)++];
  if (std::string_view("srcaduioxXeEfFgG").find(spec->type) == std::string_view::npos) {
    return ValueError(Cat("unsupported format character '", std::string(1, spec->type), "' (0x",
                          absl::Hex(static_cast<uint8_t>(spec->type)), ") at index ", *i - 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Value> PercentFormat(Renderer& r, const Value& format, const Value& args) {
  const std::string_view f = format.str();
  const bool mapping = args.is_dict();
  std::vector<Value> positional;
  if (args.is_list() && args.list().kind == ListKind::kTuple) {
    positional = args.items();
  } else if (!mapping) {
    positional.push_back(args);
  }
  size_t next = 0;
  const auto take = [&]() -> absl::StatusOr<Value> {
    if (next >= positional.size()) return TypeError("not enough arguments for format string");
    return positional[next++];
  };
  std::string out;
  for (size_t i = 0; i < f.size();) {
    if (f[i] != '%') {
      out.push_back(f[i++]);
      continue;
    }
    ++i;
    if (i < f.size() && f[i] == '%') {
      out.push_back('%');
      ++i;
      continue;
    }
    Spec spec;
    std::string key;
    bool star_width = false;
    bool star_precision = false;
    JINJA_RETURN_IF_ERROR(ParseSpec(f, &i, &spec, &key, &star_width, &star_precision));
    if (star_width) {
      JINJA_ASSIGN_OR_RETURN(Value width, take());
      JINJA_ASSIGN_OR_RETURN(spec.width, ToInt(width, "* width"));
    }
    if (star_precision) {
      JINJA_ASSIGN_OR_RETURN(Value precision, take());
      JINJA_ASSIGN_OR_RETURN(spec.precision, ToInt(precision, "* precision"));
    }
    if (spec.width > 1 << 20 || spec.precision > 1 << 20) return LimitExceeded("a format width beyond 1 MiB");
    Value arg;
    if (!key.empty()) {
      if (!mapping) return TypeError("format requires a mapping");
      const Value* found = args.dict().Find(Value::String(key));
      if (found == nullptr) return TemplateFailure("KeyError", PyStrRepr(key));
      arg = *found;
    } else {
      JINJA_ASSIGN_OR_RETURN(arg, take());
    }
    JINJA_ASSIGN_OR_RETURN(std::string piece, FormatOne(arg, spec, format.markup()));
    out += piece;
    JINJA_RETURN_IF_ERROR(r.Charge(piece.size()));
  }
  // Python checks leftovers only for tuples and what has no __getitem__ (a
  // list, a range, a dict or an Undefined counts as a mapping there).
  const bool container = mapping || args.is_undefined() ||
                         (args.is_list() && args.list().kind == ListKind::kList &&
                          (args.list().python_type.empty() || args.list().python_type == "range"));
  if (!container && next < positional.size()) {
    return TypeError("not all arguments converted during string formatting");
  }
  return Derived(std::move(out), {&format, &args}, format.markup());
}

namespace {

struct FormatSpec {
  std::string fill = " ";
  char align = 0;
  char sign = '-';
  bool alternate = false;
  int64_t width = -1;
  int64_t precision = -1;
  char type = 0;
};

absl::StatusOr<FormatSpec> ParseFormatSpec(std::string_view spec) {
  FormatSpec out;
  size_t i = 0;
  const std::vector<PyChar> chars = PyChars(spec);
  const auto is_align = [](uint32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (chars.size() >= 2 && is_align(chars[1].cp)) {
    out.fill = std::string(spec.substr(0, chars[1].offset));
    out.align = spec[chars[1].offset];
    i = chars[1].offset + 1;
  } else if (!spec.empty() && is_align(static_cast<uint8_t>(spec[0]))) {
    out.align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) out.sign = spec[i++];
  if (i < spec.size() && spec[i] == '#') out.alternate = true, ++i;
  if (i < spec.size() && spec[i] == '0') {
    if (out.align == 0) out.fill = "0", out.align = '=';
    ++i;
  }
  const auto number = [&](int64_t* v) {
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') *v = std::max<int64_t>(*v, 0) * 10 + (spec[i++] - '0');
  };
  number(&out.width);
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) return Unsupported("digit grouping in a format spec");
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    out.precision = 0;
    number(&out.precision);
  }
  if (i < spec.size()) out.type = spec[i++];
  if (i != spec.size()) return ValueError("Invalid format specifier");
  if (out.width > 1 << 20 || out.precision > 1 << 20) return LimitExceeded("a format width beyond 1 MiB");
  return out;
}

// format(value, spec) for the values templates hold.
absl::StatusOr<std::string> FormatValue(const Value& v, std::string_view spec_text) {
  if (spec_text.empty()) return ToStr(v);
  JINJA_ASSIGN_OR_RETURN(FormatSpec spec, ParseFormatSpec(spec_text));
  std::string body;
  char default_align = '>';
  if (v.is_string() || (!v.is_number() && spec.type == 0)) {
    if (!v.is_string()) return TypeError(Cat("unsupported format string passed to ", PyTypeName(v), ".__format__"));
    if (spec.type != 0 && spec.type != 's') {
      return ValueError(Cat("Unknown format code '", std::string(1, spec.type), "' for object of type 'str'"));
    }
    body = spec.precision >= 0 ? std::string(PySubstr(v.str(), 0, spec.precision)) : v.str();
    default_align = '<';
  } else if (v.is_number()) {
    char t = spec.type;
    const bool integral =
        !v.is_float() && (t == 0 || t == 'd' || t == 'n' || t == 'b' || t == 'o' || t == 'x' || t == 'X' || t == 'c');
    if (v.is_float() && (t == 'd' || t == 'b' || t == 'o' || t == 'x' || t == 'X' || t == 'c')) {
      return ValueError(Cat("Unknown format code '", std::string(1, t), "' for object of type 'float'"));
    }
    std::string fmt = "%";
    if (spec.sign != '-') fmt.push_back(spec.sign);
    if (spec.alternate) fmt.push_back('#');
    char buf[512];
    if (integral && t == 'b') {
      uint64_t x = static_cast<uint64_t>(v.i() < 0 ? -v.i() : v.i());
      do {
        body.insert(body.begin(), static_cast<char>('0' + (x & 1)));
        x >>= 1;
      } while (x);
      if (spec.alternate) body = "0b" + body;
      if (v.i() < 0)
        body = "-" + body;
      else if (spec.sign != '-')
        body = std::string(1, spec.sign) + body;
    } else if (integral && t == 'c') {
      AppendUtf8(static_cast<uint32_t>(v.i()), &body);
    } else if (integral) {
      CatAppend(&fmt, "ll", std::string(1, t == 0 || t == 'n' ? 'd' : t));
      std::snprintf(buf, sizeof(buf), fmt.c_str(), static_cast<long long>(v.i()));
      body = buf;
    } else if (t == 0 && spec.precision < 0) {
      body = ToStr(v.is_float() ? v : Value::Float(v.f()));
      if (spec.sign != '-' && v.f() >= 0) body = std::string(1, spec.sign) + body;
    } else {
      const bool percent = t == '%';
      if (spec.precision >= 0) CatAppend(&fmt, ".", spec.precision);
      fmt.push_back(percent ? 'f' : t == 0 ? 'g' : t == 'n' ? 'g' : t);
      std::snprintf(buf, sizeof(buf), fmt.c_str(), percent ? v.f() * 100 : v.f());
      body = buf;
      if (percent) body += "%";
    }
  } else {
    return TypeError(Cat("unsupported format string passed to ", PyTypeName(v), ".__format__"));
  }
  const char align = spec.align != 0 ? spec.align : default_align;
  if (align == '=') {
    const size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
    return body.substr(0, sign) + PyPad(body.substr(sign), spec.width - static_cast<int64_t>(sign), spec.fill, '>');
  }
  return PyPad(body, spec.width, spec.fill, align);
}

// The argument a replacement field names (its name, then .attr and [key]
// parts looked up through the sandbox), numbering as str.format does.
class FieldResolver {
 public:
  FieldResolver(Renderer& r, const CallArgs& args) : r_(r), args_(args) {}

  absl::StatusOr<Value> Resolve(std::string_view field) {
    const size_t name_end = field.find_first_of(".[");
    JINJA_ASSIGN_OR_RETURN(Value value, Named(field.substr(0, name_end)));
    for (size_t p = name_end; p != std::string_view::npos && p < field.size();) {
      if (field[p] == '.') {
        const size_t end = field.find_first_of(".[", p + 1);
        JINJA_ASSIGN_OR_RETURN(value, GetAttribute(r_, value, field.substr(p + 1, end - p - 1)));
        p = end;
        continue;
      }
      const size_t end = field.find(']', p);
      if (end == std::string_view::npos) return ValueError("Missing ']' in format string");
      const std::string key(field.substr(p + 1, end - p - 1));
      int64_t index = 0;
      const bool digits =
          !key.empty() && key.find_first_not_of("0123456789") == std::string::npos && absl::SimpleAtoi(key, &index);
      JINJA_ASSIGN_OR_RETURN(value, GetItem(r_, value, digits ? Value::Int(index) : Value::String(key)));
      p = end + 1;
    }
    return value;
  }

 private:
  absl::StatusOr<Value> Named(std::string_view name) {
    if (!name.empty() && !(name[0] >= '0' && name[0] <= '9')) {
      for (const auto& [key, v] : args_.keyword) {
        if (key == name) return v;
      }
      return TemplateFailure("KeyError", PyStrRepr(name));
    }
    if (name.empty() ? manual_ : auto_index_ > 0) {
      return ValueError(name.empty() ? "cannot switch from manual field specification to automatic field numbering"
                                     : "cannot switch from automatic field numbering to manual field specification");
    }
    manual_ = manual_ || !name.empty();
    size_t index = name.empty() ? auto_index_++ : 0;
    if (!name.empty() && !absl::SimpleAtoi(std::string(name), &index)) {
      return ValueError("Too many decimal digits in format string");
    }
    if (index >= args_.positional.size()) return TemplateFailure("IndexError", "tuple index out of range");
    return args_.positional[index];
  }

  Renderer& r_;
  const CallArgs& args_;
  size_t auto_index_ = 0;
  bool manual_ = false;
};

}  // namespace

absl::StatusOr<Value> StrFormat(Renderer& r, const Value& format, const CallArgs& args) {
  const std::string_view f = format.str();
  std::string out;
  FieldResolver fields(r, args);
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}' || c == '{') {
      if (i + 1 < f.size() && f[i + 1] == c) {  // {{ and }}
        out.push_back(c);
        ++i;
        continue;
      }
      if (c == '}') return ValueError("Single '}' encountered in format string");
    } else {
      out.push_back(c);
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string_view::npos) return ValueError("Single '{' encountered in format string");
    std::string_view field = f.substr(i + 1, close - i - 1);
    i = close;
    if (field.find('{') != std::string_view::npos) return Unsupported("nested replacement fields in str.format");
    std::string_view spec;
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    char conversion = 0;
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 0;
      field = field.substr(0, bang);
    }
    JINJA_ASSIGN_OR_RETURN(Value value, fields.Resolve(field));
    if (value.is_undefined()) return UndefinedFailure(value);
    if (conversion == 'r' || conversion == 'a') value = Value::String(ToRepr(value), HasClient(value));
    if (conversion == 's') value = Value::String(ToStr(value), HasClient(value));
    JINJA_ASSIGN_OR_RETURN(std::string piece, FormatValue(value, spec));
    if (format.markup() && !value.markup()) piece = HtmlEscape(piece);
    JINJA_RETURN_IF_ERROR(r.Charge(piece.size()));
    out += piece;
  }
  bool client = HasClient(format);
  for (const Value& v : args.positional) client = client || HasClient(v);
  for (const auto& [key, v] : args.keyword) client = client || HasClient(v);
  Text text(std::move(out), client);
  return format.markup() ? Value::Markup(std::move(text)) : Value::String(std::move(text));
}

}  // namespace cairn::jinja
