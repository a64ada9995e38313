// End-to-end tests (service_fixture.h): sessions through Generate and SessionControl: turns that
// reuse and match a fresh computation, fork, rewind, delete/get/list, export and import, a failed
// or concurrent request leaving a session as it was.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/service/e2e/service_fixture.h"

namespace cairn::service::e2e {
namespace {

// The contract of sessions: whatever the path (append, whole conversation,
// fork, rewind, import), greedy output equals that of a fresh computation
// of the same full prompt.
TEST_F(ServiceTest, SessionTurnsReuseAndMatchFreshComputation) {
  for (const char* model : {kTf, kRec, kHyb}) {
    SCOPED_TRACE(model);
    const std::string sid = client_->Create(model);
    GenerateRequest t1 = Req(model, Ids(20), 8);
    t1.set_session_id(sid);
    t1.set_append(true);
    Result r1 = client_->Generate(t1);
    ASSERT_TRUE(r1.status.ok()) << r1.status.error_message();
    EXPECT_EQ(r1.finished.usage().session_tokens(), 28);
    auto info = client_->Get(sid);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->tokens(), 28);
    const std::vector<int32_t> hist(info->token_ids().begin(), info->token_ids().end());
    EXPECT_EQ(hist, Concat(Ids(20), r1.ids));

    // Turn 2, appended.
    GenerateRequest t2 = Req(model, Ids(6, 400), 8);
    t2.set_session_id(sid);
    t2.set_append(true);
    Result r2 = client_->Generate(t2);
    ASSERT_TRUE(r2.status.ok());
    EXPECT_EQ(r2.prompt.prompt_tokens(), 28 + 6);
    EXPECT_GE(r2.prompt.reused_tokens(), 27);  // at most the unabsorbed last token is recomputed
    Result fresh = client_->Generate(Req(model, Concat(hist, Ids(6, 400)), 8));
    ASSERT_TRUE(fresh.status.ok());
    EXPECT_EQ(r2.ids, fresh.ids);

    // Turn 3 as the whole conversation (server finds the divergence).
    auto info2 = client_->Get(sid);
    ASSERT_TRUE(info2.ok());
    std::vector<int32_t> conv(info2->token_ids().begin(), info2->token_ids().end());
    conv = Concat(conv, Ids(4, 500));
    GenerateRequest t3 = Req(model, conv, 6);
    t3.set_session_id(sid);
    Result r3 = client_->Generate(t3);
    ASSERT_TRUE(r3.status.ok());
    EXPECT_GE(r3.prompt.reused_tokens(), static_cast<int>(conv.size()) - 5);
    EXPECT_EQ(r3.ids, client_->Generate(Req(model, conv, 6)).ids);
  }
}

TEST_F(ServiceTest, ForkSharesHistoryAndBranchesIndependently) {
  for (const char* model : {kTf, kRec, kHyb}) {
    SCOPED_TRACE(model);
    const std::string a = client_->Create(model);
    GenerateRequest t1 = Req(model, Ids(15), 5);
    t1.set_session_id(a);
    t1.set_append(true);
    ASSERT_TRUE(client_->Generate(t1).status.ok());
    v1::SessionRequest fork;
    fork.mutable_fork()->set_session_id(a);
    v1::SessionResponse resp;
    ASSERT_TRUE(client_->Session(fork, &resp).ok());
    const std::string b = resp.session().session_id();
    EXPECT_NE(a, b);
    EXPECT_EQ(b.size(), 32u);  // 128 bits in hex
    EXPECT_EQ(resp.session().tokens(), 20);
    auto ha = client_->Get(a);
    ASSERT_TRUE(ha.ok());
    const std::vector<int32_t> hist(ha->token_ids().begin(), ha->token_ids().end());

    GenerateRequest ga = Req(model, Ids(3, 410), 6);
    ga.set_session_id(a);
    ga.set_append(true);
    GenerateRequest gb = Req(model, Ids(3, 450), 6);
    gb.set_session_id(b);
    gb.set_append(true);
    Result ra = client_->Generate(ga);
    Result rb = client_->Generate(gb);
    ASSERT_TRUE(ra.status.ok() && rb.status.ok());
    EXPECT_GE(rb.prompt.reused_tokens(), 19);
    EXPECT_EQ(ra.ids, client_->Generate(Req(model, Concat(hist, Ids(3, 410)), 6)).ids);
    EXPECT_EQ(rb.ids, client_->Generate(Req(model, Concat(hist, Ids(3, 450)), 6)).ids);
    EXPECT_EQ(client_->Get(a)->tokens(), 29);
    EXPECT_EQ(client_->Get(b)->tokens(), 29);
  }
}

TEST_F(ServiceTest, RewindThenContinueMatchesFreshComputation) {
  for (const char* model : {kTf, kRec, kHyb}) {
    SCOPED_TRACE(model);
    const std::string sid = client_->Create(model);
    GenerateRequest t1 = Req(model, Ids(30), 10);
    t1.set_session_id(sid);
    t1.set_append(true);
    ASSERT_TRUE(client_->Generate(t1).status.ok());
    auto h = client_->Get(sid);
    ASSERT_TRUE(h.ok());
    const std::vector<int32_t> hist(h->token_ids().begin(), h->token_ids().end());
    ASSERT_EQ(hist.size(), 40u);
    EXPECT_EQ(client_->Rewind(sid, 41), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_EQ(client_->Rewind(sid, -1), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(client_->Get(sid)->tokens(), 40);  // failed rewinds change nothing
    ASSERT_EQ(client_->Rewind(sid, 25), grpc::StatusCode::OK);
    EXPECT_EQ(client_->Get(sid)->tokens(), 25);
    GenerateRequest t2 = Req(model, Ids(5, 420), 7);
    t2.set_session_id(sid);
    t2.set_append(true);
    Result r2 = client_->Generate(t2);
    ASSERT_TRUE(r2.status.ok());
    EXPECT_EQ(r2.prompt.prompt_tokens(), 30);
    const std::vector<int32_t> prefix(hist.begin(), hist.begin() + 25);
    EXPECT_EQ(r2.ids, client_->Generate(Req(model, Concat(prefix, Ids(5, 420)), 7)).ids);
  }
}

TEST_F(ServiceTest, DeleteGetListSessions) {
  const std::string a = client_->Create(kTf);
  const std::string b = client_->Create(kRec);
  v1::SessionRequest list;
  list.mutable_list();
  v1::SessionResponse resp;
  ASSERT_TRUE(client_->Session(list, &resp).ok());
  std::set<std::string> ids;
  for (const auto& s : resp.sessions().sessions()) ids.insert(s.session_id());
  EXPECT_TRUE(ids.count(a) && ids.count(b));
  auto g = client_->Get(b);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->model(), kRec);
  EXPECT_EQ(g->tokens(), 0);
  v1::SessionRequest del;
  del.mutable_delete_()->set_session_id(a);
  ASSERT_TRUE(client_->Session(del, &resp).ok());
  EXPECT_TRUE(resp.deleted());
  EXPECT_EQ(client_->Session(del, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(client_->Get(a).status().code(), absl::StatusCode::kNotFound);
  GenerateRequest req = Req(kTf, Ids(3), 2);
  req.set_session_id(a);
  EXPECT_EQ(client_->Generate(req).status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, ExportImportRoundTripsAndRefusesOtherModels) {
  for (const char* model : {kTf, kRec, kHyb}) {
    SCOPED_TRACE(model);
    const std::string sid = client_->Create(model);
    GenerateRequest t1 = Req(model, Ids(18), 6);
    t1.set_session_id(sid);
    t1.set_append(true);
    ASSERT_TRUE(client_->Generate(t1).status.ok());
    v1::SessionRequest ex;
    ex.mutable_export_()->set_session_id(sid);
    v1::SessionResponse exported;
    ASSERT_TRUE(client_->Session(ex, &exported).ok());
    ASSERT_FALSE(exported.snapshot().empty());

    v1::SessionRequest im;
    im.mutable_import()->set_snapshot(exported.snapshot());
    v1::SessionResponse imported;
    grpc::Status st = client_->Session(im, &imported);
    ASSERT_TRUE(st.ok()) << st.error_message();
    const std::string copy = imported.session().session_id();
    EXPECT_NE(copy, sid);
    EXPECT_EQ(imported.session().tokens(), 24);
    EXPECT_EQ(imported.session().model(), model);

    GenerateRequest next = Req(model, Ids(4, 430), 6);
    next.set_append(true);
    next.set_session_id(copy);
    Result rc = client_->Generate(next);
    ASSERT_TRUE(rc.status.ok());
    EXPECT_GE(rc.prompt.reused_tokens(), 24);  // the imported state is used, not recomputed
    next.set_session_id(sid);
    Result ro = client_->Generate(next);
    ASSERT_TRUE(ro.status.ok());
    EXPECT_EQ(rc.ids, ro.ids);

    // Into the other model: FAILED_PRECONDITION.
    im.mutable_import()->set_model(std::string(model) == kTf ? kRec : kTf);  // another model
    EXPECT_EQ(client_->Session(im, &imported).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    im.mutable_import()->set_model("no-such-model");
    EXPECT_EQ(client_->Session(im, &imported).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  v1::SessionRequest bad;
  bad.mutable_import()->set_snapshot("\xff\xff not a snapshot");
  v1::SessionResponse resp;
  EXPECT_EQ(client_->Session(bad, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServiceTest, FailedRequestLeavesSessionUnchanged) {
  const std::string sid = client_->Create(kTf);
  GenerateRequest t1 = Req(kTf, Ids(10), 4);
  t1.set_session_id(sid);
  t1.set_append(true);
  ASSERT_TRUE(client_->Generate(t1).status.ok());
  const auto before = client_->Get(sid);
  ASSERT_TRUE(before.ok());
  GenerateRequest bad = Req(kTf, {5, 1 << 20}, 4);
  bad.set_session_id(sid);
  bad.set_append(true);
  EXPECT_EQ(client_->Generate(bad).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  GenerateRequest too_long = Req(kTf, Ids(4090), 4);
  too_long.set_session_id(sid);
  too_long.set_append(true);
  EXPECT_EQ(client_->Generate(too_long).status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  const auto after = client_->Get(sid);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->token_ids().size(), before->token_ids().size());
  EXPECT_TRUE(std::equal(after->token_ids().begin(), after->token_ids().end(), before->token_ids().begin()));
}

TEST_F(ServiceTest, ConcurrentRequestOnABusySessionIsRefused) {
  const std::string sid = client_->Create(kTf);
  GenerateRequest longreq = Req(kTf, Ids(10), 3000);
  longreq.set_session_id(sid);
  longreq.set_append(true);
  std::atomic<bool> started{false};
  grpc::StatusCode second = grpc::StatusCode::OK;
  Result first = client_->Generate(longreq, 0, [&](grpc::ClientContext& ctx, int n) {
    if (n == 1) {
      Client other(server_->port());
      GenerateRequest r = Req(kTf, Ids(3), 2);
      r.set_session_id(sid);
      second = other.Generate(r).status.error_code();
      started = true;
      ctx.TryCancel();
    }
  });
  EXPECT_TRUE(started);
  EXPECT_EQ(second, grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(first.status.error_code(), grpc::StatusCode::CANCELLED);
}

// GetSession (and ListSessions) on a session whose Generate runs report its
// progress: the prompt plus the tokens streamed so far (it used to be 0).
TEST_F(ServiceTest, BusySessionReportsItsProgress) {
  const std::string sid = client_->Create(kTf);
  GenerateRequest longreq = Req(kTf, Ids(10), 3000);
  longreq.set_session_id(sid);
  longreq.set_append(true);
  int32_t seen = 0, listed = 0, after = 0;
  bool busy = true;
  Result r = client_->Generate(longreq, 0, [&](grpc::ClientContext& ctx, int n) {
    if (n != 20) return;
    // This client has read 20 tokens, so the server wrote them; it
    // publishes its progress right after each write: poll until it shows
    // (bounded, to fail rather than hang if it never does).
    Client other(server_->port());
    for (int i = 0; i < 20000 && seen < 10 + 20; ++i) {
      auto info = other.Get(sid, false);
      ASSERT_TRUE(info.ok()) << info.status();
      busy = busy && info->busy();
      seen = info->tokens();
      if (seen < 10 + 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    v1::SessionRequest list;
    list.mutable_list();
    v1::SessionResponse resp;
    ASSERT_TRUE(other.Session(list, &resp).ok());
    for (const v1::SessionInfo& s : resp.sessions().sessions()) {
      if (s.session_id() == sid) listed = s.tokens();
    }
    ctx.TryCancel();
  });
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(busy);
  EXPECT_GE(seen, 10 + 20);
  EXPECT_GE(listed, seen);
  after = client_->GetIdle(sid).tokens();
  EXPECT_GE(after, listed);  // never more than the history it ends with
  EXPECT_LT(after, 10 + 3000);
}

}  // namespace
}  // namespace cairn::service::e2e
