// End to end over a real socket: chat templates, tools and parsed output
// (issue 26). Two served copies of the demo chat model carry real templates
// of ../shared/chat_templates through --chat-template (Qwen3.5's and
// gpt-oss's), a third one a template that refuses system messages. A
// conversation with tools and a tool-call history renders (RenderPrompt)
// byte for byte as transformers renders it; a reply forced through the
// server's real path (SchedulerOptions::forced_token, the sampler's draw
// replaced) arrives parsed: reasoning and content pieces, the tool call as
// its own event with the exact arguments, FINISH_REASON_TOOL_CALLS.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/service/e2e/forced_reply.h"
#include "tests/service/e2e/service_fixture.h"
#include "tests/testing/shared_data.h"

namespace cairn::service::e2e {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kQwen = "qwen35-chat";
constexpr const char* kGptOss = "gptoss-chat";
constexpr const char* kRefusing = "refusing-chat";
constexpr const char* kQwenTemplate = "chat_templates/templates/Qwen3.5-4B.jinja";
constexpr const char* kGptOssTemplate = "chat_templates/templates/openai-gpt-oss-120b.jinja";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A case of cases.json as the messages, tools and template arguments of a
// request (arguments as JSON text, keys in the file's order).
template <typename Request>
void FillConversation(const Json& c, Request* req) {
  for (const Json& m : c["messages"]) {
    v1::ChatMessage* msg = req->add_messages();
    msg->set_role(m["role"].get<std::string>());
    if (m.contains("content") && m["content"].is_string()) msg->set_content(m["content"].get<std::string>());
    if (m.contains("reasoning_content")) msg->set_reasoning_content(m["reasoning_content"].get<std::string>());
    if (m.contains("tool_call_id")) msg->set_tool_call_id(m["tool_call_id"].get<std::string>());
    if (m.contains("name")) msg->set_name(m["name"].get<std::string>());
    if (m.contains("tool_calls")) {
      for (const Json& call : m["tool_calls"]) {
        v1::ToolCall* tc = msg->add_tool_calls();
        tc->set_id(call["id"].get<std::string>());
        tc->set_name(call["function"]["name"].get<std::string>());
        tc->set_arguments(call["function"]["arguments"].dump());
      }
    }
  }
  req->set_add_generation_prompt(c["add_generation_prompt"].get<bool>());
  if (c.contains("tools")) req->set_tools(c["tools"].dump());
  Json arguments = Json::object();
  for (const auto& [key, value] : c.items()) {
    if (key != "case" && key != "messages" && key != "add_generation_prompt" && key != "tools") arguments[key] = value;
  }
  if (!arguments.empty()) req->set_template_args(arguments.dump());
}

class ChatToolsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(testing::SharedPath(kQwenTemplate))) return;
    dir_ = new std::string(std::filesystem::temp_directory_path() / ("cairn_chat_tools_" + std::to_string(::getpid())));
    std::filesystem::create_directories(*dir_);
    std::ofstream(*dir_ + "/refuse.jinja")
        << "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
           "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}";
    ServerOptions opt = TestServerOptions();
    opt.models_options.threads = 2;
    for (const char* name : {kQwen, kGptOss, kRefusing}) opt.models.push_back({name, kChat, "", true});
    opt.models_options.chat_template_files = {{kQwen, testing::SharedPath(kQwenTemplate)},
                                              {kGptOss, testing::SharedPath(kGptOssTemplate)},
                                              {kRefusing, *dir_ + "/refuse.jinja"}};
    opt.models_options.chat_template_clock = [] { return absl::CivilSecond(2026, 1, 15, 12, 0, 0); };
    opt.scheduler.forced_token = ForcedReply::Next;
    auto s = Server::Create(opt);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    CAIRN_REQUIRE_SHARED(kQwenTemplate);
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<Client>(server_->port());
    cases_ = Json::parse(ReadFile(testing::SharedPath("chat_templates/cases.json")));
  }

  const Json& Case(const std::string& name) const {
    for (const Json& c : cases_["cases"]) {
      if (c["case"] == name) return c;
    }
    ADD_FAILURE() << "no case " << name;
    return cases_;
  }

  static std::string Expected(const std::string& tmpl, const std::string& name) {
    std::ifstream in(testing::SharedPath("chat_templates/expected/" + tmpl + ".jsonl"));
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line);
      if (j["case"] == name) return j["text"].get<std::string>();
    }
    ADD_FAILURE() << "no expected text for " << tmpl << " " << name;
    return "";
  }

  grpc::Status Render(const v1::RenderPromptRequest& req, v1::RenderPromptResponse* resp) {
    grpc::ClientContext ctx;
    return client_->stub().RenderPrompt(&ctx, req, resp);
  }

  // Makes the server's next replies start with `text` (tokenized as text:
  // markers are plain pieces of the demo vocabulary), then <|im_end|>.
  void ForceReply(const std::string& model, const std::string& text) {
    ASSERT_TRUE(ForcedReply::Set(*server_, model, text).ok());
  }

  // Generate over the case's conversation; collects the parsed stream.
  struct Parsed {
    grpc::Status status;
    v1::PromptInfo prompt;
    std::string raw, reasoning, content;
    std::vector<v1::ToolCall> calls;
    v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  };
  Parsed GenerateParsed(const std::string& model, const Json& c) {
    GenerateRequest req;
    req.set_model(model);
    FillConversation(c, &req);
    req.mutable_sampling()->set_temperature(0);
    req.mutable_stop()->set_max_tokens(400);
    grpc::ClientContext ctx;
    auto reader = client_->stub().Generate(&ctx, req);
    Parsed p;
    v1::GenerateResponse ev;
    auto add = [&p](const google::protobuf::RepeatedPtrField<v1::OutputPiece>& pieces) {
      for (const v1::OutputPiece& piece : pieces) {
        (piece.kind() == v1::OUTPUT_KIND_REASONING ? p.reasoning : p.content) += piece.text();
      }
    };
    while (reader->Read(&ev)) {
      if (ev.has_prompt()) p.prompt = ev.prompt();
      if (ev.has_token()) {
        p.raw += ev.token().text();
        add(ev.token().pieces());
      }
      if (ev.has_tool_call()) p.calls.push_back(ev.tool_call());
      if (ev.has_finished()) {
        p.raw += ev.finished().text();
        add(ev.finished().pieces());
        p.reason = ev.finished().reason();
      }
    }
    p.status = reader->Finish();
    return p;
  }

  // The reply made exactly one call, of `name` with exactly `arguments`,
  // and finished for it.
  static void ExpectOneCall(const Parsed& p, const std::string& name, const std::string& arguments) {
    ASSERT_EQ(p.calls.size(), 1u) << p.raw;
    EXPECT_EQ(p.calls[0].name(), name);
    EXPECT_EQ(p.calls[0].arguments(), arguments);
    EXPECT_FALSE(p.calls[0].arguments_not_json());
    EXPECT_FALSE(p.calls[0].id().empty());
    EXPECT_EQ(p.reason, v1::FINISH_REASON_TOOL_CALLS);
  }

  static Server* server_;
  static std::string* dir_;
  std::unique_ptr<Client> client_;
  Json cases_;
};

