// The template lexer: source text into tokens, as Jinja2's lexer does with
// trim_blocks and lstrip_blocks on (the environment transformers uses).
//
// Newlines are normalized to "\n" and one trailing newline of the source is
// dropped (keep_trailing_newline off). Outside tags the source is data;
// `{{ }}`, `{% %}` and `{# #}` open tags, `{% raw %}...{% endraw %}` is data.
// Whitespace control: a `-` after the opening delimiter strips all whitespace
// before the tag, a `-` before the closing one all whitespace after it; a `+`
// keeps it. lstrip_blocks strips the spaces and tabs between a line's start
// and a block or comment tag; trim_blocks drops the first newline after a
// block or comment tag. Inside brackets, `}}` and `%}` do not close a tag.
#ifndef CAIRN_CHAT_JINJA_LEXER_H_
#define CAIRN_CHAT_JINJA_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace cairn::jinja {

enum class TokenType : uint8_t {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEof,
};

struct Token {
  TokenType type;
  int line;
  std::string text;  // data, name, operator or the string's value
  int64_t integer = 0;
  double number = 0;
};

// The tokens of `source`, ending with kEof. TemplateSyntaxError (with its
// line) for an unterminated comment or raw block, a stray character, an
// unbalanced bracket or a malformed string escape.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_LEXER_H_
