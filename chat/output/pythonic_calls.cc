#include "chat/output/pythonic_calls.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"

namespace cairn::chat::output {
namespace {

bool IsIdentifierChar(char c, bool first) {
  const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return letter || (!first && c >= '0' && c <= '9');
}

// Reads Python calls and literals from text; every method returns nullopt
// (or false) on text it does not accept, leaving the position undefined.
class PythonReader {
 public:
  explicit PythonReader(std::string_view text) : text_(text) {}

  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }

  bool Eat(char c) {
    SkipSpace();
    if (pos_ == text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  // NAME(key=literal, ...)
  std::optional<ToolCall> Call() {
    std::optional<std::string> name = Identifier(/*dotted=*/true);
    if (!name.has_value() || !Eat('(')) return std::nullopt;
    Json arguments = Json::object();
    while (!Eat(')')) {
      std::optional<std::string> key = Identifier(/*dotted=*/false);
      if (!key.has_value() || !Eat('=')) return std::nullopt;
      std::optional<Json> value = Literal(1);
      if (!value.has_value()) return std::nullopt;
      arguments[*key] = std::move(*value);
      if (Eat(')')) break;
      if (!Eat(',')) return std::nullopt;
    }
    return CallWithArgumentsValue(std::move(*name), &arguments);
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  std::optional<std::string> Identifier(bool dotted) {
    SkipSpace();
    const size_t begin = pos_;
    bool first = true;
    while (pos_ < text_.size() && (IsIdentifierChar(text_[pos_], first) || (dotted && !first && text_[pos_] == '.'))) {
      first = text_[pos_] == '.';
      ++pos_;
    }
    if (pos_ == begin || first) return std::nullopt;
    return std::string(text_.substr(begin, pos_ - begin));
  }

  std::optional<Json> Literal(size_t depth) {
    if (depth > kMaxNesting) return std::nullopt;
    SkipSpace();
    if (pos_ == text_.size()) return std::nullopt;
    const char c = text_[pos_];
    if (c == '"' || c == '\'') return String();
    if (c == '[' || c == '(') {
      ++pos_;
      return Sequence(c == '[' ? ']' : ')', depth);
    }
    if (c == '{') {
      ++pos_;
      return Dict(depth);
    }
    if (c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9')) return Number();
    const std::optional<std::string> word = Identifier(/*dotted=*/false);
    if (word == "True") return Json(true);
    if (word == "False") return Json(false);
    if (word == "None") return Json(nullptr);
    return std::nullopt;
  }

  // A quoted string; its escapes are C's, as Python's nearly are (an escape
  // C lacks makes the string unparsed).
  std::optional<Json> String() {
    const char quote = text_[pos_++];
    const size_t begin = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) pos_ += text_[pos_] == '\\' ? 2 : 1;
    if (pos_ >= text_.size()) return std::nullopt;
    const std::string_view body = text_.substr(begin, pos_ - begin);
    ++pos_;
    std::string out;
    if (!absl::CUnescape(absl::string_view(body.data(), body.size()), &out)) return std::nullopt;
    return Json(std::move(out));
  }

  std::optional<Json> Number() {
    const size_t begin = pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      const bool exponent_sign =
          (c == '-' || c == '+') && pos_ > begin && (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E');
      if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || exponent_sign ||
            ((c == '-' || c == '+') && pos_ == begin))) {
        break;
      }
      ++pos_;
    }
    const std::string_view text = text_.substr(begin, pos_ - begin);
    const absl::string_view token(text.data(), text.size());  // absl's own string_view here
    int64_t integer = 0;
    if (text.find_first_of(".eE") == std::string_view::npos && absl::SimpleAtoi(token, &integer)) {
      return Json(integer);
    }
    double real = 0;
    if (!absl::SimpleAtod(token, &real)) return std::nullopt;
    return Json(real);
  }

  // The elements of a list or tuple, after its opening bracket.
  std::optional<Json> Sequence(char close, size_t depth) {
    Json out = Json::array();
    while (!Eat(close)) {
      std::optional<Json> element = Literal(depth + 1);
      if (!element.has_value()) return std::nullopt;
      out.push_back(std::move(*element));
      if (Eat(close)) break;
      if (!Eat(',')) return std::nullopt;
    }
    return out;
  }

  // The items of a dict, after its '{'.
  std::optional<Json> Dict(size_t depth) {
    Json out = Json::object();
    while (!Eat('}')) {
      std::optional<Json> key = Literal(depth + 1);
      if (!key.has_value() || key->is_structured() || !Eat(':')) return std::nullopt;
      std::optional<Json> value = Literal(depth + 1);
      if (!value.has_value()) return std::nullopt;
      out[key->is_string() ? key->get<std::string>() : DumpJson(*key)] = std::move(*value);
      if (Eat('}')) break;
      if (!Eat(',')) return std::nullopt;
    }
    return out;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// The first call's name and the text inside its parentheses, for a block
// that did not parse.
ParsedBlock Salvage(std::string_view text) {
  ParsedBlock block;
  const size_t open = text.find('(');
  if (open == std::string_view::npos) return block;
  std::string_view name = TrimSpace(text.substr(0, open));
  if (!name.empty() && name.front() == '[') name = TrimSpace(name.substr(1));
  for (char c : name) {
    if (!IsIdentifierChar(c, false) && c != '.') return block;
  }
  const size_t close = text.rfind(')');
  block.name.assign(name);
  block.raw_arguments.assign(TrimSpace(text.substr(
      open + 1, close == std::string_view::npos || close < open ? std::string_view::npos : close - open - 1)));
  return block;
}

}  // namespace

ParsedBlock ParsePythonicCallBlock(std::string_view text) {
  PythonReader reader(text);
  ParsedBlock block;
  const bool list = reader.Eat('[');
  if (!(list && reader.Eat(']'))) {
    while (true) {
      std::optional<ToolCall> call = reader.Call();
      if (!call.has_value()) return Salvage(text);
      block.calls.push_back(std::move(*call));
      if (reader.Eat(',')) {
        if (list && reader.Eat(']')) break;  // a trailing comma
        continue;
      }
      if (list && !reader.Eat(']')) return Salvage(text);
      break;
    }
  }
  if (!reader.AtEnd()) return Salvage(text);
  block.ok = true;
  return block;
}

}  // namespace cairn::chat::output
