// TlsContext (service/http/tls_context.h) on its own: what its files must
// be, and sessions made from it. Handshakes, mutual TLS and rotation under a
// running server are in https_test.cc.
#include "service/http/tls_context.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "tests/testing/test_certificates.h"

namespace cairn::service::http {
namespace {

class TlsContextTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certs_ = new cairn::testing::TestCertificateDir("cairn-tls-context"); }
  static void TearDownTestSuite() { delete certs_; }
  void SetUp() override { ASSERT_TRUE(certs_->made()) << "openssl failed"; }
  static TlsFiles Files(const std::string& cert, const std::string& key, const std::string& client_ca = "") {
    const std::string d = certs_->path() + "/";
    return {d + cert, d + key, client_ca.empty() ? "" : d + client_ca, std::chrono::seconds(1)};
  }
  static inline cairn::testing::TestCertificateDir* certs_ = nullptr;
};

TEST_F(TlsContextTest, RefusesIncompleteUnreadableAndMismatchedFiles) {
  EXPECT_TRUE(TlsContext::Create(Files("server.pem", "server.key")).ok());
  EXPECT_TRUE(TlsContext::Create(Files("server.pem", "server.key", "ca.pem")).ok());
  const struct {
    TlsFiles files;
    absl::StatusCode code;
  } cases[] = {
      {Files("server.pem", "missing.key"), absl::StatusCode::kNotFound},
      {Files("server.pem", "server2.key"), absl::StatusCode::kInvalidArgument},               // another key
      {Files("server.key", "server.key"), absl::StatusCode::kInvalidArgument},                // no certificate
      {Files("server.pem", "server.pem"), absl::StatusCode::kInvalidArgument},                // no key
      {Files("server.pem", "server.key", "server.key"), absl::StatusCode::kInvalidArgument},  // CA without a cert
      {{"", "k", "", std::chrono::seconds(1)}, absl::StatusCode::kInvalidArgument},
  };
  for (const auto& c : cases) {
    const absl::Status st = TlsContext::Create(c.files).status();
    EXPECT_EQ(st.code(), c.code) << c.files.cert << " " << c.files.key << " " << c.files.client_ca << ": " << st;
  }
  TlsFiles fast = Files("server.pem", "server.key");
  fast.refresh = std::chrono::seconds(0);
  EXPECT_EQ(TlsContext::Create(fast).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TlsContextTest, MakesASessionPerConnection) {
  absl::StatusOr<std::unique_ptr<TlsContext>> tls = TlsContext::Create(Files("server.pem", "server.key", "ca.pem"));
  ASSERT_TRUE(tls.ok()) << tls.status();
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  absl::StatusOr<SslSession> a = (*tls)->NewSession(fds[0]);
  absl::StatusOr<SslSession> b = (*tls)->NewSession(fds[0]);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), nullptr);
  EXPECT_NE(a->get(), b->get());
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace cairn::service::http
