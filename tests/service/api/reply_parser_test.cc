// The parsed reply on its own, with a real tokenizer and a real template:
// the demo chat model rendering with Qwen3's template (../shared), whose
// output format is hermes (<think> reasoning, <tool_call> JSON).
#include "service/api/reply_parser.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/service/testing/demo_registry.h"
#include "tests/testing/shared_data.h"

namespace cairn::service {
namespace {

constexpr const char* kQwen3Template = "chat_templates/templates/Qwen-Qwen3-0.6B.jinja";

class ReplyParserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_REQUIRE_SHARED(kQwen3Template);
    models_ = testing::LoadDemoModels({"chat=demo-chat"}, {{"chat", cairn::testing::SharedPath(kQwen3Template)}});
    ASSERT_NE(models_, nullptr);
    chat_ = *models_->Find("chat");
  }

  // A parser for a reply to "Hi" (with tools when `tools`).
  std::unique_ptr<ReplyParser> ParserFor(bool tools) {
    v1::GenerateRequest req;
    v1::ChatMessage* m = req.add_messages();
    m->set_role("user");
    m->set_content("Hi");
    if (tools) req.set_tools(R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])");
    PromptRendering rendering;
    EXPECT_TRUE(BuildPrompt(*chat_, limits_, req, true, &rendering).ok());
    auto parser = ReplyParser::Create(*chat_, rendering);
    EXPECT_TRUE(parser.ok()) << parser.status();
    return parser.ok() ? *std::move(parser) : nullptr;
  }

  // Feeds `text` token by token, then the end; collects what comes out.
  struct Out {
    std::string reasoning, content;
    std::vector<v1::ToolCall> calls;
    v1::Finished finished;
  };
  Out Run(ReplyParser& parser, const std::string& text, v1::FinishReason reason) {
    Out out;
    auto add = [&out](const auto& pieces) {
      for (const v1::OutputPiece& p : pieces)
        (p.kind() == v1::OUTPUT_KIND_REASONING ? out.reasoning : out.content) += p.text();
    };
    TokenizeOptions opt;
    opt.add_special = false;
    for (TokenId id : chat_->tokenizer->Tokenize(text, opt)) {
      v1::TokenDelta delta;
      parser.Token(id, false, &delta, &out.calls);
      add(delta.pieces());
    }
    // The end-of-turn token ends the generation: not part of the reply.
    v1::TokenDelta end;
    parser.Token(*chat_->tokenizer->FindToken("<|im_end|>"), true, &end, &out.calls);
    EXPECT_EQ(end.pieces_size(), 0);
    out.finished.set_reason(reason);
    parser.Finish(&out.finished, &out.calls);
    add(out.finished.pieces());
    return out;
  }

  std::unique_ptr<ModelRegistry> models_;
  ServedModel* chat_ = nullptr;
  ServiceLimits limits_;
};

TEST_F(ReplyParserTest, ReasoningContentAndToolCallsOfAHermesReply) {
  std::unique_ptr<ReplyParser> parser = ParserFor(true);
  ASSERT_NE(parser, nullptr);
  EXPECT_EQ(parser->format(), chat::output::OutputFormat::kHermes);
  Out out = Run(*parser,
                "<think>\nA call.\n</think>\n\nCalling f.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, "
                "\"x\"]}}\n</tool_call>",
                v1::FINISH_REASON_END_OF_GENERATION);
  EXPECT_EQ(out.reasoning, "A call.");
  EXPECT_EQ(out.content, "Calling f.");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name(), "f");
  EXPECT_EQ(out.calls[0].arguments(), R"({"a":[1,"x"]})");
  EXPECT_FALSE(out.calls[0].arguments_not_json());
  EXPECT_EQ(out.finished.reason(), v1::FINISH_REASON_TOOL_CALLS);
}

TEST_F(ReplyParserTest, AReplyCutShortKeepsItsReason) {
  std::unique_ptr<ReplyParser> parser = ParserFor(true);
  ASSERT_NE(parser, nullptr);
  Out out = Run(*parser, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": ", v1::FINISH_REASON_LENGTH);
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_TRUE(out.calls[0].arguments_not_json());
  EXPECT_EQ(out.finished.reason(), v1::FINISH_REASON_LENGTH);
}

TEST_F(ReplyParserTest, PlainTextIsContent) {
  std::unique_ptr<ReplyParser> parser = ParserFor(false);
  ASSERT_NE(parser, nullptr);
  Out out = Run(*parser, "The dog ran.", v1::FINISH_REASON_END_OF_GENERATION);
  EXPECT_EQ(out.content, "The dog ran.");
  EXPECT_TRUE(out.calls.empty());
  EXPECT_EQ(out.finished.reason(), v1::FINISH_REASON_END_OF_GENERATION);
}

TEST_F(ReplyParserTest, PromptsOfPartsAreNotParsed) {
  PromptRendering parts;  // not rendered from messages
  auto parser = ReplyParser::Create(*chat_, parts);
  ASSERT_TRUE(parser.ok());
  EXPECT_EQ(*parser, nullptr);
}

TEST_F(ReplyParserTest, OnlyHarmonyContinuesPastAnEndOfGenerationToken) {
  // The demo vocabulary has no <|end|>: nothing continues, whatever the format.
  EXPECT_TRUE(TurnContinuingTokens(*chat_->tokenizer, chat::output::OutputFormat::kHarmony).empty());
  EXPECT_TRUE(TurnContinuingTokens(*chat_->tokenizer, chat::output::OutputFormat::kHermes).empty());
}

}  // namespace
}  // namespace cairn::service
