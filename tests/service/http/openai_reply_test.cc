#include "service/http/openai_reply.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "service/api/status.h"
#include "service/host/memory_budget.h"

namespace cairn::service::http {
namespace {

using Json = nlohmann::json;

TEST(OpenAiReplyTest, ErrorsHaveOpenAisShapeAndStatus) {
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusOf(absl::StatusCode::kInternal), 500);
  const Json e = Json::parse(ErrorJson(absl::NotFoundError("no model 'x'")));
  EXPECT_EQ(e["error"]["message"], "no model 'x'");
  EXPECT_EQ(e["error"]["type"], "not_found_error");
  EXPECT_TRUE(e["error"]["param"].is_null());
  EXPECT_EQ(e["error"]["code"], "not_found");
}

// What the openai SDKs retry: 409 (busy session), 429 (full), 503
// (draining) are worth it; a prompt beyond the context is a 400
// context_length_exceeded, not a 429; the rest are not.
TEST(OpenAiReplyTest, ContextLengthIsAnInvalidRequestAndRetriesFollowTheStatus) {
  const absl::Status context = ContextLengthExceeded("prompt of 9 positions does not fit the context of 8");
  EXPECT_EQ(context.code(), absl::StatusCode::kResourceExhausted);  // gRPC's code is unchanged
  EXPECT_EQ(HttpStatusOf(context), 400);
  const Json e = Json::parse(ErrorJson(context));
  EXPECT_EQ(e["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(HttpStatusOf(absl::ResourceExhaustedError("queue full")), 429);
  EXPECT_FALSE(IsRetryable(context));
  EXPECT_TRUE(IsRetryable(absl::ResourceExhaustedError("queue full")));
  EXPECT_TRUE(IsRetryable(absl::AbortedError("session busy")));
  EXPECT_TRUE(IsRetryable(absl::UnavailableError("draining")));
  for (const absl::Status& st : {absl::AlreadyExistsError("id taken"), absl::UnimplementedError("x"),
                                 absl::DeadlineExceededError("late"), absl::InvalidArgumentError("x")}) {
    EXPECT_FALSE(IsRetryable(st)) << st;
  }
}

// A request that alone needs more than the whole memory budget can never
// pass: 400 with its own code, no retry (a refusal while others hold memory
// stays a retryable 429). httplib's 413 (a body beyond the limit) is typed
// by its HTTP status, not as a rate limit.
TEST(OpenAiReplyTest, PermanentRefusalsAreNotRetried) {
  MemoryBudget budget(100);
  auto held = budget.Reserve(80, "held");
  ASSERT_TRUE(held.ok());
  const absl::Status busy = budget.Reserve(30, "a prompt").status();
  const absl::Status never = budget.Reserve(101, "a prompt").status();
  EXPECT_EQ(HttpStatusOf(busy), 429);
  EXPECT_TRUE(IsRetryable(busy));
  EXPECT_EQ(HttpStatusOf(never), 400);
  EXPECT_FALSE(IsRetryable(never));
  const Json e = Json::parse(ErrorJson(never));
  EXPECT_EQ(e["error"]["code"], "request_exceeds_memory_budget");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  const Json too_large = Json::parse(ErrorJson(absl::ResourceExhaustedError("request body too large"), 413));
  EXPECT_EQ(too_large["error"]["type"], "invalid_request_error");
}

// A parsed reply (reasoning, content, a tool call) as one chat completion
// and as chunks.
TEST(OpenAiReplyTest, ChatReplyCarriesReasoningContentToolCallsAndUsage) {
  OpenAiRequest request;
  request.stream = true;
  request.include_usage = true;
  OpenAiReply reply(request, "m", nullptr, 123);
  v1::GenerateResponse prompt;
  prompt.mutable_prompt()->set_output_format("qwen3.5");
  const std::string first = reply.Add(prompt);
  EXPECT_NE(first.find(R"("role":"assistant")"), std::string::npos) << first;
  v1::GenerateResponse token;
  token.mutable_token()->set_text("<think>hm</think>ok");
  auto* r = token.mutable_token()->add_pieces();
  r->set_kind(v1::OUTPUT_KIND_REASONING);
  r->set_text("hm");
  auto* c = token.mutable_token()->add_pieces();
  c->set_kind(v1::OUTPUT_KIND_CONTENT);
  c->set_text("ok");
  const std::string events = reply.Add(token);
  ASSERT_EQ(events.rfind("data: ", 0), 0u);
  const Json chunk = Json::parse(events.substr(6));
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "ok");
  EXPECT_EQ(chunk["choices"][0]["delta"]["reasoning_content"], "hm");
  v1::GenerateResponse call;
  call.mutable_tool_call()->set_id("call_1");
  call.mutable_tool_call()->set_name("f");
  call.mutable_tool_call()->set_arguments(R"({"a":1})");
  EXPECT_NE(reply.Add(call).find(R"("tool_calls":[{"function":{"arguments":"{\"a\":1}","name":"f"})"),
            std::string::npos);
  v1::GenerateResponse finished;
  finished.mutable_finished()->set_reason(v1::FINISH_REASON_TOOL_CALLS);
  finished.mutable_finished()->mutable_usage()->set_prompt_tokens(10);
  finished.mutable_finished()->mutable_usage()->set_reused_tokens(6);
  finished.mutable_finished()->mutable_usage()->set_completion_tokens(3);
  EXPECT_NE(reply.Add(finished).find(R"("finish_reason":"tool_calls")"), std::string::npos);
  const std::string end = reply.StreamEnd();
  EXPECT_NE(end.find(R"("cached_tokens":6)"), std::string::npos) << end;
  EXPECT_NE(end.find(R"("total_tokens":13)"), std::string::npos) << end;
  EXPECT_EQ(end.substr(end.size() - 14), "data: [DONE]\n\n");

  const Json body = Json::parse(reply.Body());
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "ok");
  EXPECT_EQ(body["choices"][0]["message"]["reasoning_content"], "hm");
  EXPECT_EQ(body["choices"][0]["message"]["tool_calls"][0]["id"], "call_1");
  EXPECT_FALSE(body["choices"][0]["message"]["tool_calls"][0].contains("index"));
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 6);
}

