#include "chat/jinja/py_format.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/jinja/py_unicode.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

// The string's repr is client text when any of its bytes is.
void AppendQuoted(const Text& text, Text* out) { out->Append(PyStrRepr(text.bytes()), text.has_client()); }

void AppendItems(const std::vector<Value>& items, Text* out) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out->Append(", ", false);
    AppendRepr(items[i], out);
  }
}

void AppendContainer(const Value& v, Text* out) {
  if (v.is_dict()) {
    out->Append("{", false);
    bool first = true;
    for (const auto& [key, value] : v.dict().entries()) {
      if (!first) out->Append(", ", false);
      first = false;
      AppendRepr(key, out);
      out->Append(": ", false);
      AppendRepr(value, out);
    }
    out->Append("}", false);
    return;
  }
  const ListData& list = v.list();
  if (list.python_type == "range") {
    out->Append(list.repr, false);
    return;
  }
  if (!list.python_type.empty()) {  // dict_keys([...])
    out->Append(list.python_type + "([", false);
    AppendItems(list.items, out);
    out->Append("])", false);
    return;
  }
  switch (list.kind) {
    case ListKind::kList:
      out->Append("[", false);
      AppendItems(v.items(), out);
      out->Append("]", false);
      return;
    case ListKind::kTuple:
      out->Append("(", false);
      AppendItems(v.items(), out);
      out->Append(v.items().size() == 1 ? ",)" : ")", false);
      return;
    case ListKind::kGenerator:
      out->Append("<generator object>", false);
      return;
  }
}

}  // namespace

std::string PyFloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  const std::string_view sci(buf, result.ptr - buf);
  // sci: [-]d[.ddd]e(+|-)XX
  const size_t e = sci.find('e');
  std::string_view mantissa = sci.substr(0, e);
  int exponent = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exponent);
  std::string sign;
  if (!mantissa.empty() && mantissa[0] == '-') {
    sign = "-";
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  const int decpt = exponent + 1;  // digits[0] is at 10^(decpt-1)
  if (decpt <= -4 || decpt > 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) CatAppend(&out, ".", digits.substr(1));
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (decpt <= 0) return Cat(sign, "0.", std::string(-decpt, '0'), digits);
  if (static_cast<size_t>(decpt) >= digits.size()) {
    return Cat(sign, digits, std::string(decpt - digits.size(), '0'), ".0");
  }
  return Cat(sign, digits.substr(0, decpt), ".", digits.substr(decpt));
}

std::string PyStrRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const PyChar& c : PyChars(s)) {
    const uint32_t cp = c.cp;
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (c.size == 1 && cp == 0xFFFD) {
      // A byte that is not UTF-8 (Python would show a surrogate escape).
      CatAppend(&out, "\\x", absl::Hex(static_cast<uint8_t>(s[c.offset]), absl::kZeroPad2));
    } else if ((PyCharFlags(cp) & kPyPrintable) == 0) {
      if (cp < 0x100) {
        CatAppend(&out, "\\x", absl::Hex(cp, absl::kZeroPad2));
      } else if (cp < 0x10000) {
        CatAppend(&out, "\\u", absl::Hex(cp, absl::kZeroPad4));
      } else {
        CatAppend(&out, "\\U", absl::Hex(cp, absl::kZeroPad8));
      }
    } else {
      out.append(s.substr(c.offset, c.size));
    }
  }
  out.push_back(quote);
  return out;
}

void AppendStr(const Value& v, Text* out) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return;
    case ValueKind::kNone:
      out->Append("None", false);
      return;
    case ValueKind::kBool:
      out->Append(v.b() ? "True" : "False", v.client());
      return;
    case ValueKind::kInt:
      out->Append(Cat(v.i()), v.client());
      return;
    case ValueKind::kFloat:
      out->Append(PyFloatRepr(v.f()), v.client());
      return;
    case ValueKind::kString:
      out->Append(v.text());
      return;
    case ValueKind::kList:
    case ValueKind::kDict:
      AppendContainer(v, out);
      return;
    case ValueKind::kObject:
      out->Append(v.object()->Repr(), false);
      return;
  }
}

void AppendRepr(const Value& v, Text* out) {
  if (v.is_string()) {
    AppendQuoted(v.text(), out);
  } else if (v.is_undefined()) {
    out->Append("Undefined", false);
  } else {
    AppendStr(v, out);
  }
}

Text ToText(const Value& v) {
  if (v.is_string()) return v.text();
  Text out;
  AppendStr(v, &out);
  return out;
}

std::string ToStr(const Value& v) {
  if (v.is_string()) return v.str();
  return ToText(v).bytes();
}

std::string ToRepr(const Value& v) {
  Text out;
  AppendRepr(v, &out);
  return out.bytes();
}

}  // namespace cairn::jinja
