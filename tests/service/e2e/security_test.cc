// End-to-end tests (service_fixture.h): bearer tokens (sessions and the prefix cache per tenant)
// and TLS, mutual TLS.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "service/host/models.h"
#include "tests/service/e2e/service_fixture.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/test_certificates.h"

namespace cairn::service::e2e {
namespace {

TEST(ServiceAuthTest, TokensAuthenticateAndPartitionSessionsAndCache) {
  for (bool share : {false, true}) {
    SCOPED_TRACE(share ? "shared cache" : "partitioned cache");
    ServerOptions opt = TestServerOptions();
    opt.models = {*ParseModelSpec("rec=demo-recurrent")};
    opt.auth_tokens = {"alpha-token", "beta-token"};
    opt.share_prefix_cache = share;
    auto server = Server::Create(opt);
    ASSERT_TRUE(server.ok()) << server.status();
    const int port = (*server)->port();
    Client none(port), wrong(port, "gamma-token"), alpha(port, "alpha-token"), beta(port, "beta-token");
    v1::ListModelsResponse models;
    EXPECT_EQ(none.ListModels(&models).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(wrong.ListModels(&models).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_TRUE(alpha.ListModels(&models).ok());
    EXPECT_EQ(none.Generate(Req("rec", Ids(4), 2)).status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    v1::SessionRequest list;
    list.mutable_list();
    v1::SessionResponse resp;
    EXPECT_EQ(wrong.Session(list, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);

    // Sessions belong to the token that created them.
    const std::string sid = alpha.Create("rec");
    GenerateRequest turn = Req("rec", Ids(10), 3);
    turn.set_session_id(sid);
    turn.set_append(true);
    ASSERT_TRUE(alpha.Generate(turn).status.ok());
    EXPECT_EQ(beta.Generate(turn).status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(beta.Get(sid).status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(beta.Rewind(sid, 0), grpc::StatusCode::PERMISSION_DENIED);
    v1::SessionRequest del;
    del.mutable_delete_()->set_session_id(sid);
    EXPECT_EQ(beta.Session(del, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    ASSERT_TRUE(beta.Session(list, &resp).ok());
    EXPECT_EQ(resp.sessions().sessions_size(), 0);
    ASSERT_TRUE(alpha.Session(list, &resp).ok());
    EXPECT_EQ(resp.sessions().sessions_size(), 1);

    // The prefix cache: alpha's prompt is reused by beta only when shared.
    const std::vector<int32_t> secret = Ids(48, 320);
    ASSERT_TRUE(alpha.Generate(Req("rec", secret, 2)).status.ok());
    Result again = alpha.Generate(Req("rec", Concat(secret, {7}), 2));
    ASSERT_TRUE(again.status.ok());
    EXPECT_GE(again.prompt.reused_tokens(), 48);
    Result other = beta.Generate(Req("rec", Concat(secret, {9}), 2));
    ASSERT_TRUE(other.status.ok());
    if (share) {
      EXPECT_GE(other.prompt.reused_tokens(), 48);
    } else {
      EXPECT_EQ(other.prompt.reused_tokens(), 0);
    }
  }
}

// Certificates made at test time (test_certificates.h).
class ServiceTlsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cairn::testing::MakeTestCertificates(dir_)) << "openssl failed"; }
  std::string Read(const std::string& name) { return cairn::testing::ReadTestFile(dir_ + "/" + name); }
  std::shared_ptr<grpc::Channel> Channel(int port, bool with_client_cert) {
    return Channel(port, "server", with_client_cert ? "client" : "");
  }
  // A channel of its own (a new connection) trusting `server`.pem, with the
  // client certificate `client`.pem ("": none).
  std::shared_ptr<grpc::Channel> Channel(int port, const std::string& server, const std::string& client) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Read(server + ".pem");
    if (!client.empty()) {
      ssl.pem_private_key = Read(client + ".key");
      ssl.pem_cert_chain = Read(client + ".pem");
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::SslCredentials(ssl), args);
  }
  void Install(const std::string& live, const std::string& contents) {
    cairn::testing::InstallTestFile(dir_ + "/" + live, contents);
  }
  cairn::testing::TempDir temp_{"cairn-tls"};
  const std::string dir_ = temp_.path();
};

TEST_F(ServiceTlsTest, ServesTlsAndRefusesPlaintext) {
  ServerOptions opt = TestServerOptions();
  opt.models = {*ParseModelSpec("tf=demo-transformer")};
  opt.tls_cert = dir_ + "/server.pem";
  opt.tls_key = dir_ + "/server.key";
  auto server = Server::Create(opt);
  ASSERT_TRUE(server.ok()) << server.status();
  Client tls(Channel((*server)->port(), false), "");
  v1::ListModelsResponse models;
  grpc::Status st = tls.ListModels(&models);
  ASSERT_TRUE(st.ok()) << st.error_message();
  Result r = tls.Generate(Req("tf", Ids(5), 4));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.ids.size(), 4u);
  Client plain((*server)->port());
  EXPECT_EQ(plain.ListModels(&models).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(ServiceTlsTest, MutualTlsRequiresAClientCertificate) {
  ServerOptions opt = TestServerOptions();
  opt.models = {*ParseModelSpec("tf=demo-transformer")};
  opt.tls_cert = dir_ + "/server.pem";
  opt.tls_key = dir_ + "/server.key";
  opt.tls_client_ca = dir_ + "/ca.pem";
  opt.auth_tokens = {"tok"};
  auto server = Server::Create(opt);
  ASSERT_TRUE(server.ok()) << server.status();
  v1::ListModelsResponse models;
  Client with_cert(Channel((*server)->port(), true), "tok");
  grpc::Status st = with_cert.ListModels(&models);
  EXPECT_TRUE(st.ok()) << st.error_message();
  Client no_token(Channel((*server)->port(), true), "");
  EXPECT_EQ(no_token.ListModels(&models).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  Client no_cert(Channel((*server)->port(), false), "tok");
  EXPECT_EQ(no_cert.ListModels(&models).error_code(), grpc::StatusCode::UNAVAILABLE);
  opt.tls_key.clear();
  EXPECT_EQ(Server::Create(opt).status().code(), absl::StatusCode::kInvalidArgument);
}

// A cert-manager style rotation under a running server: the certificate and
// key, the client CA and the token file are replaced while a stream runs.
// New connections get the new certificate and need a client certificate of
// the new CA and a new token; the stream opened before goes on to its end.
TEST_F(ServiceTlsTest, RotatedCertificatesClientCaAndTokensTakeEffectWithoutARestart) {
  Install("live.pem", Read("server.pem"));
  Install("live.key", Read("server.key"));
  Install("live-ca.pem", Read("ca.pem"));
  Install("tokens", "old-token\n");
  ServerOptions opt = TestServerOptions();
  opt.models = {*ParseModelSpec("rec=demo-recurrent")};
  opt.models_options.threads = 1;
  opt.tls_cert = dir_ + "/live.pem";
  opt.tls_key = dir_ + "/live.key";
  opt.tls_client_ca = dir_ + "/live-ca.pem";
  opt.auth_token_file = dir_ + "/tokens";
  opt.credentials_refresh = std::chrono::seconds(1);
  // The stream waits unread while the test rotates: no stall timeout then.
  opt.scheduler.stalled_stream = std::chrono::seconds(300);
  auto server = Server::Create(opt);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  v1::ListModelsResponse models;
  Client before(Channel(port, "server", "client"), "old-token");
  ASSERT_TRUE(before.ListModels(&models).ok());

  constexpr int kTokens = 300;
  bool rotated = false;
  Result stream = before.Generate(Req("rec", Ids(8), kTokens), 0, [&](grpc::ClientContext&, int n) {
    if (n != 1) return;
    Install("live.key", Read("server2.key"));
    Install("live.pem", Read("server2.pem"));
    Install("live-ca.pem", Read("ca2.pem"));
    Install("tokens", "# rotated\nnew-token\n");
    // Within a few refresh intervals a new connection gets the new
    // certificate and the new CA and token are in force.
    grpc::Status st;
    for (int attempt = 0; attempt < 100 && !rotated; ++attempt) {
      Client after(Channel(port, "server2", "client2"), "new-token");
      st = after.ListModels(&models);
      rotated = st.ok();
      if (!rotated) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ASSERT_TRUE(rotated) << st.error_message();
    // The old certificate is no longer served, the old CA's clients and the
    // old token are refused.
    Client old_trust(Channel(port, "server", "client2"), "new-token");
    EXPECT_EQ(old_trust.ListModels(&models).error_code(), grpc::StatusCode::UNAVAILABLE);
    Client old_client_cert(Channel(port, "server2", "client"), "new-token");
    EXPECT_EQ(old_client_cert.ListModels(&models).error_code(), grpc::StatusCode::UNAVAILABLE);
    Client old_token(Channel(port, "server2", "client2"), "old-token");
    EXPECT_EQ(old_token.ListModels(&models).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    // On the connection opened before, a new call with the old token is
    // refused too (the running stream was let in before).
    EXPECT_EQ(before.ListModels(&models).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  });
  EXPECT_TRUE(rotated);
  ASSERT_TRUE(stream.status.ok()) << stream.status.error_message();
  EXPECT_EQ(stream.ids.size(), static_cast<size_t>(kTokens));
  EXPECT_EQ(stream.finished.reason(), v1::FINISH_REASON_LENGTH);
}

}  // namespace
}  // namespace cairn::service::e2e