Server* ChatToolsTest::server_ = nullptr;
std::string* ChatToolsTest::dir_ = nullptr;

TEST_F(ChatToolsTest, ToolConversationsRenderAsTransformers) {
  for (const auto& [model, tmpl] : {std::pair{kQwen, "Qwen3.5-4B"}, std::pair{kGptOss, "openai-gpt-oss-120b"}}) {
    for (const char* name : {"tools_offered", "tool_roundtrip", "agent_loop", "thinking_off"}) {
      v1::RenderPromptRequest req;
      req.set_model(model);
      FillConversation(Case(name), &req);
      v1::RenderPromptResponse resp;
      grpc::Status st = Render(req, &resp);
      ASSERT_TRUE(st.ok()) << model << " " << name << ": " << st.error_message();
      EXPECT_EQ(resp.text(), Expected(tmpl, name)) << model << " " << name;
      EXPECT_EQ(resp.template_name(),
                "file:" + testing::SharedPath(model == std::string(kQwen) ? kQwenTemplate : kGptOssTemplate));
      ASSERT_EQ(resp.message_starts_size(), req.messages_size());
      EXPECT_GT(resp.token_ids_size(), 0);
      EXPECT_LE(resp.generation_prompt_start(), static_cast<int32_t>(resp.text().size()));
    }
  }
}

TEST_F(ChatToolsTest, GenerateProcessesTheRenderedPrompt) {
  v1::RenderPromptRequest render;
  render.set_model(kQwen);
  FillConversation(Case("agent_loop"), &render);
  v1::RenderPromptResponse rendered;
  ASSERT_TRUE(Render(render, &rendered).ok());
  ForceReply(kQwen, "Done.\n</think>\n\nIts callers are in store.cc.");
  Parsed p = GenerateParsed(kQwen, Case("agent_loop"));
  ASSERT_TRUE(p.status.ok()) << p.status.error_message();
  EXPECT_EQ(p.prompt.prompt_tokens(), rendered.token_ids_size());
  EXPECT_EQ(p.prompt.output_format(), "qwen-xml");
  // Qwen3.5's generation prompt opens <think>: the reply starts in reasoning.
  EXPECT_EQ(p.reasoning, "Done.");
  EXPECT_EQ(p.content, "Its callers are in store.cc.");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.reason, v1::FINISH_REASON_END_OF_GENERATION);
}

