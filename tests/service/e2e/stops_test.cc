// End-to-end tests (service_fixture.h): cancellation and deadlines: a stopped request ends within
// a step and leaves its session as it was, and the client continues with what it received.
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/service/e2e/service_fixture.h"

namespace cairn::service::e2e {
namespace {

// The turn after a cut-short one, built from what the client saw (the
// history, the cut-short prompt and the tokens it received), sent as the
// whole conversation: its reply equals a fresh computation's, and what was
// computed is found by prefix reuse: at least `computed` symbols (the
// history and the cut-short prompt, whose end the engine keeps a checkpoint
// of).
void ContinueWithWhatTheClientSaw(Client& client, const char* model, const std::string& sid,
                                  const std::vector<int32_t>& seen, size_t computed) {
  GenerateRequest next = Req(model, Concat(seen, Ids(3, 440)), 5);
  next.set_session_id(sid);
  const Result rn = client.Generate(next);
  ASSERT_TRUE(rn.status.ok()) << rn.status.error_message();
  EXPECT_EQ(rn.ids, client.Generate(Req(model, Concat(seen, Ids(3, 440)), 5)).ids);
  EXPECT_GE(rn.prompt.reused_tokens(), static_cast<int32_t>(computed));
}

// Issue 30: a stream that ends without OK changes nothing in the session;
// the client continues from what it saw.
TEST_F(ServiceTest, ACancelledTurnChangesNothingAndWhatTheClientSawContinuesExactly) {
  for (const char* model : {kTf, kRec, kHyb}) {
    SCOPED_TRACE(model);
    std::vector<int32_t> before;
    const std::string sid = SessionWithOneTurn(*client_, model, &before);
    GenerateRequest req = Req(model, Ids(5, 420), 3000);
    req.set_session_id(sid);
    req.set_append(true);
    const Result r = client_->Generate(req, 0, [](grpc::ClientContext& ctx, int n) {
      if (n == 2) ctx.TryCancel();
    });
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
    ASSERT_GE(r.ids.size(), 2u);
    // What the client showed: the tokens it read before it cancelled.
    const std::vector<int32_t> shown(r.ids.begin(), r.ids.begin() + 2);
    const v1::SessionInfo info = *client_->Get(sid);
    EXPECT_EQ(std::vector<int32_t>(info.token_ids().begin(), info.token_ids().end()), before);
    EXPECT_EQ(info.tokens(), static_cast<int32_t>(before.size()));
    ContinueWithWhatTheClientSaw(*client_, model, sid, Concat(Concat(before, Ids(5, 420)), shown), before.size() + 5);
  }
}

TEST_F(ServiceTest, ATurnPastItsDeadlineChangesNothingAndWhatTheClientSawContinuesExactly) {
  for (const char* model : {kRec, kHyb}) {
    SCOPED_TRACE(model);
    std::vector<int32_t> before;
    const std::string sid = SessionWithOneTurn(*client_, model, &before);
    GenerateRequest req = Req(model, Ids(5, 430), 1 << 20);
    req.set_session_id(sid);
    req.set_append(true);
    const Result r = client_->Generate(req, 0.3);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    const v1::SessionInfo info = *client_->Get(sid);
    EXPECT_EQ(std::vector<int32_t>(info.token_ids().begin(), info.token_ids().end()), before);
    ContinueWithWhatTheClientSaw(*client_, model, sid, Concat(Concat(before, Ids(5, 430)), r.ids), before.size() + 5);
  }
}

// Issue 30: "stop" in a chat UI, then the next message at once: the next
// request waits for the cancelled one's end instead of failing, and every
// read of the session, at once, shows the history before the cancelled turn
// (no waiting for the server's side to finish).
TEST_F(ServiceTest, TheNextTurnRightAfterACancelWaitsForTheSessionAndSucceeds) {
  for (const char* model : {kTf, kRec}) {
    SCOPED_TRACE(model);
    std::vector<int32_t> history;
    const std::string sid = SessionWithOneTurn(*client_, model, &history);
    for (int round = 0; round < 10; ++round) {
      SCOPED_TRACE(round);
      const std::vector<int32_t> prompt = Ids(4, 400 + 7 * round);
      GenerateRequest cut = Req(model, prompt, 3000);
      cut.set_session_id(sid);
      cut.set_append(true);
      const Result r = client_->Generate(cut, 0, [](grpc::ClientContext& ctx, int n) {
        if (n == 2) ctx.TryCancel();
      });
      ASSERT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
      const auto info = client_->Get(sid);
      ASSERT_TRUE(info.ok()) << info.status();
      EXPECT_EQ(std::vector<int32_t>(info->token_ids().begin(), info->token_ids().end()), history);
      // The next message, sent at once, appended to what the client saw.
      const std::vector<int32_t> seen = Concat(prompt, {r.ids[0], r.ids[1]});
      GenerateRequest next = Req(model, seen, 2);
      next.set_session_id(sid);
      next.set_append(true);
      const Result rn = client_->Generate(next);
      ASSERT_TRUE(rn.status.ok()) << rn.status.error_code() << " " << rn.status.error_message();
      EXPECT_EQ(rn.ids, client_->Generate(Req(model, Concat(history, seen), 2)).ids);
      history = Concat(Concat(history, seen), rn.ids);
      const auto now = client_->Get(sid);
      ASSERT_TRUE(now.ok());
      EXPECT_EQ(std::vector<int32_t>(now->token_ids().begin(), now->token_ids().end()), history);
    }
  }
}

TEST_F(ServiceTest, CancellationStopsTheRequestWithinAStep) {
  for (const char* model : {kTf, kRec, kHyb}) {
    SCOPED_TRACE(model);
    const std::string sid = client_->Create(model);
    GenerateRequest req = Req(model, Ids(12), 3000);
    req.set_session_id(sid);
    req.set_append(true);
    Result r = client_->Generate(req, 0, [](grpc::ClientContext& ctx, int n) {
      if (n == 5) ctx.TryCancel();
    });
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
    EXPECT_GE(r.ids.size(), 5u);
    EXPECT_LT(r.ids.size(), 3000u);
    EXPECT_EQ(client_->GetIdle(sid).tokens(), 0);
  }
}

TEST_F(ServiceTest, DeadlineExceededStopsTheRequest) {
  const std::string sid = client_->Create(kRec);
  GenerateRequest req = Req(kRec, Ids(8), 1 << 20);
  req.set_session_id(sid);
  req.set_append(true);
  Result r = client_->Generate(req, 0.3);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(client_->GetIdle(sid).tokens(), 0);
  GenerateRequest next = Req(kRec, Ids(2, 460), 3);
  next.set_session_id(sid);
  next.set_append(true);
  EXPECT_TRUE(client_->Generate(next).status.ok());
}

TEST_F(ServiceTest, StopDuringALongPromptLeavesTheSessionAsItWas) {
  for (const char* model : {kTf, kRec, kHyb}) {
    SCOPED_TRACE(model);
    std::vector<int32_t> before;
    const std::string sid = SessionWithOneTurn(*client_, model, &before);
    const std::vector<int32_t> prompt = Ids(3000, 301);
    GenerateRequest req = Req(model, prompt, 4000);
    req.set_session_id(sid);
    req.set_append(true);
    Result r = client_->Generate(req, 0.02);
    ASSERT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    // Whatever phase it stopped in, the history is unchanged, and continuing
    // from it is exact (the sequence holds part of the prompt: cut back or
    // restored).
    const v1::SessionInfo info = client_->GetIdle(sid);
    EXPECT_EQ(std::vector<int32_t>(info.token_ids().begin(), info.token_ids().end()), before);
    GenerateRequest next = Req(model, Ids(3, 470), 4);
    next.set_session_id(sid);
    next.set_append(true);
    Result rn = client_->Generate(next);
    ASSERT_TRUE(rn.status.ok()) << rn.status.error_message();
    EXPECT_EQ(rn.ids, client_->Generate(Req(model, Concat(before, Ids(3, 470)), 4)).ids);
  }
}

}  // namespace
}  // namespace cairn::service::e2e
