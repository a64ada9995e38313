#include "chat/jinja/lexer.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "backends/model/unicode.h"
#include "chat/jinja/error.h"
#include "chat/jinja/py_format.h"
#include "chat/jinja/py_unicode.h"
#include "chat/jinja/strings.h"

namespace cairn::jinja {

namespace {

// Newlines as "\n"; one trailing newline dropped.
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Length of the whitespace character (Python's \s) at `pos`, or 0.
size_t SpaceAt(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  const uint8_t c = static_cast<uint8_t>(s[pos]);
  if (c < 0x80) return (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) ? 1 : 0;
  const std::vector<PyChar> one = PyChars(s.substr(pos, 4));
  return !one.empty() && PyIsSpace(one[0].cp) && one[0].cp != 0xFFFD ? one[0].size : 0;
}

size_t SkipSpaces(std::string_view s, size_t pos) {
  while (size_t n = SpaceAt(s, pos)) pos += n;
  return pos;
}

bool AllSpaces(std::string_view s) { return SkipSpaces(s, 0) == s.size(); }

// str.rstrip(): the text without its trailing whitespace.
std::string_view RStripSpaces(std::string_view s) {
  size_t keep = 0;
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = SpaceAt(s, pos);
    if (n == 0) {
      pos += std::max<size_t>(1, PyChars(s.substr(pos, std::min<size_t>(4, s.size() - pos)))[0].size);
      keep = pos;
    } else {
      pos += n;
    }
  }
  return s.substr(0, keep);
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<uint8_t>(c) >= 0x80;
}
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's "unicode-escape" decoding of a string literal's body.
absl::StatusOr<std::string> Unescape(std::string_view body) {
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out.push_back(body[i]);
      continue;
    }
    const char e = body[++i];
    switch (e) {
      case '\n':
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 1; k <= n; ++k) {
          const int d = i + k < body.size() ? HexDigit(body[i + k]) : -1;
          if (d < 0) {
            return TemplateFailure(kSyntaxError,
                                   Cat("truncated \\", std::string(1, e), std::string(n, 'X'), " escape"));
          }
          cp = cp * 16 + static_cast<uint32_t>(d);
        }
        if (cp > 0x10FFFF) return TemplateFailure(kSyntaxError, "illegal Unicode character");
        AppendUtf8(cp, &out);
        i += n;
        break;
      }
      case 'N':
        return Unsupported("a \\N{...} escape in a string literal");
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
            cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
          }
          AppendUtf8(cp, &out);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      if (absl::Status st = Root(); !st.ok()) return WithLine(st, line_);
    }
    Emit(TokenType::kEof, "");
    return std::move(out_);
  }

 private:
  void Emit(TokenType type, std::string text) { out_.push_back(Token{type, line_, std::move(text)}); }

  void AddLines(std::string_view consumed) {
    line_ += static_cast<int>(std::count(consumed.begin(), consumed.end(), '\n'));
  }

  // Data before a tag, with the tag's whitespace control applied.
  void EmitData(std::string_view text, char sign, bool lstrip) {
    const std::string_view original = text;
    if (sign == '-') {
      text = RStripSpaces(text);
    } else if (sign != '+' && lstrip) {
      const size_t nl = text.rfind('\n');
      const size_t line_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((line_pos > 0 || line_starting_) && line_pos < text.size() && AllSpaces(text.substr(line_pos))) {
        text = text.substr(0, line_pos);
      }
    }
    if (!text.empty()) Emit(TokenType::kData, std::string(text));
    AddLines(original);
  }

  // Consumes a closing delimiter's whitespace handling at pos_ (after the
  // delimiter): `-` strips all whitespace, trim_blocks one newline.
  void AfterClose(char control, bool trim) {
    const size_t start = pos_;
    if (control == '-') {
      pos_ = SkipSpaces(src_, pos_);
    } else if (control != '+' && trim && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    AddLines(std::string_view(src_).substr(start, pos_ - start));
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  absl::Status Root() {
    size_t open = pos_;
    while (true) {
      open = src_.find('{', open);
      if (open == std::string::npos || open + 1 >= src_.size()) {
        EmitData(std::string_view(src_).substr(pos_), 0, false);
        pos_ = src_.size();
        return absl::OkStatus();
      }
      const char kind = src_[open + 1];
      if (kind == '{' || kind == '%' || kind == '#') break;
      ++open;
    }
    const char kind = src_[open + 1];
    const char sign = open + 2 < src_.size() && (src_[open + 2] == '-' || src_[open + 2] == '+') ? src_[open + 2] : 0;
    const std::string_view text = std::string_view(src_).substr(pos_, open - pos_);
    size_t raw_body = 0;
    char raw_close = 0;
    if (kind == '%' && IsRaw(open + 2 + (sign ? 1 : 0), "raw", &raw_body, &raw_close)) {
      EmitData(text, sign, true);
      AddLines(std::string_view(src_).substr(open, raw_body - open));
      pos_ = raw_body;
      AfterClose(raw_close == '-' ? '-' : '+', false);
      return Raw();
    }
    EmitData(text, sign, kind != '{');
    pos_ = open + 2 + (sign ? 1 : 0);
    line_starting_ = false;
    if (kind == '#') return Comment();
    Emit(kind == '{' ? TokenType::kVariableBegin : TokenType::kBlockBegin, "");
    return Tag(kind == '{');
  }

  // Whether `word` (raw or endraw) follows at `pos` (after `{%` and its
  // sign) as a whole tag; sets where its closing delimiter ends and its
  // control character ('-', '+' or 0).
  bool IsRaw(size_t pos, std::string_view word, size_t* end, char* control) const {
    pos = SkipSpaces(src_, pos);
    if (src_.compare(pos, word.size(), word) != 0) return false;
    pos = SkipSpaces(src_, pos + word.size());
    for (char c : {'+', '-'}) {
      if (pos + 2 < src_.size() && src_[pos] == c && src_[pos + 1] == '%' && src_[pos + 2] == '}') {
        if (c == '+' && word == "raw") return false;  // `{% raw +%}` is no raw tag
        *end = pos + 3;
        *control = c;
        return true;
      }
    }
    if (src_.compare(pos, 2, "%}") != 0) return false;
    *end = pos + 2;
    *control = 0;
    return true;
  }

  absl::Status Raw() {
    for (size_t open = src_.find("{%", pos_); open != std::string::npos; open = src_.find("{%", open + 1)) {
      const char sign = open + 2 < src_.size() && (src_[open + 2] == '-' || src_[open + 2] == '+') ? src_[open + 2] : 0;
      size_t end = 0;
      char control = 0;
      if (!IsRaw(open + 2 + (sign ? 1 : 0), "endraw", &end, &control)) continue;
      EmitData(std::string_view(src_).substr(pos_, open - pos_), sign, true);
      AddLines(std::string_view(src_).substr(open, end - open));
      pos_ = end;
      AfterClose(control, true);
      return absl::OkStatus();
    }
    return TemplateFailure(kSyntaxError, "Missing end of raw directive");
  }

  absl::Status Comment() {
    for (size_t p = pos_; p + 1 < src_.size(); ++p) {
      char control = 0;
      size_t close = p;
      if ((src_[p] == '+' || src_[p] == '-') && src_.compare(p + 1, 2, "#}") == 0) {
        control = src_[p];
        close = p + 3;
      } else if (src_.compare(p, 2, "#}") == 0) {
        close = p + 2;
      } else {
        continue;
      }
      AddLines(std::string_view(src_).substr(pos_, close - pos_));
      pos_ = close;
      AfterClose(control, true);
      return absl::OkStatus();
    }
    return TemplateFailure(kSyntaxError, "Missing end of comment tag");
  }

  // Whether the tag closes at pos_; consumes the delimiter if so.
  bool Close(bool variable) {
    const std::string_view rest = std::string_view(src_).substr(pos_);
    const std::string_view close = variable ? "}}" : "%}";
    char control = 0;
    size_t n = 0;
    if (!variable && rest.size() >= 3 && rest[0] == '+' && rest.substr(1, 2) == close) {
      control = '+', n = 3;
    } else if (rest.size() >= 3 && rest[0] == '-' && rest.substr(1, 2) == close) {
      control = '-', n = 3;
    } else if (rest.substr(0, 2) == close) {
      n = 2;
    } else {
      return false;
    }
    pos_ += n;
    Emit(variable ? TokenType::kVariableEnd : TokenType::kBlockEnd, "");
    AfterClose(control, !variable);
    return true;
  }

  absl::Status Tag(bool variable) {
    std::vector<char> brackets;
    while (pos_ < src_.size()) {
      if (brackets.empty() && Close(variable)) return absl::OkStatus();
      if (const size_t ws = SkipSpaces(src_, pos_); ws > pos_) {
        AddLines(std::string_view(src_).substr(pos_, ws - pos_));
        pos_ = ws;
        continue;
      }
      const char c = src_[pos_];
      if (IsDigit(c)) {
        if (absl::Status st = Number(); !st.ok()) return st;
      } else if (IsNameStart(c)) {
        const size_t start = pos_;
        while (pos_ < src_.size() && IsNameChar(src_[pos_])) ++pos_;
        Emit(TokenType::kName, src_.substr(start, pos_ - start));
      } else if (c == '\'' || c == '"') {
        if (absl::Status st = String(); !st.ok()) return st;
      } else if (absl::Status st = Operator(&brackets); !st.ok()) {
        return st;
      }
    }
    return absl::OkStatus();  // unterminated: the parser reports the end of the template
  }

  absl::Status String() {
    const char quote = src_[pos_];
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) return Unexpected();
    auto value = Unescape(std::string_view(src_).substr(pos_ + 1, p - pos_ - 1));
    if (!value.ok()) return value.status();
    Emit(TokenType::kString, *std::move(value));
    AddLines(std::string_view(src_).substr(pos_, p + 1 - pos_));
    pos_ = p + 1;
    return absl::OkStatus();
  }

  // Digits with single underscores between them, from `p`; returns the end.
  size_t DigitRun(size_t p, int base = 10) const {
    const auto digit = [&](size_t i) {
      if (i >= src_.size()) return false;
      const int d = HexDigit(src_[i]);
      return d >= 0 && d < base;
    };
    if (!digit(p)) return p;
    while (true) {
      while (digit(p)) ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && digit(p + 1)) {
        ++p;
        continue;
      }
      return p;
    }
  }

  absl::Status Number() {
    const size_t start = pos_;
    size_t p = DigitRun(start);
    bool is_float = false;
    if (start == 0 || src_[start - 1] != '.') {
      if (p + 1 < src_.size() && src_[p] == '.' && IsDigit(src_[p + 1])) {
        p = DigitRun(p + 1);
        is_float = true;
      }
      if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
        size_t q = p + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (const size_t e = DigitRun(q); e > q) {
          p = e;
          is_float = true;
        }
      }
    }
    std::string clean;
    if (is_float) {
      for (size_t i = start; i < p; ++i) {
        if (src_[i] != '_') clean.push_back(src_[i]);
      }
      Token t{TokenType::kFloat, line_, clean};
      std::from_chars(clean.data(), clean.data() + clean.size(), t.number);
      out_.push_back(std::move(t));
      pos_ = p;
      return absl::OkStatus();
    }
    return Integer();
  }

  absl::Status Integer() {
    int base = 10;
    size_t begin = pos_;
    size_t end = 0;
    const char prefix = pos_ + 1 < src_.size() ? static_cast<char>(src_[pos_ + 1] | 0x20) : 0;
    if (src_[pos_] == '0' && (prefix == 'b' || prefix == 'o' || prefix == 'x')) {
      base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
      begin = pos_ + 2;
      if (begin < src_.size() && src_[begin] == '_') ++begin;
      end = DigitRun(begin, base);
      if (end == begin) begin = pos_, end = pos_ + 1, base = 10;  // "0" then a name
    } else if (src_[pos_] == '0') {
      end = pos_ + 1;
      while (true) {
        if (end < src_.size() && src_[end] == '0') {
          ++end;
        } else if (end + 1 < src_.size() && src_[end] == '_' && src_[end + 1] == '0') {
          end += 2;
        } else {
          break;
        }
      }
    } else {
      end = DigitRun(pos_);
    }
    uint64_t value = 0;
    for (size_t i = begin; i < end; ++i) {
      if (src_[i] == '_') continue;
      const uint64_t d = static_cast<uint64_t>(HexDigit(src_[i]));
      if (value > (static_cast<uint64_t>(INT64_MAX) - d) / static_cast<uint64_t>(base)) {
        return Unsupported("an integer literal beyond 64 bits");
      }
      value = value * static_cast<uint64_t>(base) + d;
    }
    Token t{TokenType::kInteger, line_, src_.substr(pos_, end - pos_)};
    t.integer = static_cast<int64_t>(value);
    out_.push_back(std::move(t));
    pos_ = end;
    return absl::OkStatus();
  }

  absl::Status Operator(std::vector<char>* brackets) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        Emit(TokenType::kOperator, std::string(op));
        pos_ += 2;
        return absl::OkStatus();
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}=.:|,;<>").find(c) == std::string_view::npos) return Unexpected();
    if (c == '(' || c == '[' || c == '{') {
      brackets->push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets->empty()) return TemplateFailure(kSyntaxError, Cat("unexpected '", std::string(1, c), "'"));
      const char expected = brackets->back();
      brackets->pop_back();
      if (expected != c) {
        return TemplateFailure(kSyntaxError,
                               Cat("unexpected '", std::string(1, c), "', expected '", std::string(1, expected), "'"));
      }
    }
    Emit(TokenType::kOperator, std::string(1, c));
    ++pos_;
    return absl::OkStatus();
  }

  absl::Status Unexpected() const {
    const std::vector<PyChar> one = PyChars(std::string_view(src_).substr(pos_, 4));
    return TemplateFailure(kSyntaxError, Cat("unexpected char ", PyStrRepr(src_.substr(pos_, one[0].size)), " at ",
                                             PyCharIndex(src_, pos_)));
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) { return Lexer(NormalizeNewlines(source)).Run(); }

}  // namespace cairn::jinja
