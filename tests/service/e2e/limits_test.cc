// End-to-end tests (service_fixture.h): bounds of a server with small limits (sessions, idle
// time, queue, concurrent calls), model specs and load errors, checkpoints on disk after a
// restart.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "service/host/models.h"
#include "service/scheduling/scheduler.h"
#include "tests/service/e2e/service_fixture.h"

namespace cairn::service::e2e {
namespace {

// A server for the one model `spec` names, with the options `configure`
// sets; null (and a failure) when it does not start.
std::unique_ptr<Server> ServeOne(const std::string& spec, const std::function<void(ServerOptions&)>& configure) {
  ServerOptions opt = TestServerOptions();
  opt.models = {*ParseModelSpec(spec)};
  configure(opt);
  auto server = Server::Create(opt);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

// A server with small limits, for the bounds.
TEST(ServiceLimitsTest, SessionCountAndIdleTimeAreBounded) {
  ServerOptions opt = TestServerOptions();
  opt.models = {*ParseModelSpec("tiny=demo-transformer")};
  opt.sessions.max_sessions = 2;
  opt.sessions.idle_timeout = std::chrono::seconds(1);
  auto server = Server::Create(opt);
  ASSERT_TRUE(server.ok()) << server.status();
  Client c((*server)->port());
  const std::string a = c.Create("tiny");
  c.Create("tiny");
  v1::SessionRequest create;
  create.mutable_create()->set_model("tiny");
  v1::SessionResponse resp;
  EXPECT_EQ(c.Session(create, &resp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Idle sessions expire (the sweep runs every second): then a is NOT_FOUND
  // and there is room again.
  // (List does not count as a use; Get would keep it alive.)
  auto listed = [&] {
    v1::SessionRequest list;
    list.mutable_list();
    v1::SessionResponse r;
    EXPECT_TRUE(c.Session(list, &r).ok());
    for (const auto& s : r.sessions().sessions()) {
      if (s.session_id() == a) return true;
    }
    return false;
  };
  while (listed()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(c.Get(a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(c.Session(create, &resp).ok());
}

// --max-tokens-default applies when a request sets no max_tokens, and
// --max-tokens-limit caps a larger one: the reply ends at the cap with
// FINISH_REASON_LENGTH, and the budget reserves only what the cap allows.
TEST(ServiceLimitsTest, MaxTokensHasAServerDefaultAndLimit) {
  std::unique_ptr<Server> server = ServeOne("rec=demo-recurrent", [](ServerOptions& opt) {
    opt.limits.default_max_tokens = 7;
    opt.limits.max_tokens_limit = 40;
  });
  ASSERT_NE(server, nullptr);
  Client c(server->port());
  GenerateRequest unset = Req("rec", Ids(4), 0);
  unset.mutable_stop()->clear_max_tokens();
  Result r = c.Generate(unset);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids.size(), 7u);
  r = c.Generate(Req("rec", Ids(4), 1 << 20));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.ids.size(), 40u);
  EXPECT_EQ(r.finished.reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(c.Generate(Req("rec", Ids(4), 12)).ids.size(), 12u);  // below the limit: as asked
}

TEST(ServiceLimitsTest, ModelSpecsAndLoadErrors) {
  auto s = ParseModelSpec("chat=/models/x.gguf:transformer");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->name, "chat");
  EXPECT_EQ(s->path, "/models/x.gguf");
  EXPECT_EQ(s->family, "transformer");
  s = ParseModelSpec("/models/stories260K.gguf");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->name, "stories260K");
  EXPECT_TRUE(s->family.empty());
  EXPECT_FALSE(ParseModelSpec("x=").ok());
  ServerOptions opt = TestServerOptions();
  opt.models = {*ParseModelSpec("m=/nonexistent/model.gguf")};
  auto server = Server::Create(opt);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kNotFound);
  opt.models = {*ParseModelSpec("m=demo-recurrent:nosuchfamily")};
  EXPECT_EQ(Server::Create(opt).status().code(), absl::StatusCode::kNotFound);
}

TEST(ServiceLimitsTest, QueueAndConcurrencyBounds) {
  ServerOptions opt = TestServerOptions();
  opt.models = {*ParseModelSpec("tiny=demo-transformer")};
  opt.limits.max_concurrent_generate = 1;
  auto server = Server::Create(opt);
  ASSERT_TRUE(server.ok());
  Client c((*server)->port());
  grpc::StatusCode second = grpc::StatusCode::OK;
  Result first = c.Generate(Req("tiny", Ids(4), 3000), 0, [&](grpc::ClientContext& ctx, int n) {
    if (n == 1) {
      Client other((*server)->port());
      second = other.Generate(Req("tiny", Ids(4), 2)).status.error_code();
      ctx.TryCancel();
    }
  });
  EXPECT_EQ(second, grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(first.status.error_code(), grpc::StatusCode::CANCELLED);
}

// With a disk tier, a clean shutdown keeps the sessions' states and the RAM
// checkpoints on disk: after a restart the same conversation sent again is
// reused (not recomputed) and continues exactly as a fresh computation.
TEST(ServiceRestartTest, CheckpointsOnDiskServeAfterARestart) {
  char tmpl[] = "/tmp/cairn-restart-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  ServerOptions opt = TestServerOptions();
  opt.models_options.threads = 2;
  opt.models_options.checkpoint.disk_dir = dir;
  std::vector<int32_t> history = Ids(40);
  {
    auto first = Server::Create(opt);
    ASSERT_TRUE(first.ok()) << first.status();
    Client c((*first)->port());
    GenerateRequest t1 = Req(kRec, history, 6);
    t1.set_session_id(c.Create(kRec));
    Result r = c.Generate(t1);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    history = Concat(history, r.ids);
  }  // clean shutdown: sessions parked, the store persisted
  bool any_file = false;
  for (const auto& e : std::filesystem::directory_iterator(dir)) any_file |= e.is_regular_file();
  EXPECT_TRUE(any_file) << "nothing was written to " << dir;

  auto second = Server::Create(opt);
  ASSERT_TRUE(second.ok()) << second.status();
  Client c((*second)->port());
  const std::vector<int32_t> next = Concat(history, Ids(5, 420));
  Result r = c.Generate(Req(kRec, next, 6));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  // All but the reply's last token, which was sampled but never absorbed.
  EXPECT_EQ(r.prompt.reused_tokens(), static_cast<int32_t>(history.size()) - 1);
  EXPECT_EQ(r.prompt.recomputed_tokens(), 6);

  ServerOptions off = opt;
  off.models_options.checkpoint.disk_dir.clear();
  off.models_options.checkpoint.enabled = false;
  auto fresh = Server::Create(off);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  Client f((*fresh)->port());
  Result ref = f.Generate(Req(kRec, next, 6));
  ASSERT_TRUE(ref.status.ok()) << ref.status.error_message();
  EXPECT_EQ(ref.prompt.reused_tokens(), 0);
  EXPECT_EQ(r.ids, ref.ids);
  second->reset();
  std::filesystem::remove_all(dir);
}

TEST(ServiceLimitsTest, FullQueueIsResourceExhausted) {
  std::unique_ptr<Server> server = ServeOne("tiny=demo-transformer", [](ServerOptions& opt) {
    opt.scheduler.max_batch = 1;
    opt.scheduler.max_queue = 1;
  });
  ASSERT_NE(server, nullptr);
  Scheduler& sched = *(*server->models().Find("tiny"))->scheduler;
  const int port = server->port();
  Client c(port);
  grpc::StatusCode third = grpc::StatusCode::OK;
  Result second;
  std::thread waiting;
  Result first = c.Generate(Req("tiny", Ids(4), 3000), 0, [&](grpc::ClientContext& ctx, int n) {
    if (n != 1) return;
    // The first request holds the only decode slot: the second waits in
    // the queue, and a third finds the queue full.
    waiting = std::thread([&] { second = Client(port).Generate(Req("tiny", Ids(5), 3)); });
    while (sched.queue_depth() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(sched.running(), 1u);
    third = Client(port).Generate(Req("tiny", Ids(6), 3)).status.error_code();
    ctx.TryCancel();
  });
  waiting.join();
  EXPECT_EQ(first.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(third, grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_EQ(second.ids.size(), 3u);
}

// gRPC inflates a compressed message whole before its size is checked, so
// compressed requests are refused (UNIMPLEMENTED) before any inflating: a
// few MiB of gzip cannot ask the server for gigabytes. A small compressed
// request is refused alike (the rule is the encoding, not the size), and
// the same request uncompressed is served.
TEST(ServiceLimitsTest, CompressedRequestsAreRefusedBeforeInflating) {
  std::unique_ptr<Server> server = ServeOne("tiny=demo-transformer", [](ServerOptions&) {});
  ASSERT_NE(server, nullptr);
  Client c(server->port());
  for (grpc_compression_algorithm algorithm : {GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE}) {
    for (size_t text_bytes : {size_t{16}, size_t{3} << 20}) {
      GenerateRequest req;
      req.set_model("tiny");
      req.add_parts()->set_text(std::string(text_bytes, 'a'));
      req.mutable_stop()->set_max_tokens(1);
      grpc::ClientContext ctx;
      ctx.set_compression_algorithm(algorithm);
      auto reader = c.stub().Generate(&ctx, req);
      v1::GenerateResponse ev;
      while (reader->Read(&ev)) {
      }
      const grpc::Status st = reader->Finish();
      EXPECT_EQ(st.error_code(), grpc::StatusCode::UNIMPLEMENTED) << algorithm << " " << st.error_message();
      EXPECT_NE(st.error_message().find("is disabled"), std::string::npos) << st.error_message();
    }
  }
  Result plain = c.Generate(Req("tiny", Ids(4), 2));
  EXPECT_TRUE(plain.status.ok()) << plain.status.error_message();
  EXPECT_EQ(plain.ids.size(), 2u);
}

}  // namespace
}  // namespace cairn::service::e2e
