// End-to-end (service_fixture.h): a well-formed GGUF whose weights hold a
// NaN (tampered bytes, a broken conversion) is served, but a logit that
// comes out NaN fails its request with INTERNAL naming the token, over real
// gRPC: no token picked from noise, and the session keeps what it had.
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "synthetic/architectures.h"
#include "tests/service/e2e/service_fixture.h"
#include "tests/testing/temp_dir.h"

namespace cairn::service::e2e {
namespace {

constexpr int kPoisoned = 7;  // the token whose output row holds a NaN

class TamperedWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    synthetic::SyntheticModel m = synthetic::Llama({});
    m.metadata().SetString("tokenizer.ggml.model", "none");
    const int64_t n_embd = synthetic::LlamaShape{}.n_embd;
    m.Values("output.weight")[kPoisoned * n_embd + 3] = std::numeric_limits<float>::quiet_NaN();
    auto bytes = m.Serialize();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    server_ = ServeGguf("nan", *bytes, dir_.path());
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<Client>(server_->port());
  }

  testing::TempDir dir_{"cairn-tampered-weights"};
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(TamperedWeightsTest, ANaNLogitFailsTheRequestAndLeavesTheSession) {
  const std::string sid = client_->Create("nan");
  ASSERT_FALSE(sid.empty());
  const auto before = client_->Get(sid);
  ASSERT_TRUE(before.ok()) << before.status();
  for (float temperature : {0.0f, 0.8f}) {
    GenerateRequest req = Req("nan", {1, 17, 42, 99, 5}, 4);
    req.set_session_id(sid);
    req.set_append(true);
    req.mutable_sampling()->set_temperature(temperature);
    Result r = client_->Generate(req);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INTERNAL) << r.status.error_message();
    EXPECT_NE(r.status.error_message().find("NaN for the logit of token id " + std::to_string(kPoisoned)),
              std::string::npos)
        << r.status.error_message();
    EXPECT_TRUE(r.ids.empty());
  }
  const auto after = client_->Get(sid);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->token_ids().size(), before->token_ids().size());
  // The server serves on.
  v1::ListModelsResponse models;
  EXPECT_TRUE(client_->ListModels(&models).ok());
}

}  // namespace
}  // namespace cairn::service::e2e
