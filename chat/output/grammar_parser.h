// The streaming engine behind every output format: a format is a Grammar,
// a small state machine of sections (reasoning text, content text, or a
// captured tool-call block) left through marker texts; GrammarParser runs
// one over the reply as it arrives (OutputParser's contract).
//
// Text sections stream their text as it comes, holding back only what could
// still begin one of the section's markers (and a trailing run of
// whitespace, which is dropped when a marker or the end follows; leading
// whitespace of a section is dropped too, unless the section is verbatim).
// A capture section collects its block until one of its markers (outside
// the block's string literals) or, when it ends_when_balanced, until its
// first bracketed value closes; its handler then turns the block into tool
// calls (or content) and names the next section.
#ifndef CAIRN_CHAT_OUTPUT_GRAMMAR_PARSER_H_
#define CAIRN_CHAT_OUTPUT_GRAMMAR_PARSER_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output/bracket_scanner.h"
#include "chat/output/output_parser.h"

namespace cairn::chat::output {

enum class Sink { kContent, kReasoning, kCapture };

// A marker that leaves the current section for section `next`.
struct Exit {
  std::string marker;
  int next = 0;
  // Text sections: only as the section's first text (after whitespace).
  bool only_at_start = false;
  // A ' ' in the marker matches any run of whitespace, none included.
  bool flexible_space = false;
  // The marker's text is not consumed: the next section, a capture,
  // begins with it.
  bool keep = false;
};

// A captured block, handed to its section's handler.
struct CaptureEnd {
  std::string_view opener;  // the marker that opened the capture (empty when kept)
  std::string_view text;    // the block
  std::string_view closer;  // the marker that closed it; empty when it closed
                            // by balance or the reply ended
  bool at_finish = false;   // the reply ended inside the block
  int next = 0;             // the section the grammar names next
};

// What a capture handler reports.
class CaptureOutput {
 public:
  // A tool call; an empty id is replaced by a generated one.
  virtual void Call(ToolCall call) = 0;
  // Text reported verbatim as content (a block that is not a call).
  virtual void Content(std::string_view text) = 0;

 protected:
  ~CaptureOutput() = default;
};

// Turns a block into events; returns the next section (usually end.next).
using CaptureHandler = std::function<int(const CaptureEnd& end, CaptureOutput& out)>;

struct Section {
  Sink sink = Sink::kContent;
  std::vector<Exit> exits;
  // Text sections: whitespace at the edges of runs is dropped (false: every
  // byte is kept, for the plain format).
  bool trim = true;
  // Capture sections:
  Quoting quoting = Quoting::kNone;
  bool ends_when_balanced = false;
  int next_when_balanced = 0;
  CaptureHandler on_end;  // required
};

struct Grammar {
  std::vector<Section> sections;
  int start = 0;
};

// Section indices must be valid and every capture section must have a
// handler (the grammars are the library's own, not input).
std::unique_ptr<OutputParser> CreateGrammarParser(Grammar grammar, std::function<std::string()> make_id);

}  // namespace cairn::chat::output

#endif  // CAIRN_CHAT_OUTPUT_GRAMMAR_PARSER_H_
