// End-to-end tests (service_fixture.h): backpressure: a client that stops reading pauses its own
// request, then loses it, while the others are served.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "service/scheduling/scheduler.h"
#include "tests/service/e2e/service_fixture.h"

namespace cairn::service::e2e {
namespace {

// Backpressure (scheduler.h): a client that stops reading pauses its request
// once max_unacknowledged_tokens are unwritten, the others go on, and a stall
// beyond stalled_stream (--stalled-stream-seconds) ends it.
class BackpressureTest : public ::testing::Test {
 protected:
  void Start(std::chrono::milliseconds stall) {
    ServerOptions opt = TestServerOptions();
    opt.models_options.threads = 2;
    opt.scheduler.stalled_stream = stall;
    opt.scheduler.max_batch = 1;  // a paused stream must not hold the only place
    auto s = Server::Create(opt);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    client_ = std::make_unique<Client>(server_->port());
  }
  // A client whose HTTP/2 receive window stays small (no BDP growth), so
  // that what the transport takes before the server's writes block is a
  // known bound: kWindowBytes, at least 8 bytes per token message.
  static constexpr int kWindowBytes = 4096;
  std::unique_ptr<Client> SmallWindowClient() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kWindowBytes);
    return std::make_unique<Client>(grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server_->port()),
                                                              grpc::InsecureChannelCredentials(), args),
                                    "");
  }
  Scheduler& SchedulerOf(const char* model) { return *(*server_->models().Find(model))->scheduler; }
  double Generated() { return server_->metrics().scheduler.generated_tokens->Value(); }
  // Polls `cond` for up to a minute (a condition to wait for, not a timing).
  static bool Eventually(const std::function<bool()>& cond) {
    for (int i = 0; i < 6000; ++i) {
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // Waits until the request is paused and its handler blocked in a write
  // the client does not read (no token generated for a second).
  bool WaitForStall(const char* model) {
    double last = -1;
    int quiet = 0;
    return Eventually([&] {
      const double now = Generated();
      quiet = (now == last && SchedulerOf(model).paused() == 1) ? quiet + 1 : 0;
      last = now;
      return quiet >= 100;
    });
  }
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(BackpressureTest, AStalledReaderPausesItsRequestAndOthersAreServed) {
  Start(std::chrono::minutes(10));
  const std::string sid = client_->Create(kRec);
  GenerateRequest endless = Req(kRec, Ids(8), 1 << 20);  // the context is 1M positions
  endless.set_session_id(sid);
  endless.set_append(true);
  grpc::ClientContext ctx;
  std::unique_ptr<Client> small = SmallWindowClient();
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> stalled = small->stub().Generate(&ctx, endless);
  ASSERT_TRUE(WaitForStall(kRec));
  const double at_pause = Generated();
  std::printf("generated while the client read nothing: %.0f tokens (max_tokens %d)\n", at_pause, 1 << 20);
  // At most 32 beyond what the client's flow-control window took.
  EXPECT_LE(at_pause, 32 + kWindowBytes / 8);

  // Another client on the same model is served meanwhile (the paused
  // request does not hold the batch's only place), and the paused request
  // does not advance. (The deadline only keeps a failure from hanging.)
  Client other(server_->port());
  const Result r = other.Generate(Req(kRec, Ids(5, 400), 20), 60);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids.size(), 20u);
  EXPECT_EQ(Generated(), at_pause + 20);
  EXPECT_EQ(SchedulerOf(kRec).paused(), 1u);

  // Reading resumes it.
  v1::GenerateResponse ev;
  int read = 0;
  while (read < static_cast<int>(at_pause) + 100 && stalled->Read(&ev)) read += ev.has_token() ? 1 : 0;
  EXPECT_EQ(read, static_cast<int>(at_pause) + 100);
  ctx.TryCancel();
  EXPECT_EQ(stalled->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // Cancelled: the session keeps the history it had.
  EXPECT_EQ(client_->GetIdle(sid).tokens(), 0);
}

TEST_F(BackpressureTest, AStalledReaderIsEndedAfterTheLimitAndItsSessionIsUnchanged) {
  Start(std::chrono::seconds(1));
  const std::string sid = client_->Create(kRec);
  GenerateRequest endless = Req(kRec, Ids(8), 1 << 20);
  endless.set_session_id(sid);
  endless.set_append(true);
  grpc::ClientContext ctx;
  std::unique_ptr<Client> small = SmallWindowClient();
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> stalled = small->stub().Generate(&ctx, endless);
  // Others are served while it stalls.
  Client other(server_->port());
  EXPECT_TRUE(other.Generate(Req(kRec, Ids(5, 400), 20)).status.ok());
  // The server ends it by itself: the session is released.
  ASSERT_TRUE(Eventually([&] {
    auto s = client_->Get(sid, false);
    return s.ok() && !s->busy();
  }));
  EXPECT_EQ(SchedulerOf(kRec).running(), 0u);
  const double generated = Generated() - 20;
  std::vector<int32_t> received;
  v1::GenerateResponse ev;
  while (stalled->Read(&ev)) {
    if (ev.has_token()) received.push_back(ev.token().id());
  }
  EXPECT_EQ(stalled->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // Ended without OK: the session keeps the history it had (none).
  const v1::SessionInfo info = client_->GetIdle(sid);
  std::printf("generated %.0f, the client read %zu\n", generated, received.size());
  EXPECT_EQ(info.tokens(), 0);
  EXPECT_LE(generated, 32 + kWindowBytes / 8);
  EXPECT_LE(received.size(), generated);
}

}  // namespace
}  // namespace cairn::service::e2e
