#include "chat/output/output_parser.h"

#include <cctype>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "tests/chat/output/parse_testing.h"

namespace cairn::chat::output {
namespace {

TEST(OutputParserTest, DefaultIdsLookLikeOpenAIsAndDoNotRepeat) {
  std::set<std::string> ids;
  for (int reply = 0; reply < 20; ++reply) {
    OutputParserOptions options;
    options.format = OutputFormat::kHermes;
    auto parser = CreateOutputParser(options);
    ASSERT_TRUE(parser.ok());
    auto events = (*parser)->Feed(R"(<tool_call>{"name": "f", "arguments": {}}</tool_call>)");
    ASSERT_TRUE(events.ok());
    ASSERT_EQ(events->size(), 1u);
    const std::string& id = events->front().tool_call.id;
    ASSERT_EQ(id.size(), 5u + 24u) << id;
    EXPECT_EQ(id.substr(0, 5), "call_");
    for (char c : id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
    EXPECT_TRUE(ids.insert(id).second) << id;
  }
}

TEST(OutputParserTest, TheIdMakerIsInjectable) {
  OutputParserOptions options;
  options.format = OutputFormat::kHermes;
  options.make_id = [] { return std::string("fixed"); };
  auto parser = CreateOutputParser(options);
  ASSERT_TRUE(parser.ok());
  auto events = (*parser)->Feed(R"(<tool_call>{"name": "f", "arguments": {}}</tool_call>)");
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->at(0).tool_call.id, "fixed");
}

TEST(OutputParserTest, StartsInReasoningWhenTheOptionSaysSo) {
  EXPECT_EQ(testing::Parse(OutputFormat::kQwenXml, "a</think>b", /*starts_in_reasoning=*/true),
            (std::vector<OutputEvent>{testing::Reasoning("a"), testing::Content("b")}));
  EXPECT_EQ(testing::Parse(OutputFormat::kQwenXml, "a</think>b", /*starts_in_reasoning=*/false),
            (std::vector<OutputEvent>{testing::Content("a</think>b")}));
  // The plain format has no reasoning.
  EXPECT_EQ(testing::Parse(OutputFormat::kNone, "a</think>b", /*starts_in_reasoning=*/true),
            (std::vector<OutputEvent>{testing::Content("a</think>b")}));
}

TEST(OutputParserTest, EveryFormatTakesAnyBytes) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  for (OutputFormat format : AllOutputFormats()) {
    for (bool reasoning : {false, true}) {
      const testing::Parsed parsed = testing::ParsePieces(format, reasoning, {bytes, "<tool_call>", bytes, "[[{(\""});
      std::string text;
      for (const OutputEvent& e : parsed.events) text += e.text;
      EXPECT_FALSE(text.empty()) << OutputFormatName(format);
    }
  }
}

}  // namespace
}  // namespace cairn::chat::output
