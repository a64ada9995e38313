// gpt-oss's harmony format as a grammar: the reply is a sequence of
// messages, each a header (up to <|message|>) naming its channel and
// possibly a recipient, and a body up to <|end|>, <|return|> or <|call|>.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output/grammars.h"

namespace cairn::chat::output {
namespace {

// The word after `key` in a header: up to whitespace or the next <|...|>.
std::string_view HeaderField(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return {};
  const std::string_view rest = header.substr(at + key.size());
  return rest.substr(0, rest.find_first_of(" \t\n\r<"));
}

}  // namespace

Grammar HarmonyGrammar(bool starts_in_reasoning) {
  enum : int { kHeader, kAnalysis, kFinal, kCall, kBetween };
  struct State {
    std::string recipient;  // of the message whose body is being captured
    bool framed = false;    // a header has been read
  };
  auto state = std::make_shared<State>();
  const Exit next_header{"<|channel|>", kHeader, /*only_at_start=*/false, /*flexible_space=*/false, /*keep=*/true};
  const std::vector<Exit> body_ends = {Exit{"<|end|>", kBetween}, Exit{"<|return|>", kBetween},
                                       Exit{"<|call|>", kBetween}, Exit{"<|start|>", kHeader}, next_header};
  Grammar g;
  g.sections.resize(5);
  Section& header = g.sections[kHeader];
  header.sink = Sink::kCapture;
  header.exits = {Exit{"<|message|>", kFinal}};
  header.on_end = [state](const CaptureEnd& end, CaptureOutput& out) {
    if (end.at_finish) {
      // A reply with no harmony framing at all is plain content; an
      // unfinished header is formatting.
      if (!state->framed && end.text.find("<|") == std::string_view::npos) out.Content(TrimSpace(end.text));
      return int{kBetween};
    }
    state->framed = true;
    std::string_view recipient = HeaderField(end.text, "to=");
    if (!recipient.empty()) {
      if (recipient.starts_with("functions.")) recipient.remove_prefix(std::string_view("functions.").size());
      state->recipient.assign(recipient);
      return int{kCall};
    }
    return HeaderField(end.text, "<|channel|>") == "analysis" ? int{kAnalysis} : int{kFinal};
  };
  g.sections[kAnalysis].sink = Sink::kReasoning;
  g.sections[kAnalysis].exits = body_ends;
  g.sections[kFinal].sink = Sink::kContent;
  g.sections[kFinal].exits = body_ends;
  Section& call = g.sections[kCall];
  call.sink = Sink::kCapture;
  call.exits = body_ends;
  call.quoting = Quoting::kJson;
  call.on_end = [state](const CaptureEnd& end, CaptureOutput& out) {
    out.Call(CallWithArgumentsText(state->recipient, end.text));
    return end.next;
  };
  g.sections[kBetween].sink = Sink::kContent;
  g.sections[kBetween].exits = {Exit{"<|start|>", kHeader}, next_header};
  g.start = starts_in_reasoning ? kAnalysis : kHeader;
  if (starts_in_reasoning) state->framed = true;
  return g;
}

}  // namespace cairn::chat::output
