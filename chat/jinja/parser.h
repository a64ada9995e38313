// The template parser: tokens into a syntax tree, following Jinja2's grammar
// (parser.py) with the loop-controls extension and transformers'
// `{% generation %}` tag.
//
// Statements: if/elif/else, for (tuple targets, `if` filter, `recursive`,
// else), set (names, tuples, `ns.attr`, block set with filters), macro, call
// (with a caller signature), filter blocks, with, print, break/continue
// (inside a loop only), generation. Templates cannot load others: extends,
// include, import and from are UNIMPLEMENTED, as are block and autoescape.
// Expressions as Jinja2 parses them: conditional expressions (else
// optional), or/and/not, chained comparisons with in / not in, + - ~ * / //
// % ** (** left-associative, unary minus binding tighter, as in Jinja2),
// filters, tests (`is [not] name [arg]`), calls with keyword, *args and
// **kwargs arguments, attribute and item access, slices, literals.
// A filter or test cairn does not know is a TemplateAssertionError at parse
// time, except inside an if or a conditional expression, where it fails only
// if evaluated (Jinja2 3.x's rule).
//
// Bounded: nesting (brackets, unary operators, blocks) deeper than
// kMaxParseDepth is RESOURCE_EXHAUSTED, never a stack overflow.
#ifndef CAIRN_CHAT_JINJA_PARSER_H_
#define CAIRN_CHAT_JINJA_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace cairn::jinja {

inline constexpr int kMaxParseDepth = 200;

// The template's statements; TemplateSyntaxError / TemplateAssertionError
// (INVALID_ARGUMENT, with the line) or UNIMPLEMENTED otherwise.
absl::StatusOr<Body> Parse(std::vector<Token> tokens);

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_PARSER_H_
