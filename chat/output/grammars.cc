#include "chat/output/grammars.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/output/pythonic_calls.h"

namespace cairn::chat::output {
namespace {

// The first three sections of every grammar but none and harmony; a
// format's own sections follow.
enum CommonSection : int { kStart = 0, kReasoning = 1, kContent = 2, kFormatSection = 3 };

using BlockParser = ParsedBlock (*)(std::string_view);

Section TextSection(Sink sink, std::vector<Exit> exits) {
  Section s;
  s.sink = sink;
  s.exits = std::move(exits);
  return s;
}

Section CaptureSection(std::vector<Exit> exits, Quoting quoting, CaptureHandler on_end) {
  Section s;
  s.sink = Sink::kCapture;
  s.exits = std::move(exits);
  s.quoting = quoting;
  s.on_end = std::move(on_end);
  return s;
}

// A capture that also ends when its first bracketed value closes.
Section BalancedSection(std::vector<Exit> exits, Quoting quoting, int next, CaptureHandler on_end) {
  Section s = CaptureSection(std::move(exits), quoting, std::move(on_end));
  s.ends_when_balanced = true;
  s.next_when_balanced = next;
  return s;
}

CaptureHandler ParseWith(BlockParser parse) {
  return [parse](const CaptureEnd& end, CaptureOutput& out) {
    ReportBlock(parse(end.text), end, out);
    return end.next;
  };
}

// Builds the common sections: kStart (content, where `open` may begin
// reasoning as the first text), kReasoning up to `close`, kContent; both
// content sections leave through the format's exits.
class GrammarBuilder {
 public:
  GrammarBuilder(std::string open, std::string close, bool starts_in_reasoning) {
    grammar_.sections.resize(kFormatSection);
    grammar_.sections[kStart] = TextSection(Sink::kContent, {});
    if (!open.empty()) grammar_.sections[kStart].exits.push_back(Exit{open, kReasoning, /*only_at_start=*/true});
    grammar_.sections[kReasoning] = TextSection(Sink::kReasoning, {Exit{std::move(close), kContent}});
    grammar_.sections[kContent] = TextSection(Sink::kContent, {});
    grammar_.start = starts_in_reasoning ? kReasoning : kStart;
  }

  explicit GrammarBuilder(bool starts_in_reasoning) : GrammarBuilder("<think>", "</think>", starts_in_reasoning) {}

  // An exit of both content sections.
  GrammarBuilder& ContentExit(Exit exit) {
    grammar_.sections[kStart].exits.push_back(exit);
    grammar_.sections[kContent].exits.push_back(std::move(exit));
    return *this;
  }

  // An exit of the reasoning section.
  GrammarBuilder& ReasoningExit(Exit exit) {
    grammar_.sections[kReasoning].exits.push_back(std::move(exit));
    return *this;
  }

  // Markers dropped wherever they stand in content.
  GrammarBuilder& DroppedMarkers(const std::vector<std::string>& markers) {
    for (const std::string& marker : markers) ContentExit(Exit{marker, kContent});
    return *this;
  }

  // Adds a section at the next index (kFormatSection, then on).
  GrammarBuilder& Add(Section section) {
    grammar_.sections.push_back(std::move(section));
    return *this;
  }

  Grammar Build() { return std::move(grammar_); }

