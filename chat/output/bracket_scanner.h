// Bracket depth and string literals over a tool-call block, one byte at a
// time: where a captured block's markers count (outside its strings), where
// its bracketed value closes, and how deep it nests.
#ifndef CAIRN_CHAT_OUTPUT_BRACKET_SCANNER_H_
#define CAIRN_CHAT_OUTPUT_BRACKET_SCANNER_H_

#include <cstddef>

namespace cairn::chat::output {

// Which string literals hide marker-like text and brackets: none, JSON's
// "...", or Python's "..." and '...'.
enum class Quoting { kNone, kJson, kPython };

// Not thread-safe; a value type.
class BracketScanner {
 public:
  explicit BracketScanner(Quoting quoting = Quoting::kJson) : quoting_(quoting) {}

  // Takes the next byte; with kNone, nothing is tracked.
  void Advance(char c) {
    if (quote_ != 0) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == quote_) {
        quote_ = 0;
      }
      return;
    }
    if (quoting_ == Quoting::kNone) return;
    if (c == '"' || (quoting_ == Quoting::kPython && c == '\'')) {
      quote_ = c;
    } else if (c == '{' || c == '[' || c == '(') {
      ++depth_;
      if (depth_ > deepest_) deepest_ = depth_;
    } else if ((c == '}' || c == ']' || c == ')') && depth_ > 0) {
      --depth_;
    }
  }

  // The last byte taken is inside a string literal (or opened one).
  bool in_string() const { return quote_ != 0; }
  // The first bracketed value has closed.
  bool closed() const { return deepest_ > 0 && depth_ == 0; }
  // The deepest nesting seen.
  size_t deepest() const { return deepest_; }

 private:
  Quoting quoting_;
  size_t depth_ = 0;
  size_t deepest_ = 0;
  char quote_ = 0;
  bool escaped_ = false;
};

}  // namespace cairn::chat::output

#endif  // CAIRN_CHAT_OUTPUT_BRACKET_SCANNER_H_
