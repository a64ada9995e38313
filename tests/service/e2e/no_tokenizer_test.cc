// End-to-end tests (service_fixture.h): a GGUF file without a tokenizer
// (tokenizer.ggml.model "none", as llama.cpp accepts) is served for token
// ids over real gRPC; text, messages, stop strings and RenderPrompt get
// INVALID_ARGUMENT saying to send token ids.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "synthetic/architectures.h"
#include "tests/service/e2e/service_fixture.h"
#include "tests/testing/temp_dir.h"

namespace cairn::service::e2e {
namespace {

class NoTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    synthetic::SyntheticModel m = synthetic::Llama({});  // writes no tokenizer keys
    m.metadata().SetString("tokenizer.ggml.model", "none");
    auto bytes = m.Serialize();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    server_ = ServeGguf("bare", *bytes, dir_.path());
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<Client>(server_->port());
  }

  // A Generate refused with INVALID_ARGUMENT whose message names the model
  // and says it has no tokenizer.
  void ExpectRefused(const GenerateRequest& req) {
    Result r = client_->Generate(req);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << r.status.error_message();
    EXPECT_NE(r.status.error_message().find("model 'bare' has no tokenizer"), std::string::npos)
        << r.status.error_message();
    EXPECT_TRUE(r.ids.empty());
  }

  testing::TempDir dir_{"cairn-no-tokenizer"};
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(NoTokenizerTest, ListModelsSaysItHasNoTokenizer) {
  v1::ListModelsResponse resp;
  ASSERT_TRUE(client_->ListModels(&resp).ok());
  ASSERT_EQ(resp.models_size(), 1);
  EXPECT_EQ(resp.models(0).name(), "bare");
  EXPECT_FALSE(resp.models(0).has_tokenizer());
  EXPECT_EQ(resp.models(0).chat_template(), "");
}

TEST_F(NoTokenizerTest, TokenIdsAreServed) {
  Result a = client_->Generate(Req("bare", {1, 17, 42, 99, 5}, 6));
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  EXPECT_EQ(a.ids.size(), 6u);
  EXPECT_TRUE(a.has_finished);
  EXPECT_EQ(a.finished.usage().prompt_tokens(), 5);
  // Greedy: the same ids again, and stop token ids still apply.
  Result b = client_->Generate(Req("bare", {1, 17, 42, 99, 5}, 6));
  ASSERT_TRUE(b.status.ok()) << b.status.error_message();
  EXPECT_EQ(b.ids, a.ids);
  GenerateRequest stop = Req("bare", {1, 17, 42, 99, 5}, 6);
  stop.mutable_stop()->add_stop_token_ids(a.ids[2]);
  Result c = client_->Generate(stop);
  ASSERT_TRUE(c.status.ok()) << c.status.error_message();
  EXPECT_LE(c.ids.size(), 3u);
}

TEST_F(NoTokenizerTest, TextMessagesAndStopStringsAreInvalidArguments) {
  GenerateRequest text;
  text.set_model("bare");
  text.add_parts()->set_text("hello");
  ExpectRefused(text);
  GenerateRequest messages;
  messages.set_model("bare");
  v1::ChatMessage* msg = messages.add_messages();
  msg->set_role("user");
  msg->set_content("hello");
  ExpectRefused(messages);
  GenerateRequest stop = Req("bare", {1, 2, 3}, 4);
  stop.mutable_stop()->add_stop_strings("x");
  ExpectRefused(stop);

  v1::RenderPromptRequest render;
  render.set_model("bare");
  v1::ChatMessage* m = render.add_messages();
  m->set_role("user");
  m->set_content("hello");
  v1::RenderPromptResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = client_->stub().RenderPrompt(&ctx, render, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("has no tokenizer"), std::string::npos) << s.error_message();

  // The refusals changed nothing: token ids are still served.
  EXPECT_TRUE(client_->Generate(Req("bare", {1, 2, 3}, 2)).status.ok());
}

}  // namespace
}  // namespace cairn::service::e2e
