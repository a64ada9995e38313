// The syntaxes of one tool-call block as models write them (JSON call
// objects, Qwen's XML, GLM's arg_key/arg_value pairs), parsed into tool
// calls. Pure functions over complete text; the streaming is
// grammar_parser's. Python-style calls are pythonic_calls.h.
#ifndef CAIRN_CHAT_OUTPUT_TOOL_CALL_SYNTAX_H_
#define CAIRN_CHAT_OUTPUT_TOOL_CALL_SYNTAX_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output/output_parser.h"
#include "nlohmann/json.hpp"

namespace cairn::chat::output {

// Objects keep the model's key order.
using Json = nlohmann::ordered_json;

// Deeper JSON (or Python literals) is not parsed: the arguments are then
// reported raw. Bounds the parsers' recursion and the printer's.
inline constexpr size_t kMaxNesting = 64;

// One JSON value (surrounding whitespace allowed); nullopt when the text is
// not exactly one value or nests deeper than kMaxNesting.
std::optional<Json> ParseJson(std::string_view text);

// Compact JSON text of value (invalid UTF-8 in strings replaced by U+FFFD).
std::string DumpJson(const Json& value);

// The result of parsing one block.
struct ParsedBlock {
  bool ok = false;
  std::vector<ToolCall> calls;  // ok: the calls (ids empty unless written)
  // !ok: the function name found despite the error, if any (then the block
  // is a call with raw arguments), and those raw arguments.
  std::string name;
  std::string raw_arguments;
};

// A call of `name` whose arguments are the text `arguments` (JSON of an
// object, else reported raw with surrounding whitespace removed).
ToolCall CallWithArgumentsText(std::string name, std::string_view arguments, std::string id = {});

// A call of `name` with arguments given as a JSON value: an object is the
// arguments; a string holding a JSON object too; null or absent (nullptr)
// is {}; anything else is reported raw (its JSON text).
ToolCall CallWithArgumentsValue(std::string name, const Json* arguments, std::string id = {});

// JSON call objects: {"name": N, "arguments" | "parameters": A, "id": I}
// (also OpenAI's {"type": "function", "function": {...}, "id": I} and
// Cohere's {"tool_call_id": I, "tool_name": N, "parameters": A}); one, a
// JSON array of them, or several separated by whitespace, ',' or ';'.
// Not ok when anything else is in the text (or, with require_arguments, an
// object has neither "arguments" nor "parameters"); the name is then
// salvaged from a `"name": "N"` the text holds, and the raw arguments are
// the whole text.
ParsedBlock ParseJsonCallBlock(std::string_view text, bool require_arguments = false);

// The text between <tool_call> and </tool_call> in Qwen3.5 / Qwen3-Coder's
// syntax: <function=N> <parameter=P>VALUE</parameter>... </function>.
ParsedBlock ParseQwenXmlBlock(std::string_view text);

// The text between <tool_call> and </tool_call> in GLM's syntax:
// N <arg_key>K</arg_key> <arg_value>V</arg_value>...
ParsedBlock ParseGlmBlock(std::string_view text);

// The calls of an invoke block (MiniMax-M2: prefix "", DeepSeek V4:
// prefix "｜DSML｜"): <PREFIXinvoke name="N"> <PREFIXparameter name="K"
// [string="true|false"]>V</PREFIXparameter>... </PREFIXinvoke>...; V is a
// string when string="true", else as ParameterValue reads it.
ParsedBlock ParseInvokeBlock(std::string_view text, std::string_view prefix);

// The text between <|tool_call> and <tool_call|> in Gemma 4's syntax:
// call:N{key:VALUE,...}, where strings are delimited by <|"|>, keys may be
// bare, and other values are JSON's (Python's True/False/None too).
ParsedBlock ParseGemma4Block(std::string_view text);

// A parameter value as the XML syntaxes write it: JSON where it parses,
// Python's True/False/None, else the string itself.
Json ParameterValue(std::string_view text);

// text without leading and trailing whitespace.
std::string_view TrimSpace(std::string_view text);

}  // namespace cairn::chat::output

#endif  // CAIRN_CHAT_OUTPUT_TOOL_CALL_SYNTAX_H_
