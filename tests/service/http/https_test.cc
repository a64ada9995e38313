// HTTPS on the HTTP door of a real in-process server (the gRPC port's TLS
// flags): a round trip with httplib's TLS client and certificates made by
// openssl at test time, mutual TLS, rotation of the files under a running
// server (and a mismatched pair that keeps the old one), and hostile bytes
// on the TLS port: plain HTTP, random bytes and a handshake that trickles
// are closed without harming the server.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/service/e2e/service_fixture.h"
#include "tests/testing/test_certificates.h"

namespace cairn::service::e2e {
namespace {

using Clock = std::chrono::steady_clock;

class HttpsTest : public ::testing::Test {
 protected:
  // One set of certificates for the suite (openssl takes seconds); the
  // rotation test rotates copies of them.
  static void SetUpTestSuite() { certs_ = new cairn::testing::TestCertificateDir("cairn-https"); }
  static void TearDownTestSuite() { delete certs_; }
  void SetUp() override { ASSERT_TRUE(certs_->made()) << "openssl failed"; }

  std::unique_ptr<Server> Start(const std::string& cert, const std::string& key, const std::string& client_ca = "",
                                std::chrono::milliseconds request_timeout = std::chrono::milliseconds(10000)) {
    ServerOptions opt = TestServerOptions();
    opt.models = {*ParseModelSpec("demo-transformer=demo-transformer")};
    opt.models_options.threads = 1;
    opt.http.listen = "127.0.0.1:0";
    opt.http.request_timeout = request_timeout;
    opt.tls_cert = dir_ + "/" + cert;
    opt.tls_key = dir_ + "/" + key;
    if (!client_ca.empty()) opt.tls_client_ca = dir_ + "/" + client_ca;
    opt.credentials_refresh = std::chrono::seconds(1);
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(opt);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  // GET `path` over a new TLS connection trusting `trust`.pem, with the
  // client certificate `client`.pem ("": none): the status, 0 when the
  // handshake (or the connection) failed.
  int Get(int port, const std::string& trust, const std::string& client = "", const std::string& path = "/health") {
    const std::string cert = client.empty() ? "" : dir_ + "/" + client + ".pem";
    const std::string key = client.empty() ? "" : dir_ + "/" + client + ".key";
    httplib::SSLClient cli("127.0.0.1", port, cert, key);
    cli.set_ca_cert_path((dir_ + "/" + trust + ".pem").c_str());
    cli.enable_server_certificate_verification(true);
    cli.set_connection_timeout(10, 0);
    cli.set_read_timeout(10, 0);
    httplib::Result r = cli.Get(path.c_str());
    return r ? r->status : 0;
  }

  void Install(const std::string& live, const std::string& from) {
    cairn::testing::InstallTestFile(dir_ + "/" + live, cairn::testing::ReadTestFile(dir_ + "/" + from));
  }

  static inline cairn::testing::TestCertificateDir* certs_ = nullptr;
  const std::string dir_ = certs_->path();
};

// `done` comes true within `seconds` (asked every 200 ms).
bool WithinSeconds(int seconds, const std::function<bool()>& done) {
  for (const Clock::time_point until = Clock::now() + std::chrono::seconds(seconds); Clock::now() < until;) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return done();
}

// A raw TCP connection to the port (-1 when it cannot connect).
int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `bytes`, `step` bytes every `pause`, and returns how long after the
// connection the server closed it (reading whatever it sent first), or
// `give_up` when it did not.
Clock::duration ClosedAfter(int port, const std::string& bytes, size_t step, std::chrono::milliseconds pause,
                            std::chrono::seconds give_up) {
  const int fd = Connect(port);
  if (fd < 0) return Clock::duration::zero();
  const Clock::time_point start = Clock::now();
  size_t sent = 0;
  while (Clock::now() - start < give_up) {
    if (sent < bytes.size()) {
      const size_t n = std::min(step, bytes.size() - sent);
      if (::send(fd, bytes.data() + sent, n, MSG_NOSIGNAL) < 0) break;  // reset: closed
      sent += n;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(pause.count())) > 0) {
      char buf[4096];
      if (::recv(fd, buf, sizeof(buf), 0) <= 0) break;  // closed (an alert may come first)
    }
  }
  const Clock::duration took = Clock::now() - start;
  ::close(fd);
  return took;
}

TEST_F(HttpsTest, ServesHttpsWithTheGrpcPortsCertificate) {
  std::unique_ptr<Server> server = Start("server.pem", "server.key");
  ASSERT_NE(server, nullptr);
  const int port = server->http_port();
  EXPECT_EQ(Get(port, "server"), 200);
  // A completion through the TLS stream, both ways.
  httplib::SSLClient cli("127.0.0.1", port);
  cli.set_ca_cert_path((dir_ + "/server.pem").c_str());
  cli.enable_server_certificate_verification(true);
  const nlohmann::json body = {{"model", kTf}, {"prompt", Ids(6)}, {"max_tokens", 5}, {"temperature", 0}};
  httplib::Result r = cli.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body)["usage"]["completion_tokens"], 5);
  // Kept alive: a second request on the same TLS connection.
  httplib::Result again = cli.Get("/v1/models");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  // A client that does not trust the certificate is refused; plain HTTP
  // gets no answer.
  EXPECT_EQ(Get(port, "server2"), 0);
  httplib::Client plain("127.0.0.1", port);
  plain.set_read_timeout(5, 0);
  EXPECT_FALSE(plain.Get("/health"));
  EXPECT_EQ(Get(port, "server"), 200);
}

