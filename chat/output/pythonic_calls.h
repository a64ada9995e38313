// Tool calls written as Python calls (LFM2's `[f(a=1, b="x"), g()]`,
// Llama 3's built-in `brave_search.call(query="x")`), parsed into tool
// calls with JSON arguments.
#ifndef CAIRN_CHAT_OUTPUT_PYTHONIC_CALLS_H_
#define CAIRN_CHAT_OUTPUT_PYTHONIC_CALLS_H_

#include <string_view>

#include "chat/output/tool_call_syntax.h"

namespace cairn::chat::output {

// A list `[call, ...]` or calls separated by commas, each `NAME(k=v, ...)`
// with a dotted NAME and keyword arguments whose values are Python literals:
// strings ('...' or "..." with C's backslash escapes), integers, floats,
// True/False/None, lists, tuples (as JSON arrays) and dicts (keys become
// strings). Nesting beyond kMaxNesting, positional arguments or anything
// else make the block unparsed, with the first call's name salvaged and the
// raw arguments the text inside its parentheses.
ParsedBlock ParsePythonicCallBlock(std::string_view text);

}  // namespace cairn::chat::output

#endif  // CAIRN_CHAT_OUTPUT_PYTHONIC_CALLS_H_
