// Helpers for the output parser's tests: events by hand, parsing a reply in
// given pieces, and the check every sample reply goes through (the expected
// events, and the same events however the reply is split).
#ifndef CAIRN_TESTS_CHAT_OUTPUT_PARSE_TESTING_H_
#define CAIRN_TESTS_CHAT_OUTPUT_PARSE_TESTING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/output/output_format.h"
#include "chat/output/output_parser.h"
#include "gtest/gtest.h"
#include "tests/chat/output/event_testing.h"

namespace cairn::chat::output {

inline void PrintTo(const OutputEvent& e, std::ostream* os) {
  switch (e.kind) {
    case OutputEvent::Kind::kReasoning:
      *os << "Reasoning(" << ::testing::PrintToString(e.text) << ")";
      return;
    case OutputEvent::Kind::kContent:
      *os << "Content(" << ::testing::PrintToString(e.text) << ")";
      return;
    case OutputEvent::Kind::kToolCall:
      *os << "Call(id=" << e.tool_call.id << " name=" << e.tool_call.name
          << " arguments=" << ::testing::PrintToString(e.tool_call.arguments)
          << (e.tool_call.arguments_raw ? " raw" : "") << ")";
      return;
  }
}

namespace testing {

inline OutputEvent Reasoning(std::string text) {
  OutputEvent e;
  e.kind = OutputEvent::Kind::kReasoning;
  e.text = std::move(text);
  return e;
}

inline OutputEvent Content(std::string text) {
  OutputEvent e;
  e.kind = OutputEvent::Kind::kContent;
  e.text = std::move(text);
  return e;
}

// A tool call; generated ids are call_0, call_1, ... (CountingIds).
inline OutputEvent Call(std::string id, std::string name, std::string arguments, bool raw = false) {
  OutputEvent e;
  e.kind = OutputEvent::Kind::kToolCall;
  e.tool_call.id = std::move(id);
  e.tool_call.name = std::move(name);
  e.tool_call.arguments = std::move(arguments);
  e.tool_call.arguments_raw = raw;
  return e;
}

// Ids call_0, call_1, ... in the order calls are made.
inline std::function<std::string()> CountingIds() {
  auto next = std::make_shared<int>(0);
  return [next] { return "call_" + std::to_string((*next)++); };
}

struct Parsed {
  std::vector<OutputEvent> events;  // as returned, not merged
  bool has_tool_calls = false;
};

inline std::unique_ptr<OutputParser> NewParser(OutputFormat format, bool starts_in_reasoning = false) {
  OutputParserOptions options;
  options.format = format;
  options.starts_in_reasoning = starts_in_reasoning;
  options.make_id = CountingIds();
  auto parser = CreateOutputParser(std::move(options));
  EXPECT_TRUE(parser.ok()) << parser.status();
  return std::move(*parser);
}

inline Parsed ParsePieces(OutputFormat format, bool starts_in_reasoning, const std::vector<std::string_view>& pieces) {
  std::unique_ptr<OutputParser> parser = NewParser(format, starts_in_reasoning);
  Parsed parsed;
  for (std::string_view piece : pieces) {
    auto events = parser->Feed(piece);
    EXPECT_TRUE(events.ok()) << events.status();
    if (events.ok()) parsed.events.insert(parsed.events.end(), events->begin(), events->end());
  }
  auto finished = parser->Finish();
  EXPECT_TRUE(finished.ok()) << finished.status();
  if (finished.ok()) {
    parsed.events.insert(parsed.events.end(), finished->events.begin(), finished->events.end());
    parsed.has_tool_calls = finished->has_tool_calls;
  }
  return parsed;
}

inline std::vector<OutputEvent> Parse(OutputFormat format, std::string_view text, bool starts_in_reasoning = false) {
  return Merged(ParsePieces(format, starts_in_reasoning, {text}).events);
}

// A model's reply and the events it must parse into.
struct Sample {
  std::string name;  // a test name: letters, digits, underscores
  OutputFormat format = OutputFormat::kNone;
  bool starts_in_reasoning = false;
  std::string text;
  std::vector<OutputEvent> events;  // merged
};

inline void PrintTo(const Sample& s, std::ostream* os) { *os << s.name; }

// The sample parses into its events, whole, split at every byte boundary,
// one byte at a time and in random pieces; fed one byte at a time, no text
// event splits a UTF-8 character; has_tool_calls says whether a call came.
inline void ExpectParses(const Sample& s) {
  SCOPED_TRACE(s.name);
  const Parsed whole = ParsePieces(s.format, s.starts_in_reasoning, {s.text});
  EXPECT_EQ(Merged(whole.events), s.events);
  bool any_call = false;
  for (const OutputEvent& e : s.events) any_call = any_call || e.kind == OutputEvent::Kind::kToolCall;
  EXPECT_EQ(whole.has_tool_calls, any_call);
  const std::string_view text = s.text;
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const Parsed split = ParsePieces(s.format, s.starts_in_reasoning, {text.substr(0, cut), text.substr(cut)});
    ASSERT_EQ(Merged(split.events), s.events) << "split at byte " << cut;
  }
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
  const Parsed bytewise = ParsePieces(s.format, s.starts_in_reasoning, bytes);
  EXPECT_EQ(Merged(bytewise.events), s.events) << "fed one byte at a time";
  if (IsValidUtf8(text)) {
    for (const OutputEvent& e : bytewise.events) EXPECT_TRUE(IsValidUtf8(e.text)) << ::testing::PrintToString(e);
  }
  std::mt19937 rng(1234);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string_view> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::uniform_int_distribution<size_t>(1, 12)(rng);
      pieces.push_back(text.substr(at, n));
      at += n;
    }
    ASSERT_EQ(Merged(ParsePieces(s.format, s.starts_in_reasoning, pieces).events), s.events) << "round " << round;
  }
}

}  // namespace testing

// The sample tables read better unqualified.
using testing::Call;
using testing::Content;
using testing::Reasoning;
using testing::Sample;

}  // namespace cairn::chat::output

#endif  // CAIRN_TESTS_CHAT_OUTPUT_PARSE_TESTING_H_