 private:
  Grammar grammar_;
};

// Formats whose calls are one block between two markers (or, without a
// closing marker, one bracketed value) in the content.
struct BlockFormat {
  std::string open;
  std::string close;  // empty: the block ends when its value closes
  Quoting quoting;
  BlockParser parse;
};

Grammar BlockGrammar(GrammarBuilder builder, const BlockFormat& format) {
  constexpr int kCall = kFormatSection;
  builder.ContentExit(Exit{format.open, kCall});
  if (format.close.empty()) {
    builder.Add(BalancedSection({}, format.quoting, kContent, ParseWith(format.parse)));
  } else {
    builder.Add(CaptureSection({Exit{format.close, kContent}}, format.quoting, ParseWith(format.parse)));
  }
  return builder.Build();
}

ParsedBlock ParseJsonBlock(std::string_view text) { return ParseJsonCallBlock(text); }
ParsedBlock ParseMiniMaxBlock(std::string_view text) { return ParseInvokeBlock(text, ""); }
ParsedBlock ParseDsmlBlock(std::string_view text) { return ParseInvokeBlock(text, "｜DSML｜"); }

// LFM2 writes Python calls; a JSON list of call objects is accepted too.
ParsedBlock ParseLfm2Block(std::string_view text) {
  std::string_view rest = TrimSpace(text);
  if (rest.starts_with("[")) rest = TrimSpace(rest.substr(1));
  return rest.starts_with("{") ? ParseJsonCallBlock(text) : ParsePythonicCallBlock(text);
}

// After <|python_tag|>: JSON call objects, a built-in NAME.call(...), or
// Python code for the "python" tool.
int ReportPythonTag(const CaptureEnd& end, CaptureOutput& out) {
  if (ParsedBlock json = ParseJsonCallBlock(end.text, /*require_arguments=*/true); json.ok) {
    ReportBlock(json, end, out);
    return end.next;
  }
  ParsedBlock builtin = ParsePythonicCallBlock(end.text);
  if (builtin.ok && builtin.calls.size() == 1 && builtin.calls[0].name.ends_with(".call")) {
    builtin.calls[0].name.resize(builtin.calls[0].name.size() - std::string_view(".call").size());
    ReportBlock(builtin, end, out);
    return end.next;
  }
  Json code = Json::object();
  code["code"] = std::string(TrimSpace(end.text));
  out.Call(CallWithArgumentsValue("python", &code));
  return end.next;
}

Grammar Llama3Grammar(bool starts_in_reasoning) {
  constexpr int kJsonCall = kFormatSection, kPythonTag = kFormatSection + 1, kAfterCall = kFormatSection + 2;
  const std::vector<Exit> ends = {Exit{"<|eom_id|>", kContent}, Exit{"<|eot_id|>", kContent}};
  std::vector<Exit> call_starts;
  for (const char* start : {"{ \"name\"", "{ \"type\""}) {
    call_starts.push_back(Exit{start, kJsonCall, /*only_at_start=*/true, /*flexible_space=*/true, /*keep=*/true});
  }
  call_starts.push_back(Exit{"<|python_tag|>", kPythonTag});
  GrammarBuilder builder(starts_in_reasoning);
  for (const Exit& exit : call_starts) builder.ContentExit(exit);
  builder.Add(BalancedSection(ends, Quoting::kJson, kAfterCall, [](const CaptureEnd& end, CaptureOutput& out) {
    ParsedBlock block = ParseJsonCallBlock(end.text, /*require_arguments=*/true);
    if (!block.ok && block.name.empty()) {
      out.Content(end.text);  // a JSON object, not a call
    } else {
      ReportBlock(block, end, out);
    }
    return end.next;
  }));
  builder.Add(CaptureSection(ends, Quoting::kNone, ReportPythonTag));
  // After a call: another one may follow, after a ';'.
  call_starts.push_back(Exit{";", kAfterCall, /*only_at_start=*/true});
  builder.Add(TextSection(Sink::kContent, std::move(call_starts)));
  return builder.Build();
}

Grammar FunctionaryGrammar(bool starts_in_reasoning) {
  constexpr int kCall = kFormatSection, kPythonTag = kFormatSection + 1;
  GrammarBuilder builder(starts_in_reasoning);
  builder.ContentExit(Exit{"<function=", kCall}).ContentExit(Exit{"<|python_tag|>", kPythonTag});
  builder.Add(
      CaptureSection({Exit{"</function>", kContent}}, Quoting::kJson, [](const CaptureEnd& end, CaptureOutput& out) {
        const size_t name_end = end.text.find('>');
        ParsedBlock block;
        if (name_end != std::string_view::npos) {
          block.ok = true;
          block.calls.push_back(CallWithArgumentsText(std::string(TrimSpace(end.text.substr(0, name_end))),
                                                      end.text.substr(name_end + 1)));
          block.ok = !block.calls[0].name.empty();
        }
        ReportBlock(block, end, out);
        return end.next;
      }));
  builder.Add(
      CaptureSection({Exit{"<|eom_id|>", kContent}, Exit{"<|eot_id|>", kContent}}, Quoting::kNone, ReportPythonTag));
  return builder.Build();
}

// Mistral: [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...} or [TOOL_CALLS][{...}].
Grammar MistralGrammar(bool starts_in_reasoning) {
  constexpr int kHead = kFormatSection, kCallId = kFormatSection + 1, kArgs = kFormatSection + 2;
  struct Pending {
    std::string name;
    std::string id;
  };
  auto pending = std::make_shared<Pending>();
  GrammarBuilder builder(starts_in_reasoning);
  builder.ContentExit(Exit{"[TOOL_CALLS]", kHead});
  builder.Add(BalancedSection({Exit{"[ARGS]", kArgs}, Exit{"[CALL_ID]", kCallId}, Exit{"[TOOL_CALLS]", kHead}},
                              Quoting::kJson, kContent, [pending](const CaptureEnd& end, CaptureOutput& out) {
                                if (end.closer == "[ARGS]" || end.closer == "[CALL_ID]") {
                                  pending->name.assign(TrimSpace(end.text));
                                  pending->id.clear();
                                  return end.next;
                                }
                                ReportBlock(ParseJsonCallBlock(end.text), end, out);  // Nemo's list
                                return end.next;
                              }));
  builder.Add(
      CaptureSection({Exit{"[ARGS]", kArgs}}, Quoting::kNone, [pending](const CaptureEnd& end, CaptureOutput& out) {
        pending->id.assign(TrimSpace(end.text));
        if (end.at_finish) out.Call(CallWithArgumentsText(pending->name, "", pending->id));
        return end.next;
      }));
  builder.Add(BalancedSection({Exit{"[TOOL_CALLS]", kHead}}, Quoting::kJson, kContent,
                              [pending](const CaptureEnd& end, CaptureOutput& out) {
                                if (pending->name.empty()) {
                                  out.Content(std::string(end.opener) + std::string(end.text));
                                } else {
                                  out.Call(CallWithArgumentsText(pending->name, end.text, pending->id));
                                }
                                return end.next;
                              }));
  return builder.Build();
}

// Calls inside a section: SECTION_BEGIN (CALL_BEGIN call CALL_END)*
// SECTION_END, as DeepSeek and Kimi write them; a call may also stand
// without the section markers.
struct SectionMarkers {
  std::string section_begin;
  std::string call_begin;
  std::string call_end;
  std::string section_end;
};

Grammar SectionedCallsGrammar(bool starts_in_reasoning, const SectionMarkers& m,
                              std::function<ParsedBlock(std::string_view)> parse_call) {
  constexpr int kCalls = kFormatSection, kCall = kFormatSection + 1;
  GrammarBuilder builder(starts_in_reasoning);
  builder.ContentExit(Exit{m.section_begin, kCalls}).ContentExit(Exit{m.call_begin, kCall});
  builder.Add(TextSection(Sink::kContent, {Exit{m.call_begin, kCall}, Exit{m.section_end, kContent}}));
  builder.Add(CaptureSection({Exit{m.call_end, kCalls}, Exit{m.section_end, kContent}}, Quoting::kJson,
                             [parse_call](const CaptureEnd& end, CaptureOutput& out) {
                               ReportBlock(parse_call(end.text), end, out);
                               return end.next;
                             }));
  return builder.Build();
}

ParsedBlock NamedCall(std::string name, std::string_view arguments, std::string id = {}) {
  ParsedBlock block;
  if (name.empty()) return block;
  block.ok = true;
  block.calls.push_back(CallWithArgumentsText(std::move(name), arguments, std::move(id)));
  return block;
}

// R1: function<｜tool▁sep｜>NAME\n```json\n{...}\n```   V3.1: NAME<｜tool▁sep｜>{...}
ParsedBlock ParseDeepSeekCall(std::string_view text) {
  constexpr std::string_view kSep = "<｜tool▁sep｜>";
  const size_t sep = text.find(kSep);
  if (sep == std::string_view::npos) return {};
  const std::string_view before = TrimSpace(text.substr(0, sep));
  std::string_view after = text.substr(sep + kSep.size());
  const size_t newline = after.find('\n');
  if (before != "function" || newline == std::string_view::npos) return NamedCall(std::string(before), after);
  const std::string name(TrimSpace(after.substr(0, newline)));
  std::string_view arguments = TrimSpace(after.substr(newline + 1));
  if (arguments.starts_with("```")) {
    arguments.remove_prefix(std::min(arguments.size(), arguments.find('\n')));
    if (arguments.ends_with("```")) arguments.remove_suffix(3);
  }
  return NamedCall(name, arguments);
}

// functions.NAME:IDX<|tool_call_argument_begin|>{...}; the id is functions.NAME:IDX.
ParsedBlock ParseKimiCall(std::string_view text) {
  constexpr std::string_view kArgs = "<|tool_call_argument_begin|>";
  const size_t sep = text.find(kArgs);
  const std::string_view id = TrimSpace(text.substr(0, sep));
  std::string_view name = id;
  if (name.starts_with("functions.")) name.remove_prefix(std::string_view("functions.").size());
  name = name.substr(0, name.rfind(':'));
  if (sep == std::string_view::npos) {
    ParsedBlock block;
    block.name.assign(name);
    return block;
  }
  return NamedCall(std::string(name), text.substr(sep + kArgs.size()), std::string(id));
}

}  // namespace

void ReportBlock(const ParsedBlock& block, const CaptureEnd& end, CaptureOutput& out) {
  if (block.ok) {
    for (const ToolCall& call : block.calls) out.Call(call);
    return;
  }
  if (!block.name.empty()) {
    ToolCall call;
    call.name = block.name;
    call.arguments = block.raw_arguments;
    call.arguments_raw = true;
    out.Call(std::move(call));
    return;
  }
  out.Content(std::string(end.opener) + std::string(end.text) + std::string(end.closer));
}

Grammar GrammarFor(OutputFormat format, bool starts_in_reasoning) {
  const bool sir = starts_in_reasoning;
  switch (format) {
    case OutputFormat::kNone: {
      Grammar g;
      g.sections.push_back(TextSection(Sink::kContent, {}));
      g.sections.back().trim = false;
      return g;
    }
    case OutputFormat::kThink:
      return GrammarBuilder(sir).Build();
    case OutputFormat::kHermes:
      return BlockGrammar(GrammarBuilder(sir), {"<tool_call>", "</tool_call>", Quoting::kJson, ParseJsonBlock});
    case OutputFormat::kQwenXml:
      return BlockGrammar(GrammarBuilder(sir), {"<tool_call>", "</tool_call>", Quoting::kNone, ParseQwenXmlBlock});
    case OutputFormat::kGlm:
      return BlockGrammar(GrammarBuilder(sir), {"<tool_call>", "</tool_call>", Quoting::kNone, ParseGlmBlock});
    case OutputFormat::kNemotron:
      return BlockGrammar(GrammarBuilder(sir), {"<TOOLCALL>", "</TOOLCALL>", Quoting::kJson, ParseJsonBlock});
    case OutputFormat::kGranite:
      return BlockGrammar(std::move(GrammarBuilder(sir).DroppedMarkers({"<response>", "</response>"})),
                          {"<|tool_call|>", "", Quoting::kJson, ParseJsonBlock});
    case OutputFormat::kLfm2:
      return BlockGrammar(GrammarBuilder(sir),
                          {"<|tool_call_start|>", "<|tool_call_end|>", Quoting::kPython, ParseLfm2Block});
    case OutputFormat::kApriel:
      // Apriel always reasons first: the reply starts in reasoning, which a
      // tool call block ends too.
      return BlockGrammar(std::move(GrammarBuilder("", "[BEGIN FINAL RESPONSE]", true)
                                        .DroppedMarkers({"[END FINAL RESPONSE]", "<|end|>"})
                                        .ReasoningExit(Exit{"<tool_calls>", kFormatSection})),
                          {"<tool_calls>", "</tool_calls>", Quoting::kJson, ParseJsonBlock});
    case OutputFormat::kCohere:
      return BlockGrammar(
          std::move(GrammarBuilder("<|START_THINKING|>", "<|END_THINKING|>", sir)
                        .DroppedMarkers({"<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"})),
          {"<|START_ACTION|>", "<|END_ACTION|>", Quoting::kJson, ParseJsonBlock});
    case OutputFormat::kMiniMax:
      return BlockGrammar(GrammarBuilder(sir),
                          {"<minimax:tool_call>", "</minimax:tool_call>", Quoting::kNone, ParseMiniMaxBlock});
    case OutputFormat::kDeepSeekV4:
      return BlockGrammar(GrammarBuilder(sir),
                          {"<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>", Quoting::kNone, ParseDsmlBlock});
    case OutputFormat::kGemma4:
      return BlockGrammar(GrammarBuilder("<|channel>thought", "<channel|>", sir),
                          {"<|tool_call>", "<tool_call|>", Quoting::kNone, ParseGemma4Block});
    case OutputFormat::kLlama3:
      return Llama3Grammar(sir);
    case OutputFormat::kFunctionary:
      return FunctionaryGrammar(sir);
    case OutputFormat::kMistral:
      return MistralGrammar(sir);
    case OutputFormat::kDeepSeek:
      return SectionedCallsGrammar(
          sir, {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"},
          ParseDeepSeekCall);
    case OutputFormat::kKimiK2:
      return SectionedCallsGrammar(
          sir,
          {"<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>"},
          ParseKimiCall);
    case OutputFormat::kHarmony:
      return HarmonyGrammar(sir);
  }
  return GrammarFor(OutputFormat::kNone, false);
}

}  // namespace cairn::chat::output
