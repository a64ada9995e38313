// A tool-call round trip through the HTTP door of a real in-process server
// over real sockets: the demo chat model served with Qwen3.5's real
// template (../shared/chat_templates), its reply forced through the
// server's real path (SchedulerOptions::forced_token replaces the sampler's
// draw, as tests/service/e2e/chat_tools_test.cc does over gRPC), so the
// reply arrives as OpenAI's `reasoning_content` and `tool_calls` with
// finish_reason "tool_calls", whole and streamed; the tool's result sent
// back with the assistant's call is rendered and answered.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/service/e2e/forced_reply.h"
#include "tests/service/e2e/service_fixture.h"
#include "tests/testing/shared_data.h"

namespace cairn::service::e2e {
namespace {

using Json = nlohmann::json;

constexpr const char* kQwen = "qwen35-chat";
constexpr const char* kQwenTemplate = "chat_templates/templates/Qwen3.5-4B.jinja";

class HttpToolsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(testing::SharedPath(kQwenTemplate))) return;
    ServerOptions opt = TestServerOptions();
    opt.models_options.threads = 2;
    opt.http.listen = "127.0.0.1:0";
    opt.models.push_back({kQwen, kChat, "", true});
    opt.models_options.chat_template_files = {{kQwen, testing::SharedPath(kQwenTemplate)}};
    opt.scheduler.forced_token = ForcedReply::Next;
    auto s = Server::Create(opt);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    CAIRN_REQUIRE_SHARED(kQwenTemplate);
    ASSERT_NE(server_, nullptr);
  }

  // The server's next replies start with `text` (plain pieces of the demo
  // vocabulary), then <|im_end|>.
  static void ForceReply(const std::string& text) { ASSERT_TRUE(ForcedReply::Set(*server_, kQwen, text).ok()); }

  static httplib::Result Post(const Json& body) {
    httplib::Client cli("127.0.0.1", server_->http_port());
    cli.set_read_timeout(60, 0);
    return cli.Post("/v1/chat/completions", body.dump(), "application/json");
  }

  static Json Conversation() {
    return {{"model", kQwen},
            {"max_tokens", 200},
            {"temperature", 0},
            {"messages", {{{"role", "user"}, {"content", "Who calls EvictLocked?"}}}},
            {"tools",
             {{{"type", "function"},
               {"function",
                {{"name", "search_files"},
                 {"description", "Search the tree"},
                 {"parameters",
                  {{"type", "object"},
                   {"properties", {{"pattern", {{"type", "string"}}}, {"max_results", {{"type", "integer"}}}}},
                   {"required", {"pattern"}}}}}}}}}};
  }

  static Server* server_;
};

Server* HttpToolsTest::server_ = nullptr;

constexpr const char* kToolCallReply =
    "Find the callers.\n</think>\n\n<tool_call>\n<function=search_files>\n<parameter=pattern>\nEvictLocked\n"
    "</parameter>\n<parameter=max_results>\n3\n</parameter>\n</function>\n</tool_call>";

TEST_F(HttpToolsTest, ToolCallRoundTrip) {
  ForceReply(kToolCallReply);
  httplib::Result r = Post(Conversation());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json reply = Json::parse(r->body);
  const Json& choice = reply["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const Json& message = choice["message"];
  EXPECT_EQ(message["reasoning_content"], "Find the callers.");
  EXPECT_TRUE(message["content"].is_null()) << message.dump();
  ASSERT_EQ(message["tool_calls"].size(), 1u) << message.dump();
  const Json& call = message["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "search_files");
  EXPECT_EQ(Json::parse(call["function"]["arguments"].get<std::string>()),
            Json::parse(R"({"pattern":"EvictLocked","max_results":3})"));
  EXPECT_FALSE(call["id"].get<std::string>().empty());

  // The client runs the tool and sends the call and its result back.
  ForceReply("Done.\n</think>\n\nIts callers are in store.cc.");
  Json next = Conversation();
  next["messages"].push_back(message);
  next["messages"].push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "store.cc:88"}});
  httplib::Result answer = Post(next);
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->status, 200) << answer->body;
  const Json final_reply = Json::parse(answer->body);
  EXPECT_EQ(final_reply["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(final_reply["choices"][0]["message"]["content"], "Its callers are in store.cc.");
  EXPECT_EQ(final_reply["choices"][0]["message"]["reasoning_content"], "Done.");
  // The whole conversation was resent: its prefix served from cache.
  EXPECT_GT(final_reply["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
}

TEST_F(HttpToolsTest, StreamedToolCallArrivesInADeltaWithTheReasonLast) {
  ForceReply(kToolCallReply);
  Json body = Conversation();
  body["stream"] = true;
  httplib::Result r = Post(body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::string reasoning;
  Json calls = Json::array();
  std::string finish;
  size_t pos = 0;
  while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r->body.find("\n\n", pos);
    const std::string data = r->body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") break;
    const Json chunk = Json::parse(data);
    const Json& choice = chunk["choices"][0];
    const Json& delta = choice["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      for (const Json& c : delta["tool_calls"]) calls.push_back(c);
    }
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Find the callers.");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "search_files");
  EXPECT_EQ(finish, "tool_calls");
}

}  // namespace
}  // namespace cairn::service::e2e
