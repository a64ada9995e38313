// Jinja2's compile-time constant folding (its optimizer), internal to
// template.cc: an expression of literals whose evaluation succeeds with a
// plain value (no Undefined, generator or object) becomes that value. It
// changes results in one place: folded, a slice goes through the sandbox's
// getitem (a miss is Undefined); at run time it is Python's own (TypeError).
#ifndef CAIRN_CHAT_JINJA_FOLD_H_
#define CAIRN_CHAT_JINJA_FOLD_H_

#include "chat/jinja/ast.h"

namespace cairn::jinja {

// Folds every foldable expression of `body` in place; what fails to fold
// (an error, a limit) is left for the render to meet.
void FoldConstants(Body& body);

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_FOLD_H_
