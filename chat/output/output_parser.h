// OutputParser: a model's generated text, parsed as it streams, into
// reasoning, content and tool calls.
//
// The parser is fed the reply's text in pieces as the model generates it,
// split anywhere (inside a marker, inside a UTF-8 character), with the
// special tokens of the format rendered as their text (a caller
// detokenizes with DetokenizeOptions::render_special for this; end-of-turn
// tokens that stop generation need not be fed). It returns events:
// reasoning deltas, content deltas, and each tool call as one event once
// its text is complete. Besides a tool call's own text, only text that
// could still be the beginning of a marker (or of a UTF-8 character) is
// held back until it is decided, so content streams with the latency of
// the tokens.
//
// Common to every format but kNone:
// - Whitespace at the edges of each reasoning or content run (at the start
//   of the reply, around a marker, at the end) is formatting, not text: it
//   is dropped. A run of whitespace is therefore held back until the text
//   after it shows whether a marker follows. kNone passes everything
//   through untouched.
// - `<think>` as the first text of the reply opens reasoning, `</think>`
//   closes it (kHarmony uses channels; kApriel, kCohere and kGemma4 their
//   own markers). A template that opens
//   `<think>` in the generation prompt (Qwen3.5 with thinking on ends the
//   prompt with "<think>\n") leaves the model inside reasoning:
//   OutputParserOptions::starts_in_reasoning, decided by
//   PromptOpensReasoning (format_detection.h) from the rendered prompt.
// - Markers are recognised only where the format writes them: inside a
//   tool call's JSON (or Python) strings, marker-like text is argument
//   text. The XML-like formats (kQwenXml, kGlm) do not quote values: their
//   closing marker ends the block wherever it stands.
// - A tool call's arguments are reported as compact JSON of an object
//   (keys in the model's order). When they are not a JSON object, the call
//   is still reported, with `arguments_raw` set and `arguments` holding the
//   model's text as it wrote it. A block that opens a tool call but in
//   which no function name can be found is not a call: the block, markers
//   included, is content.
// - A tool call still open when the reply ends (Finish) is parsed from what
//   was written: complete (e.g. a model that stops right after its JSON
//   without the closing marker) it is a call; with a name but unfinished
//   arguments it is a call with `arguments_raw`; with no name, content.
// - Ids: the format's own where it writes one (kKimiK2 `functions.NAME:IDX`,
//   kMistral's `[CALL_ID]`, an "id" or Cohere's "tool_call_id" in a JSON
//   call object, as Mistral Nemo, Apriel and Cohere write), otherwise
//   OutputParserOptions::make_id (default: "call_" + 24 random
//   alphanumerics, as OpenAI's ids look).
//
// Per format: what it parses, and the texts it expects in the stream.
// - kNone: nothing; every byte is content.
// - kThink: `<think>`...`</think>` reasoning, then content (the reasoning
//   every other format but kNone, kHarmony, kApriel, kCohere and kGemma4
//   has too).
// - kHermes: `<tool_call>{"name": N, "arguments": {...}}</tool_call>`, any
//   number, anywhere in the content (a JSON array of such objects inside one
//   block is several calls; "parameters" is accepted for "arguments").
// - kQwenXml: `<tool_call>\n<function=N>\n<parameter=P>\nVALUE\n</parameter>
//   ...</function>\n</tool_call>`. One newline on each side of VALUE is
//   formatting; VALUE is JSON where it parses as JSON (numbers, booleans,
//   objects, arrays, quoted strings) or is Python's True/False/None (the
//   templates print values with Jinja's `string`), else it is a string.
// - kLlama3: a reply that starts with a JSON object whose first key is
//   "name" or "type" is held until the object closes: with "parameters"
//   (or "arguments") it is a call `{"name": N, "parameters": {...}}`,
//   else content; more calls may follow, separated by whitespace or `;`.
//   `<|python_tag|>` starts a call that runs to `<|eom_id|>` / `<|eot_id|>`
//   or the end: a JSON call object, a built-in call `NAME.call(k=v, ...)`,
//   or else Python code, reported as a call of "python" with {"code": ...}.
// - kHarmony: the reply after the prompt's `<|start|>assistant`: headers
//   `<|channel|>C ... <|message|>` and bodies ended by `<|end|>`,
//   `<|return|>` or `<|call|>`, messages separated by `<|start|>`. Channel
//   analysis is reasoning, final (and commentary without a recipient) is
//   content; a header with a recipient `to=functions.N` (before or after
//   the channel, with or without `<|constrain|>json`) makes its body the
//   arguments of a call of N (other recipients, e.g. browser.search, are
//   the call's name as written).
// - kNemotron: `<TOOLCALL>[{"name": N, "arguments": {...}}, ...]</TOOLCALL>`.
// - kGranite: `<|tool_call|>[{"name": N, "arguments": {...}}, ...]` (the
//   JSON array ends the call); `<response>`, `</response>` (granite 3.3's
//   thinking mode) are dropped.
// - kLfm2: `<|tool_call_start|>[N(a=1, b="x"), ...]<|tool_call_end|>`:
//   Python calls with keyword arguments of Python literals (strings,
//   numbers, True/False/None, lists, dicts, tuples); a JSON array of call
//   objects is accepted too.
// - kDeepSeek: `<｜tool▁calls▁begin｜>` then calls
//   `<｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\n{...}\n```<｜tool▁call▁end｜>`
//   (R1) or `<｜tool▁call▁begin｜>N<｜tool▁sep｜>{...}<｜tool▁call▁end｜>` (V3.1),
//   then `<｜tool▁calls▁end｜>`.
// - kKimiK2: `<|tool_calls_section_begin|>` then calls
//   `<|tool_call_begin|>functions.N:IDX<|tool_call_argument_begin|>{...}<|tool_call_end|>`,
//   then `<|tool_calls_section_end|>`; the id is `functions.N:IDX`.
// - kMistral: `[TOOL_CALLS]N[ARGS]{...}` (Devstral, Small 3.2; optionally
//   `[CALL_ID]ID` before `[ARGS]`, then the id is ID) or
//   `[TOOL_CALLS][{"name": N, "arguments": {...}, "id": ID}, ...]` (Nemo).
// - kFunctionary: `<function=N>{...}</function>`, and `<|python_tag|>` as
//   in kLlama3.
// - kGlm: `<tool_call>N\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>...
//   </tool_call>`, values as in kQwenXml.
// - kApriel: Apriel reasons first (1.6's prompt ends with "Here are my
//   reasoning steps:\n"), so the reply starts in reasoning whatever
//   starts_in_reasoning says, up to `[BEGIN FINAL RESPONSE]` or a tool
//   call block; `[END FINAL RESPONSE]` and `<|end|>` are dropped; calls are
//   `<tool_calls>[{"name": N, "arguments": {...}, "id": ID}, ...]</tool_calls>`.
// - kCohere: `<|START_THINKING|>`...`<|END_THINKING|>` is reasoning,
//   `<|START_RESPONSE|>`, `<|END_RESPONSE|>`, `<|START_TEXT|>`,
//   `<|END_TEXT|>` are dropped,
//   `<|START_ACTION|>[{"tool_call_id": ID, "tool_name": N, "parameters":
//   {...}}, ...]<|END_ACTION|>`; the id is ID.
// - kMiniMax: `<minimax:tool_call>` then calls `<invoke name="N">
//   <parameter name="K">V</parameter>...</invoke>`, then
//   `</minimax:tool_call>`; values as in kQwenXml.
// - kDeepSeekV4: `<｜DSML｜tool_calls>` then calls `<｜DSML｜invoke name="N">
//   <｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>...
//   </｜DSML｜invoke>`, then `</｜DSML｜tool_calls>`; V is a string when
//   string="true", else as in kQwenXml.
// - kGemma4: `<|channel>thought`...`<channel|>` is reasoning (instead of
//   <think>); calls are `<|tool_call>call:N{key:VALUE,...}<tool_call|>`,
//   where strings are delimited by `<|"|>`, keys may be bare and other
//   values are JSON's.
#ifndef CAIRN_CHAT_OUTPUT_OUTPUT_PARSER_H_
#define CAIRN_CHAT_OUTPUT_OUTPUT_PARSER_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chat/output/output_format.h"

