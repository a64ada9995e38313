#include "service/http/openai_request.h"

#include <string>

#include "gtest/gtest.h"

namespace cairn::service::http {
namespace {

absl::StatusOr<OpenAiRequest> Chat(const std::string& body, const std::string& session = "") {
  return ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions, body, session);
}

TEST(OpenAiRequestTest, ChatTranslatesMessagesSamplingStopsAndTools) {
  auto r = Chat(R"({"model": "m", "messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]},
      {"role": "assistant", "content": null, "reasoning_content": "think",
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "42"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}], "tool_choice": "auto",
    "temperature": 0.5, "top_p": 0.9, "seed": 7, "max_completion_tokens": 12, "stop": ["x", "y"],
    "stream": true, "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 3,
    "user": "someone", "n": 1, "response_format": {"type": "text"}, "ignore_eos": true,
    "return_token_ids": true})");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::GenerateRequest& g = r->generate;
  EXPECT_EQ(g.model(), "m");
  ASSERT_EQ(g.messages_size(), 4);
  EXPECT_EQ(g.messages(0).role(), "system");
  EXPECT_EQ(g.messages(1).content(), "hi there");
  EXPECT_FALSE(g.messages(2).has_content());
  EXPECT_EQ(g.messages(2).reasoning_content(), "think");
  ASSERT_EQ(g.messages(2).tool_calls_size(), 1);
  EXPECT_EQ(g.messages(2).tool_calls(0).arguments(), R"({"a":1})");
  EXPECT_EQ(g.messages(3).tool_call_id(), "c1");
  EXPECT_NE(g.tools().find("\"name\":\"f\""), std::string::npos);
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  EXPECT_EQ(g.sampling().seed(), 7u);
  EXPECT_EQ(g.stop().max_tokens(), 12);
  EXPECT_EQ(g.stop().stop_strings_size(), 2);
  EXPECT_TRUE(g.stop().ignore_eos());
  EXPECT_TRUE(g.logprobs());
  EXPECT_EQ(g.top_logprobs(), 3);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_TRUE(r->return_token_ids);
  EXPECT_TRUE(g.session_id().empty());
}

TEST(OpenAiRequestTest, ToolChoiceNoneRendersWithoutToolsAndSessionHeaderNamesTheSession) {
  auto r = Chat(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "none",
                    "tools": [{"type": "function", "function": {"name": "f"}}]})",
                "conv-1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->generate.tools().empty());
  EXPECT_EQ(r->generate.session_id(), "conv-1");
  EXPECT_TRUE(r->generate.create_session());
  EXPECT_FALSE(r->generate.append());
  EXPECT_FALSE(r->generate.stop().has_max_tokens());  // the server's default
}

TEST(OpenAiRequestTest, CompletionsTakeTextOrTokenIds) {
  auto text = ParseOpenAiRequest(OpenAiEndpoint::kCompletions, R"({"model": "m", "prompt": "Once"})", "");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->generate.parts(0).text(), "Once");
  EXPECT_EQ(text->generate.stop().max_tokens(), 16);  // OpenAI's default for completions
  auto ids =
      ParseOpenAiRequest(OpenAiEndpoint::kCompletions, R"({"model": "m", "prompt": [[1, 2, 3]], "logprobs": 2})", "");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->generate.parts(0).tokens().ids_size(), 3);
  EXPECT_TRUE(ids->generate.logprobs());
  EXPECT_EQ(ids->generate.top_logprobs(), 2);
}

TEST(OpenAiRequestTest, RefusesWhatItCannotHonourByName) {
  const struct {
    const char* body;
    const char* names;
  } cases[] = {
      {"{", "not valid JSON"},
      {"[1]", "JSON object"},
      {R"({"messages": [{"role": "user", "content": "x"}]})", "'model'"},
      {R"({"model": "m"})", "'messages'"},
      {R"({"model": "m", "messages": []})", "'messages'"},
      {R"({"model": "m", "messages": [{"content": "x"}]})", "role"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2})", "'n'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 3})", "'temperature'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", "'temperature'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1})", "'max_tokens'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": 5})", "'stop'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", "'tool_choice'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})",
       "'response_format'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "frequency_penalty": 1})",
       "'frequency_penalty'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "'top_logprobs'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 21, "logprobs": true})",
       "'top_logprobs'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "content"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"})", "'stream'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "seed": 1e30})", "'seed'"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 99999999999})", "'max_tokens'"},
  };
  for (const auto& c : cases) {
    auto r = Chat(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.body;
    EXPECT_NE(r.status().message().find(c.names), std::string::npos) << c.body << " -> " << r.status();
  }
  for (const char* body : {R"({"model": "m", "prompt": []})", R"({"model": "m", "prompt": [-1]})",
                           R"({"model": "m", "prompt": ["a", "b"]})", R"({"model": "m", "prompt": "x", "echo": true})",
                           R"({"model": "m", "prompt": "x", "logprobs": 6})", R"({"model": "m"})"}) {
    auto r = ParseOpenAiRequest(OpenAiEndpoint::kCompletions, body, "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body;
  }
}

}  // namespace
}  // namespace cairn::service::http
