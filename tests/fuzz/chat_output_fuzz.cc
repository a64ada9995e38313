// Fuzzes the chat output parser (chat/output/output_parser.h) with any
// bytes as a model's reply, in any format: it never crashes, hangs or
// fails, and the properties the service relies on hold on every input:
//  - the events are the same, concatenated, whether the reply comes whole
//    or in pieces (split where the input's second byte says);
//  - fed valid UTF-8 in pieces, no text event splits a character;
//  - a tool call's arguments are a JSON object unless flagged raw, and
//    Finish says whether a call came.
// The first byte picks the format (its index in AllOutputFormats(), modulo
// their number), the second starts_in_reasoning (bit 0) and the split
// points.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output/output_format.h"
#include "chat/output/output_parser.h"
#include "chat/output/tool_call_syntax.h"
#include "tests/chat/output/event_testing.h"

namespace {

using cairn::chat::output::OutputEvent;

struct Result {
  std::vector<OutputEvent> events;  // adjacent text of one kind merged
  bool has_tool_calls = false;
};

// Parses the reply in the given pieces; aborts on any failed call or broken
// property of one event.
Result Parse(cairn::chat::output::OutputFormat format, bool reasoning, const std::vector<std::string_view>& pieces,
             bool check_utf8) {
  cairn::chat::output::OutputParserOptions options;
  options.format = format;
  options.starts_in_reasoning = reasoning;
  auto counter = std::make_shared<int>(0);
  options.make_id = [counter] { return "call_" + std::to_string((*counter)++); };
  auto parser = cairn::chat::output::CreateOutputParser(options);
  if (!parser.ok()) std::abort();
  Result result;
  std::vector<OutputEvent> all;
  for (std::string_view piece : pieces) {
    auto events = (*parser)->Feed(piece);
    if (!events.ok()) std::abort();
    all.insert(all.end(), events->begin(), events->end());
  }
  auto finished = (*parser)->Finish();
  if (!finished.ok() || (*parser)->Feed("x").ok()) std::abort();
  all.insert(all.end(), finished->events.begin(), finished->events.end());
  bool any_call = false;
  for (const OutputEvent& e : all) {
    if (check_utf8 && !cairn::chat::output::testing::IsValidUtf8(e.text)) std::abort();
    if (e.kind != OutputEvent::Kind::kToolCall) continue;
    any_call = true;
    if (e.tool_call.id.empty()) std::abort();
    if (!e.tool_call.arguments_raw) {
      const auto arguments = cairn::chat::output::ParseJson(e.tool_call.arguments);
      if (!arguments.has_value() || !arguments->is_object()) std::abort();
    }
  }
  if (any_call != finished->has_tool_calls) std::abort();
  result.events = cairn::chat::output::testing::Merged(all);
  result.has_tool_calls = finished->has_tool_calls;
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto& formats = cairn::chat::output::AllOutputFormats();
  const auto format = formats[data[0] % formats.size()];
  const bool reasoning = (data[1] & 1) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const Result whole = Parse(format, reasoning, {text}, false);
  std::vector<std::string_view> pieces;
  std::minstd_rand rng(data[1] >> 1);
  for (size_t at = 0; at < text.size();) {
    const size_t n = std::uniform_int_distribution<size_t>(1, 16)(rng);
    pieces.push_back(text.substr(at, n));
    at += n;
  }
  const Result split = Parse(format, reasoning, pieces, cairn::chat::output::testing::IsValidUtf8(text));
  if (!(split.events == whole.events) || split.has_tool_calls != whole.has_tool_calls) std::abort();
  return 0;
}
