// The grammar (grammar_parser.h) of each output format; what each parses
// is documented in output_parser.h.
#ifndef CAIRN_CHAT_OUTPUT_GRAMMARS_H_
#define CAIRN_CHAT_OUTPUT_GRAMMARS_H_

#include <string_view>

#include "chat/output/grammar_parser.h"
#include "chat/output/output_format.h"
#include "chat/output/tool_call_syntax.h"

namespace cairn::chat::output {

// The grammar of `format`, starting inside reasoning when
// starts_in_reasoning (where the format has reasoning).
Grammar GrammarFor(OutputFormat format, bool starts_in_reasoning);

// gpt-oss's harmony channels (harmony_grammar.cc).
Grammar HarmonyGrammar(bool starts_in_reasoning);

// Reports a parsed block: its calls; else a call with raw arguments when a
// name was found; else the block, markers included, as content.
void ReportBlock(const ParsedBlock& block, const CaptureEnd& end, CaptureOutput& out);

}  // namespace cairn::chat::output

#endif  // CAIRN_CHAT_OUTPUT_GRAMMARS_H_
