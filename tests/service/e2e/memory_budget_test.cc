// End-to-end tests (service_fixture.h): the live-memory budget (--memory-budget): a refused
// request changes nothing, and every kind of sequence shares one budget across models.
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "service/host/models.h"
#include "tests/service/e2e/service_fixture.h"

namespace cairn::service::e2e {
namespace {

// The live-memory budget (ServerOptions::memory_budget_bytes,
// --memory-budget): requests, session creates, forks and imports that would
// take live sequence memory beyond it are refused before anything changes.
class ServiceMemoryBudgetTest : public ::testing::Test {
 protected:
  // Starts a server serving `specs` with a budget of `budget(models)` bytes,
  // computed from the models' measured sequence sizes.
  void Start(const std::vector<std::string>& specs, const std::function<size_t(const ModelRegistry&)>& budget) {
    ServerOptions opt = TestServerOptions();
    opt.models_options.threads = 2;
    for (const std::string& spec : specs) opt.models.push_back(*ParseModelSpec(spec));
    {
      auto probe = Server::Create(opt);
      ASSERT_TRUE(probe.ok()) << probe.status();
      budget_ = budget((*probe)->models());
    }
    opt.memory_budget_bytes = budget_;
    auto s = Server::Create(opt);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    client_ = std::make_unique<Client>(server_->port());
  }
  const ServedModel& Model(const std::string& name) { return **server_->models().Find(name); }
  // A new session on `first.model()` after `first`, appended to it.
  std::string SessionAfter(GenerateRequest first) {
    const std::string sid = client_->Create(first.model());
    first.set_session_id(sid);
    first.set_append(true);
    const Result r = client_->Generate(first);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    return sid;
  }
  // `req` appended to session `sid`, which the budget refuses before
  // anything runs: its status message.
  std::string RefusedOnSession(GenerateRequest req, const std::string& sid) {
    req.set_session_id(sid);
    req.set_append(true);
    Result refused = client_->Generate(req);
    EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.status.error_message();
    EXPECT_FALSE(refused.has_prompt);
    EXPECT_TRUE(refused.ids.empty());
    return refused.status.error_message();
  }
  // Waits until no request holds a reservation beyond the sessions' (the
  // server finishes a call's bookkeeping after the client saw its end).
  size_t SettledInUse(size_t want) {
    for (int i = 0; i < 500 && server_->memory_budget().in_use() != want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return server_->memory_budget().in_use();
  }
  size_t budget_ = 0;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(ServiceMemoryBudgetTest, RefusedGenerateLeavesTheSessionExactlyAsItWas) {
  Start({"tf=demo-transformer"}, [](const ModelRegistry& r) { return (*r.Find("tf"))->SequenceBytes(600); });
  const ServedModel& tf = Model("tf");
  ASSERT_GT(tf.sequence_bytes_per_position, 0u);
  EXPECT_EQ(server_->memory_budget().budget(), budget_);
  // Exported, so that alerts compare the live memory with the budget itself.
  EXPECT_EQ(server_->metrics().memory_budget_bytes->Value(), static_cast<double>(budget_));
  EXPECT_NE(server_->metrics().Render().find("cairn_memory_budget_bytes " + std::to_string(budget_)),
            std::string::npos);

  const std::string sid = SessionAfter(Req("tf", Ids(100), 10));
  const v1::SessionInfo before = client_->GetIdle(sid);
  ASSERT_EQ(before.tokens(), 110);
  // A fork made before the refused request: the reference for "unchanged".
  v1::SessionRequest fork;
  fork.mutable_fork()->set_session_id(sid);
  v1::SessionResponse forked;
  ASSERT_TRUE(client_->Session(fork, &forked).ok());
  const std::string fid = forked.session().session_id();
  // Both hold 109 positions (the last token is pending) and the
  // bookkeeping of the 110 tokens of their history.
  const size_t held = tf.SequenceBytes(109) + ServedModel::kBookkeepingBytesPerSymbol;
  const size_t in_use = SettledInUse(2 * held);
  EXPECT_EQ(in_use, 2 * held);

  // 110 + 300 prompt positions + 200 new tokens: beyond 600 positions.
  const std::string msg = RefusedOnSession(Req("tf", Ids(300, 350), 200), sid);
  EXPECT_NE(msg.find("a prompt of 410 positions plus up to 200 new tokens on model 'tf'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(absl::StrCat("needs ", tf.SequenceBytes(610), " bytes")), std::string::npos) << msg;
  EXPECT_NE(msg.find(absl::StrCat(in_use, " bytes are in use")), std::string::npos) << msg;
  EXPECT_NE(msg.find(absl::StrCat("the budget is ", budget_, " bytes")), std::string::npos) << msg;
  EXPECT_EQ(server_->memory_budget().in_use(), in_use);

  // The session is exactly as before: same history, and the next request
  // gives the same tokens and log-probabilities as on the fork and as a
  // fresh computation.
  const v1::SessionInfo after = client_->GetIdle(sid);
  EXPECT_EQ(after.tokens(), before.tokens());
  EXPECT_EQ(std::vector<int32_t>(after.token_ids().begin(), after.token_ids().end()),
            std::vector<int32_t>(before.token_ids().begin(), before.token_ids().end()));
  auto next = [&](const std::string& id) {
    GenerateRequest r = Req("tf", Ids(3, 440), 5);
    r.set_session_id(id);
    r.set_append(true);
    r.set_logprobs(true);
    r.set_top_logprobs(3);
    grpc::ClientContext ctx;
    auto reader = client_->stub().Generate(&ctx, r);
    std::vector<std::pair<int32_t, float>> out;
    v1::GenerateResponse ev;
    while (reader->Read(&ev)) {
      if (!ev.has_token()) continue;
      out.emplace_back(ev.token().id(), ev.token().logprob());
      for (const auto& t : ev.token().top_logprobs()) out.emplace_back(t.id(), t.logprob());
    }
    EXPECT_TRUE(reader->Finish().ok());
    return out;
  };
  // (Ids equal; log-probabilities within float rounding: the fork may reuse
  // the session's new state, computed in another batch shape.)
  const auto on_session = next(sid);
  const auto on_fork = next(fid);
  ASSERT_EQ(on_session.size(), 5u * 4u);
  ASSERT_EQ(on_fork.size(), on_session.size());
  for (size_t i = 0; i < on_session.size(); ++i) {
    EXPECT_EQ(on_session[i].first, on_fork[i].first) << i;
    EXPECT_NEAR(on_session[i].second, on_fork[i].second, 1e-4) << i;
  }
  std::vector<int32_t> session_ids;
  for (size_t i = 0; i < on_session.size(); i += 4) session_ids.push_back(on_session[i].first);
  const std::vector<int32_t> hist(before.token_ids().begin(), before.token_ids().end());
  EXPECT_EQ(session_ids, client_->Generate(Req("tf", Concat(hist, Ids(3, 440)), 5)).ids);

  // Sessionless: a prompt beyond the budget on its own.
  Result alone = client_->Generate(Req("tf", Ids(700), 5));
  EXPECT_EQ(alone.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(alone.status.error_message().find("memory budget exceeded"), std::string::npos);

  // Deleting the sessions returns their bytes.
  v1::SessionRequest del;
  v1::SessionResponse resp;
  for (const std::string& id : {sid, fid}) {
    del.mutable_delete_()->set_session_id(id);
    EXPECT_TRUE(client_->Session(del, &resp).ok());
  }
  EXPECT_EQ(SettledInUse(0), 0u);
}

TEST_F(ServiceMemoryBudgetTest, CreateForkImportAndSessionlessShareOneBudgetAcrossModels) {
  // Room for two recurrent states and a half.
  Start({"rec=demo-recurrent", "tf=demo-transformer"},
        [](const ModelRegistry& r) { return (*r.Find("rec"))->SequenceBytes(0) * 5 / 2; });
  const ServedModel& rec = Model("rec");
  const ServedModel& tf = Model("tf");
  ASSERT_GT(rec.sequence_base_bytes, 0u);
  EXPECT_EQ(rec.sequence_bytes_per_position, 0u);  // fixed-size state
  const std::string a = client_->Create("rec");
  const std::string b = client_->Create("rec");
  EXPECT_EQ(SettledInUse(2 * rec.SequenceBytes(0)), 2 * rec.SequenceBytes(0));
  v1::SessionRequest create;
  create.mutable_create()->set_model("rec");
  v1::SessionResponse resp;
  grpc::Status st = client_->Session(create, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(st.error_message().find("a new session on model 'rec' needs"), std::string::npos) << st.error_message();

  GenerateRequest turn = Req("rec", Ids(20), 3);
  turn.set_session_id(a);
  turn.set_append(true);
  ASSERT_TRUE(client_->Generate(turn).status.ok());
  const v1::SessionInfo before = client_->GetIdle(a);

  v1::SessionRequest fork;
  fork.mutable_fork()->set_session_id(a);
  st = client_->Session(fork, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(st.error_message().find("a fork of session '" + a + "'"), std::string::npos) << st.error_message();

  v1::SessionRequest exp;
  exp.mutable_export_()->set_session_id(a);
  ASSERT_TRUE(client_->Session(exp, &resp).ok());
  v1::SessionRequest imp;
  imp.mutable_import()->set_snapshot(resp.snapshot());
  st = client_->Session(imp, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(st.error_message().find("an imported session of"), std::string::npos) << st.error_message();
  v1::SessionRequest list;
  list.mutable_list();
  ASSERT_TRUE(client_->Session(list, &resp).ok());
  EXPECT_EQ(resp.sessions().sessions_size(), 2);

  // Sessionless: no room for another recurrent state, but a short
  // transformer prompt fits in the rest (one budget, all models).
  EXPECT_EQ(client_->Generate(Req("rec", Ids(4), 2)).status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  ASSERT_LT(tf.SequenceBytes(4 + 2), budget_ - 2 * rec.SequenceBytes(0));
  EXPECT_TRUE(client_->Generate(Req("tf", Ids(4), 2)).status.ok());

  // Session a is unchanged by the refused fork and export; with b gone
  // there is room for a fresh computation to compare with.
  const v1::SessionInfo after = client_->GetIdle(a);
  EXPECT_EQ(after.tokens(), before.tokens());
  v1::SessionRequest del;
  del.mutable_delete_()->set_session_id(b);
  ASSERT_TRUE(client_->Session(del, &resp).ok());
  const std::vector<int32_t> hist(before.token_ids().begin(), before.token_ids().end());
  GenerateRequest next = Req("rec", Ids(3, 440), 5);
  next.set_session_id(a);
  next.set_append(true);
  Result rn = client_->Generate(next);
  ASSERT_TRUE(rn.status.ok()) << rn.status.error_message();
  EXPECT_EQ(rn.ids, client_->Generate(Req("rec", Concat(hist, Ids(3, 440)), 5)).ids);
  // And a session can be created again. Session a holds the bookkeeping of
  // its 31 tokens (20 + 3, then 3 + 5) besides its state.
  EXPECT_TRUE(client_->Session(create, &resp).ok());
  const size_t want = 2 * rec.SequenceBytes(0) + 31 * ServedModel::kBookkeepingBytesPerSymbol;
  EXPECT_EQ(SettledInUse(want), want);
}

// A recurrent model's state does not grow with its positions, but the
// tokens a sequence holds do (its history and bookkeeping): a request whose
// new tokens would take the budget past its limit is refused before it runs,
// and changes nothing. (Before these bytes were counted, such a request ran
// to its end: the reservation was the state's size whatever max_tokens.)
TEST_F(ServiceMemoryBudgetTest, TokensBeyondTheBudgetAreRefusedOnARecurrentModel) {
  constexpr size_t kRoomForTokens = 1000;
  Start({"rec=demo-recurrent"}, [](const ModelRegistry& r) {
    return (*r.Find("rec"))->SequenceBytes(0) + kRoomForTokens * ServedModel::kBookkeepingBytesPerSymbol;
  });
  const ServedModel& rec = Model("rec");
  ASSERT_EQ(rec.sequence_bytes_per_position, 0u);
  const std::string sid = SessionAfter(Req("rec", Ids(8), 20));
  const v1::SessionInfo before = client_->GetIdle(sid);
  const size_t in_use = SettledInUse(rec.SequenceBytes(0) + 28 * ServedModel::kBookkeepingBytesPerSymbol);

  // The prompt fits; 5000 more tokens do not.
  const std::string msg = RefusedOnSession(Req("rec", Ids(8, 500), 5000), sid);
  EXPECT_NE(msg.find("a prompt of 36 positions plus up to 5000 new tokens"), std::string::npos) << msg;
  EXPECT_EQ(server_->memory_budget().in_use(), in_use);
  EXPECT_EQ(server_->metrics().scheduler.generated_tokens->Value(), 20);
  const v1::SessionInfo after = client_->GetIdle(sid);
  EXPECT_EQ(std::vector<int32_t>(after.token_ids().begin(), after.token_ids().end()),
            std::vector<int32_t>(before.token_ids().begin(), before.token_ids().end()));
  // Sessionless too; within the room, the same request runs.
  EXPECT_EQ(client_->Generate(Req("rec", Ids(8), 5000)).status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  GenerateRequest within = Req("rec", Ids(8, 500), 500);
  within.set_session_id(sid);
  within.set_append(true);
  EXPECT_TRUE(client_->Generate(within).status.ok());
}

// The charge per token (ServedModel::kBookkeepingBytesPerSymbol) covers what
// the process really allocates per token on a recurrent model with
// checkpoints off, measured with mallinfo2 while one request generates
// kTokens on a session (its peak) and once the session is idle again:
// 8,300 tokens, just past a doubling of the vectors that hold them (their
// worst case: twice the bytes they use).
TEST_F(ServiceMemoryBudgetTest, BookkeepingPerTokenIsWithinTheCharge) {
  constexpr int kTokens = 8300;
  ServerOptions opt = TestServerOptions();
  opt.models_options.threads = 2;
  opt.models_options.checkpoint.enabled = false;
  opt.models.push_back(*ParseModelSpec("rec=demo-recurrent"));
  auto s = Server::Create(opt);
  ASSERT_TRUE(s.ok()) << s.status();
  server_ = std::move(*s);
  client_ = std::make_unique<Client>(server_->port());
  const std::string sid = client_->Create("rec");
  GenerateRequest req = Req("rec", Ids(8), 200);
  req.set_session_id(sid);
  req.set_append(true);
  ASSERT_TRUE(client_->Generate(req).status.ok());  // warms gRPC's and the scheduler's allocations
  client_->GetIdle(sid);
  auto heap = [] { return static_cast<int64_t>(mallinfo2().uordblks); };
  const int64_t before = heap();
  std::atomic<bool> done{false};
  std::atomic<int64_t> peak{before};
  std::thread sampler([&] {
    while (!done.load()) {
      peak.store(std::max(peak.load(), heap()));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  req = Req("rec", Ids(2, 400), kTokens);
  req.set_session_id(sid);
  req.set_append(true);
  grpc::ClientContext ctx;
  auto reader = client_->stub().Generate(&ctx, req);
  v1::GenerateResponse ev;
  int tokens = 0;
  while (reader->Read(&ev)) tokens += ev.has_token() ? 1 : 0;  // counted, not kept
  EXPECT_TRUE(reader->Finish().ok());
  client_->GetIdle(sid);
  done.store(true);
  sampler.join();
  ASSERT_EQ(tokens, kTokens);
  const double at_peak = static_cast<double>(peak.load() - before) / kTokens;
  const double idle = static_cast<double>(heap() - before) / kTokens;
  std::printf("bytes per token: %.1f at the request's peak, %.1f held by the idle session (charged %zu)\n", at_peak,
              idle, ServedModel::kBookkeepingBytesPerSymbol);
  EXPECT_LE(at_peak, ServedModel::kBookkeepingBytesPerSymbol);
  EXPECT_LE(idle, at_peak);
}

}  // namespace
}  // namespace cairn::service::e2e