TEST_F(HttpsTest, MutualTlsRequiresAClientCertificateOfTheCa) {
  std::unique_ptr<Server> server = Start("server.pem", "server.key", "ca.pem");
  ASSERT_NE(server, nullptr);
  const int port = server->http_port();
  EXPECT_EQ(Get(port, "server", "client"), 200);
  EXPECT_EQ(Get(port, "server"), 0);
  EXPECT_EQ(Get(port, "server", "client2"), 0);  // another CA's
  EXPECT_EQ(Get(port, "server", "client"), 200);
}

// A cert-manager style rotation: the next connection gets the new
// certificate and client CA without a restart; a key that does not match
// its certificate (a pair half written) keeps the previous pair.
TEST_F(HttpsTest, RotatedFilesServeTheNextConnectionAndAMismatchKeepsTheOld) {
  Install("live.pem", "server.pem");
  Install("live.key", "server.key");
  Install("live-ca.pem", "ca.pem");
  std::unique_ptr<Server> server = Start("live.pem", "live.key", "live-ca.pem");
  ASSERT_NE(server, nullptr);
  const int port = server->http_port();
  ASSERT_EQ(Get(port, "server", "client"), 200);
  // An open connection keeps its session across the rotation.
  httplib::SSLClient open("127.0.0.1", port, dir_ + "/client.pem", dir_ + "/client.key");
  open.set_ca_cert_path((dir_ + "/server.pem").c_str());
  open.enable_server_certificate_verification(true);
  open.set_keep_alive(true);
  const auto open_health = [&open] {
    httplib::Result r = open.Get("/health");
    return r ? r->status : 0;
  };
  ASSERT_EQ(open_health(), 200);

  Install("live.key", "server2.key");
  Install("live.pem", "server2.pem");
  Install("live-ca.pem", "ca2.pem");
  ASSERT_TRUE(WithinSeconds(20, [&] { return Get(port, "server2", "client2") == 200; }));
  EXPECT_EQ(Get(port, "server", "client2"), 0);  // the old certificate is no longer served
  EXPECT_EQ(Get(port, "server2", "client"), 0);  // the old CA's clients are refused
  EXPECT_EQ(open_health(), 200);

  // Half a rotation: the new key beside the current certificate.
  Install("live.key", "server.key");
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // two refresh intervals
  EXPECT_EQ(Get(port, "server2", "client2"), 200);
  // The matching certificate completes it.
  Install("live.pem", "server.pem");
  EXPECT_TRUE(WithinSeconds(20, [&] { return Get(port, "server", "client2") == 200; }));
}

TEST_F(HttpsTest, PlainHttpRandomBytesAndATricklingHandshakeAreClosed) {
  std::unique_ptr<Server> server = Start("server.pem", "server.key", "", std::chrono::milliseconds(1000));
  ASSERT_NE(server, nullptr);
  const int port = server->http_port();
  const auto fast = std::chrono::milliseconds(50);
  EXPECT_LT(ClosedAfter(port, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 1 << 20, fast, std::chrono::seconds(10)),
            std::chrono::seconds(3));
  std::mt19937 rng(7);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  EXPECT_LT(ClosedAfter(port, noise, 1 << 20, fast, std::chrono::seconds(10)), std::chrono::seconds(3));
  // A ClientHello's record header, then its body a byte at a time, each
  // within the I/O timeout: the request deadline (1 s) closes it.
  std::string hello = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, static_cast<char>(0xfc), 0x03, 0x03};
  hello.resize(400, 'x');
  const Clock::duration trickled =
      ClosedAfter(port, hello, 1, std::chrono::milliseconds(100), std::chrono::seconds(10));
  EXPECT_GE(trickled, std::chrono::milliseconds(900));
  EXPECT_LT(trickled, std::chrono::seconds(4));
  // The server serves on, TLS and gRPC.
  EXPECT_EQ(Get(port, "server"), 200);
  grpc::SslCredentialsOptions trust;
  trust.pem_root_certs = cairn::testing::ReadTestFile(dir_ + "/server.pem");
  Client grpc_client(grpc::CreateChannel("127.0.0.1:" + std::to_string(server->port()), grpc::SslCredentials(trust)),
                     "");
  v1::ListModelsResponse models;
  EXPECT_TRUE(grpc_client.ListModels(&models).ok());
}

TEST_F(HttpsTest, BadTlsFilesAreAStartError) {
  ServerOptions opt = TestServerOptions();
  opt.models_options.threads = 1;
  opt.http.listen = "127.0.0.1:0";
  opt.tls_cert = dir_ + "/server.pem";
  opt.tls_key = dir_ + "/server2.key";  // not the certificate's
  const absl::Status st = Server::Create(opt).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("does not match"), std::string::npos) << st;
  opt.tls_key = dir_ + "/server.key";
  opt.tls_cert = dir_ + "/client.csr";  // not a certificate
  EXPECT_EQ(Server::Create(opt).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::service::e2e