namespace cairn::chat::output {

struct ToolCall {
  std::string id;
  std::string name;
  // Compact JSON of an object; the model's raw text when arguments_raw.
  std::string arguments;
  // The arguments did not parse as a JSON object (see the header comment).
  bool arguments_raw = false;

  friend bool operator==(const ToolCall&, const ToolCall&) = default;
};

struct OutputEvent {
  enum class Kind { kReasoning, kContent, kToolCall };
  Kind kind = Kind::kContent;
  std::string text;    // kReasoning, kContent: the delta
  ToolCall tool_call;  // kToolCall

  friend bool operator==(const OutputEvent&, const OutputEvent&) = default;
};

struct FinishedOutput {
  std::vector<OutputEvent> events;  // what was held back
  // Tool calls occurred in the reply (the finish reason "tool_calls").
  bool has_tool_calls = false;
};

struct OutputParserOptions {
  OutputFormat format = OutputFormat::kNone;
  // The generation prompt opened reasoning (PromptOpensReasoning): the reply
  // starts inside it. Ignored by kNone; for kHarmony it means the prompt
  // ended inside an analysis message's body.
  bool starts_in_reasoning = false;
  // Makes the id of a call whose format writes none; null: the default
  // ("call_" + 24 random alphanumerics). Called on the feeding thread.
  std::function<std::string()> make_id;
};

// Not thread-safe: one parser per reply, fed from one thread at a time.
class OutputParser {
 public:
  virtual ~OutputParser() = default;

  // Parses the next piece of the reply (any bytes, possibly empty) and
  // returns the events it completes, in order; consecutive text of one kind
  // is one event. FAILED_PRECONDITION after Finish; nothing else fails (any
  // text is a valid reply: what does not parse is content).
  virtual absl::StatusOr<std::vector<OutputEvent>> Feed(std::string_view piece) = 0;

  // Ends the reply: returns the events of what was held back (an unfinished
  // marker is text of the current kind after all; an open tool call as
  // described in the header comment) and whether any tool call occurred.
  // FAILED_PRECONDITION when called twice.
  virtual absl::StatusOr<FinishedOutput> Finish() = 0;
};

// A parser for options.format. Never fails today (the StatusOr leaves room
// for formats that need configuration).
absl::StatusOr<std::unique_ptr<OutputParser>> CreateOutputParser(OutputParserOptions options);

// The default id maker: "call_" + 24 random alphanumerics.
std::function<std::string()> RandomToolCallIds();

}  // namespace cairn::chat::output

#endif  // CAIRN_CHAT_OUTPUT_OUTPUT_PARSER_H_
