// The streaming engine on small grammars of its own: what is emitted when
// (only a possible marker, a trailing whitespace run or a partial UTF-8
// character is held back), captures, and the parser's contract.
#include "chat/output/grammar_parser.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/chat/output/parse_testing.h"

namespace cairn::chat::output {
namespace {

// Content, <r>reasoning</r>, and [[captured]] blocks reported as a call of
// the captured text's first word with raw arguments.
std::unique_ptr<OutputParser> TinyParser() {
  enum { kContent, kReasoning, kBlock };
  Grammar g;
  g.sections.resize(3);
  g.sections[kContent].exits = {Exit{"<r>", kReasoning}, Exit{"[[", kBlock}};
  g.sections[kReasoning].sink = Sink::kReasoning;
  g.sections[kReasoning].exits = {Exit{"</r>", kContent}};
  Section& block = g.sections[kBlock];
  block.sink = Sink::kCapture;
  block.quoting = Quoting::kJson;
  block.exits = {Exit{"]]", kContent}};
  block.on_end = [](const CaptureEnd& end, CaptureOutput& out) {
    ToolCall call;
    call.name = std::string(end.text.substr(0, end.text.find(' ')));
    call.arguments = end.at_finish ? "unfinished" : std::string(end.text);
    call.arguments_raw = true;
    out.Call(call);
    return end.next;
  };
  return CreateGrammarParser(std::move(g), testing::CountingIds());
}

std::vector<OutputEvent> FeedOk(OutputParser& parser, std::string_view piece) {
  auto events = parser.Feed(piece);
  EXPECT_TRUE(events.ok()) << events.status();
  return events.ok() ? *events : std::vector<OutputEvent>{};
}

TEST(GrammarParserTest, HoldsBackOnlyWhatMayBeAMarker) {
  auto parser = TinyParser();
  EXPECT_EQ(FeedOk(*parser, "Hello wor"), std::vector<OutputEvent>{Content("Hello wor")});
  EXPECT_EQ(FeedOk(*parser, "ld <"), std::vector<OutputEvent>{Content("ld")});  // " <" may begin "<r>"
  EXPECT_EQ(FeedOk(*parser, "b> a [x"), std::vector<OutputEvent>{Content(" <b> a [x")});
  EXPECT_EQ(FeedOk(*parser, " ["), std::vector<OutputEvent>{});
  EXPECT_EQ(FeedOk(*parser, "["), std::vector<OutputEvent>{});  // a block opened
  EXPECT_EQ(FeedOk(*parser, "f 1]] ok"), (std::vector<OutputEvent>{Call("call_0", "f", "f 1", true), Content("ok")}));
  auto finished = parser->Finish();
  ASSERT_TRUE(finished.ok());
  EXPECT_TRUE(finished->events.empty());
  EXPECT_TRUE(finished->has_tool_calls);
}

TEST(GrammarParserTest, WhitespaceAtRunEdgesIsDropped) {
  auto parser = TinyParser();
  EXPECT_EQ(FeedOk(*parser, "\n\n  "), std::vector<OutputEvent>{});
  EXPECT_EQ(FeedOk(*parser, "a \n"), std::vector<OutputEvent>{Content("a")});
  EXPECT_EQ(FeedOk(*parser, "\n b"), std::vector<OutputEvent>{Content(" \n\n b")});
  EXPECT_EQ(FeedOk(*parser, "\n<r>\n think \n</r>\n"), (std::vector<OutputEvent>{Reasoning("think")}));
  auto finished = parser->Finish();
  ASSERT_TRUE(finished.ok());
  EXPECT_TRUE(finished->events.empty());  // the trailing "\n" is formatting
  EXPECT_FALSE(finished->has_tool_calls);
}

TEST(GrammarParserTest, HoldsBackAPartialUtf8Character) {
  auto parser = TinyParser();
  const std::string snowman = "\xE2\x98\x83";
  EXPECT_EQ(FeedOk(*parser, "a\xE2"), std::vector<OutputEvent>{Content("a")});
  EXPECT_EQ(FeedOk(*parser, "\x98"), std::vector<OutputEvent>{});
  EXPECT_EQ(FeedOk(*parser, "\x83!"), std::vector<OutputEvent>{Content(snowman + "!")});
  // Bytes that can never complete a character are not held.
  EXPECT_EQ(FeedOk(*parser, "\xFF"), std::vector<OutputEvent>{Content("\xFF")});
}

TEST(GrammarParserTest, FinishFlushesAnUnfinishedMarkerAsText) {
  auto parser = TinyParser();
  EXPECT_EQ(FeedOk(*parser, "<r>x</"), std::vector<OutputEvent>{Reasoning("x")});
  auto finished = parser->Finish();
  ASSERT_TRUE(finished.ok());
  EXPECT_EQ(finished->events, std::vector<OutputEvent>{Reasoning("</")});
}

TEST(GrammarParserTest, FinishReportsAnOpenCapture) {
  auto parser = TinyParser();
  EXPECT_EQ(FeedOk(*parser, "[[g "), std::vector<OutputEvent>{});
  auto finished = parser->Finish();
  ASSERT_TRUE(finished.ok());
  EXPECT_EQ(finished->events, std::vector<OutputEvent>{Call("call_0", "g", "unfinished", true)});
  EXPECT_TRUE(finished->has_tool_calls);
}

TEST(GrammarParserTest, MarkersInsideCapturedStringsAreText) {
  auto parser = TinyParser();
  EXPECT_EQ(FeedOk(*parser, R"([[s "]] \" ]]"]])"),
            std::vector<OutputEvent>{Call("call_0", "s", R"(s "]] \" ]]")", true)});
}

TEST(GrammarParserTest, FeedAndFinishAfterFinishFail) {
  auto parser = TinyParser();
  ASSERT_TRUE(parser->Finish().ok());
  EXPECT_EQ(parser->Feed("x").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(parser->Finish().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(GrammarParserTest, BalancedCaptureEndsWhenItsValueCloses) {
  enum { kContent, kValue };
  Grammar g;
  g.sections.resize(2);
  g.sections[kContent].exits = {Exit{"=", kValue}};
  Section& value = g.sections[kValue];
  value.sink = Sink::kCapture;
  value.quoting = Quoting::kPython;
  value.ends_when_balanced = true;
  value.next_when_balanced = kContent;
  value.on_end = [](const CaptureEnd& end, CaptureOutput& out) {
    out.Content("<" + std::string(end.text) + ">");
    return end.next;
  };
  auto parser = CreateGrammarParser(std::move(g), testing::CountingIds());
  EXPECT_EQ(FeedOk(*parser, "a =f(')', [1, {2}]) b"), std::vector<OutputEvent>{Content("a<f(')', [1, {2}])> b")});
}

TEST(GrammarParserTest, ALongReplyFedByteByByteStaysLinear) {
  // A 1 MB capture fed one byte at a time: each byte is scanned once.
  auto parser = TinyParser();
  ASSERT_TRUE(parser->Feed("[[big ").ok());
  const std::string chunk(1 << 20, 'x');
  for (char c : chunk) ASSERT_TRUE(parser->Feed(std::string_view(&c, 1)).ok());
  auto events = parser->Feed("]]");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(events->front().tool_call.arguments.size(), chunk.size() + 4);
}

}  // namespace
}  // namespace cairn::chat::output