TEST_F(ChatToolsTest, QwenToolCallArrivesAsAnEvent) {
  ForceReply(kQwen,
             "Find the callers.\n</think>\n\n<tool_call>\n<function=search_files>\n<parameter=pattern>\n"
             "EvictLocked\n</parameter>\n<parameter=max_results>\n3\n</parameter>\n</function>\n</tool_call>");
  Parsed p = GenerateParsed(kQwen, Case("agent_loop"));
  ASSERT_TRUE(p.status.ok()) << p.status.error_message();
  EXPECT_EQ(p.reasoning, "Find the callers.");
  EXPECT_EQ(p.content, "");
  ExpectOneCall(p, "search_files", R"({"pattern":"EvictLocked","max_results":3})");
  // The raw text is unchanged by parsing.
  EXPECT_NE(p.raw.find("<function=search_files>"), std::string::npos);
}

TEST_F(ChatToolsTest, GptOssToolCallArrivesAsAnEvent) {
  ForceReply(kGptOss,
             "<|channel|>analysis<|message|>Look for callers.<|end|><|start|>assistant<|channel|>commentary "
             "to=functions.search_files <|constrain|>json<|message|>{\"pattern\": \"EvictLocked(\"}<|call|>");
  Parsed p = GenerateParsed(kGptOss, Case("agent_loop"));
  ASSERT_TRUE(p.status.ok()) << p.status.error_message();
  EXPECT_EQ(p.prompt.output_format(), "harmony");
  EXPECT_EQ(p.reasoning, "Look for callers.");
  ExpectOneCall(p, "search_files", R"({"pattern":"EvictLocked("})");
}

TEST_F(ChatToolsTest, ArgumentsThatAreNotJsonAreFlagged) {
  ForceReply(kGptOss,
             "<|channel|>commentary to=functions.search_files <|constrain|>json<|message|>{pattern: evict<|call|>");
  Parsed p = GenerateParsed(kGptOss, Case("agent_loop"));
  ASSERT_TRUE(p.status.ok()) << p.status.error_message();
  ASSERT_EQ(p.calls.size(), 1u) << p.raw;
  EXPECT_TRUE(p.calls[0].arguments_not_json());
  EXPECT_EQ(p.calls[0].arguments(), "{pattern: evict");
}

TEST_F(ChatToolsTest, TemplateRefusalIsInvalidArgumentWithItsMessage) {
  v1::RenderPromptRequest render;
  render.set_model(kRefusing);
  FillConversation(Case("system_multiturn"), &render);
  v1::RenderPromptResponse rendered;
  grpc::Status st = Render(render, &rendered);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("System role not supported"), std::string::npos) << st.error_message();
  Parsed p = GenerateParsed(kRefusing, Case("system_multiturn"));
  EXPECT_EQ(p.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(p.status.error_message().find("System role not supported"), std::string::npos);
}

TEST_F(ChatToolsTest, MalformedToolsAndArgumentsAreInvalidArgument) {
  v1::RenderPromptRequest req;
  req.set_model(kQwen);
  FillConversation(Case("agent_loop"), &req);
  req.mutable_messages(2)->mutable_tool_calls(0)->set_arguments("{\"pattern\": ");
  v1::RenderPromptResponse resp;
  grpc::Status st = Render(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("messages[2].tool_calls[0]"), std::string::npos) << st.error_message();

  req.clear_messages();
  FillConversation(Case("agent_loop"), &req);
  req.set_tools("{\"not\": \"an array\"}");
  st = Render(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("tools"), std::string::npos) << st.error_message();

  req.set_tools("");
  req.set_template_args("[1]");
  st = Render(req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  GenerateRequest parts = Req(kQwen, Ids(4), 1);
  parts.set_tools("[]");
  EXPECT_EQ(client_->Generate(parts).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ChatToolsTest, ListModelsNamesTheOverride) {
  v1::ListModelsResponse resp;
  ASSERT_TRUE(client_->ListModels(&resp).ok());
  int seen = 0;
  for (const auto& m : resp.models()) {
    if (m.name() == kQwen) {
      EXPECT_EQ(m.chat_template(), "file:" + testing::SharedPath(kQwenTemplate));
      ++seen;
    }
  }
  EXPECT_EQ(seen, 1);
}

}  // namespace
}  // namespace cairn::service::e2e