// return_token_ids (vLLM's extension): every generated id, in order, once,
// also for a token whose text is held back (an unfinished character).
TEST(OpenAiReplyTest, TokenIdsComeWithEveryTokenWhenAskedFor) {
  OpenAiRequest request;
  request.endpoint = OpenAiEndpoint::kCompletions;
  request.stream = true;
  request.return_token_ids = true;
  OpenAiReply reply(request, "m", nullptr, 1);
  EXPECT_EQ(reply.Add(v1::GenerateResponse()), "");
  std::vector<int32_t> streamed;
  for (const auto& [id, text] : std::vector<std::pair<int32_t, std::string>>{{7, "a"}, {300, ""}, {301, "\xc3\xa9"}}) {
    v1::GenerateResponse token;
    token.mutable_token()->set_id(id);
    token.mutable_token()->set_text(text);
    const std::string event = reply.Add(token);
    ASSERT_EQ(event.rfind("data: ", 0), 0u) << "token " << id;
    const Json chunk = Json::parse(event.substr(6));
    for (int32_t got : chunk["choices"][0]["token_ids"]) streamed.push_back(got);
  }
  v1::GenerateResponse finished;
  finished.mutable_finished()->set_reason(v1::FINISH_REASON_LENGTH);
  const Json last = Json::parse(reply.Add(finished).substr(6));
  EXPECT_TRUE(last["choices"][0]["token_ids"].empty());
  EXPECT_EQ(streamed, (std::vector<int32_t>{7, 300, 301}));
  EXPECT_EQ(Json::parse(reply.Body())["choices"][0]["token_ids"], Json({7, 300, 301}));

  OpenAiRequest plain;
  plain.endpoint = OpenAiEndpoint::kCompletions;
  OpenAiReply without(plain, "m", nullptr, 1);
  without.Add(finished);
  EXPECT_FALSE(Json::parse(without.Body())["choices"][0].contains("token_ids"));
}

}  // namespace
}  // namespace cairn::service::http
