// SessionManager on its own, with a real served model (demo-transformer):
// leases, ownership, client-chosen ids, the session bound and idle expiry,
// forks, and the live-memory budget every new sequence reserves from.
#include "service/sessions/sessions.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "service/host/memory_budget.h"
#include "service/host/models.h"
#include "tests/service/testing/demo_registry.h"

namespace cairn::service {
namespace {

class SessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    models_ = testing::LoadDemoModels({"tf=demo-transformer"});
    ASSERT_NE(models_, nullptr);
    model_ = *models_->Find("tf");
  }
  void TearDown() override {
    if (sessions_ != nullptr) sessions_->Clear();  // sequences before their engine
  }
  SessionManager& Manager(SessionOptions options = {}, MemoryBudget* budget = nullptr) {
    sessions_ = std::make_unique<SessionManager>(options, budget);
    return *sessions_;
  }
  // Brings the session's sequence to `n` tokens (as a Generate would).
  void Run(Session& s, int n) {
    checkpoint::Prompt prompt;
    for (int i = 0; i < n; ++i) {
      prompt.AddToken(300 + i);
      s.history.AddToken(300 + i);
    }
    ASSERT_TRUE(model_->engine->Prefill(*s.seq, prompt).ok());
  }

  std::unique_ptr<ModelRegistry> models_;
  ServedModel* model_ = nullptr;
  std::unique_ptr<SessionManager> sessions_;  // declared last: goes first
};

TEST_F(SessionsTest, ALeaseIsExclusiveAndOwned) {
  SessionManager& m = Manager();
  std::string id;
  {
    auto lease = m.Create(model_, "alice", "alice");
    ASSERT_TRUE(lease.ok()) << lease.status();
    id = (*lease)->id;
    EXPECT_EQ(id.size(), 32u);
    EXPECT_TRUE(absl::IsAborted(m.Acquire(id, "alice").status()));  // busy: retry later
    EXPECT_TRUE(absl::IsAborted(m.Delete(id, "alice")));
  }
  EXPECT_TRUE(absl::IsPermissionDenied(m.Acquire(id, "bob").status()));
  EXPECT_TRUE(absl::IsPermissionDenied(m.Delete(id, "bob")));
  EXPECT_TRUE(absl::IsNotFound(m.Acquire("no-such-session", "alice").status()));
  auto again = m.Acquire(id, "alice");
  ASSERT_TRUE(again.ok()) << again.status();
  again->Reset();
  EXPECT_TRUE(m.Delete(id, "alice").ok());
  EXPECT_TRUE(absl::IsNotFound(m.Acquire(id, "alice").status()));
  EXPECT_EQ(m.size(), 0u);
}

TEST_F(SessionsTest, ClientChosenIdsAreCheckedAndUnique) {
  SessionManager& m = Manager();
  EXPECT_TRUE(SessionManager::ValidateId("conv-42_A").ok());
  const std::vector<std::string> bad_ids = {"", "a b", "../x", "id/with/slash", std::string(129, 'a')};
  for (const std::string& bad : bad_ids) {
    EXPECT_TRUE(absl::IsInvalidArgument(SessionManager::ValidateId(bad))) << bad;
    // (Create takes "" as "choose one".)
    if (!bad.empty()) {
      EXPECT_TRUE(absl::IsInvalidArgument(m.Create(model_, "", "", 0, "", bad).status())) << bad;
    }
  }
  auto first = m.Create(model_, "", "", 0, "", "conv-42_A");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->id, "conv-42_A");
  EXPECT_TRUE(absl::IsAlreadyExists(m.Create(model_, "", "", 0, "", "conv-42_A").status()));
  EXPECT_EQ(m.size(), 1u);
}

TEST_F(SessionsTest, TheBoundCountsLiveSessionsAndIdleOnesExpire) {
  SessionOptions options;
  options.max_sessions = 2;
  options.idle_timeout = std::chrono::seconds(0);
  SessionManager& m = Manager(options);
  auto a = m.Create(model_, "", "");
  auto b = m.Create(model_, "", "");
  ASSERT_TRUE(a.ok() && b.ok());
  // Both busy: nothing to sweep, no room.
  EXPECT_TRUE(absl::IsResourceExhausted(m.Create(model_, "", "").status()));
  EXPECT_EQ(m.Sweep(), 0u);
  a->Reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(m.Sweep(), 1u);  // idle longer than 0 s
  EXPECT_EQ(m.size(), 1u);
  EXPECT_TRUE(m.Create(model_, "", "").ok());
}

TEST_F(SessionsTest, ABusySessionShowsItsCommittedHistoryAndWhatIsInFlight) {
  SessionManager& m = Manager();
  auto lease = m.Create(model_, "alice", "alice");
  ASSERT_TRUE(lease.ok());
  Run(**lease, 5);
  (*lease)->in_flight_tokens.store(7);
  auto listed = m.List("alice");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].busy);
  EXPECT_EQ(listed[0].tokens, 5u);
  EXPECT_EQ(listed[0].positions, 5);
  EXPECT_EQ(listed[0].in_flight_tokens, 7u);
  EXPECT_EQ(listed[0].model, "tf");
  EXPECT_TRUE(m.List("bob").empty());
  auto found = m.Find((*lease)->id, "alice", true);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->token_ids, (*lease)->history.Tokens());
  EXPECT_TRUE(absl::IsPermissionDenied(m.Find((*lease)->id, "bob", false).status()));
  // What the holder commits is what others see.
  History longer = (*lease)->history;
  longer.AddToken(400);
  (*lease)->Commit(longer);
  EXPECT_EQ(m.Find((*lease)->id, "alice", false)->tokens, 6u);
  lease->Reset();
  listed = m.List("alice");
  EXPECT_FALSE(listed[0].busy);
  EXPECT_EQ(listed[0].tokens, 6u);
  EXPECT_EQ(listed[0].in_flight_tokens, 0u);
}

// Issue 30: a client that cancels and at once sends its next request finds
// the session still finishing the cancelled one: it waits (bounded by its
// deadline) instead of failing; a request meeting one that runs on is
// ABORTED (retry) once no stop came within kStopNotice.
TEST_F(SessionsTest, AStoppedRequestsSessionIsWaitedForAndARunningOnesIsRefused) {
  SessionManager& m = Manager();
  auto lease = m.Create(model_, "", "");
  ASSERT_TRUE(lease.ok());
  const std::string id = (*lease)->id;
  EXPECT_TRUE(absl::IsAborted(m.Acquire(id, "", absl::InfiniteFuture()).status()));
  // A stop noticed while a request waits for it: the request waits on.
  absl::StatusOr<SessionLease> waited;
  std::thread noticing([&] { waited = m.Acquire(id, "", absl::Now() + absl::Milliseconds(100)); });
  m.MarkStopping(**lease);
  noticing.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited.status())) << waited.status();
  EXPECT_TRUE(absl::IsAborted(m.Acquire(id, "").status()));  // no time to wait
  // Waited, still held.
  EXPECT_TRUE(absl::IsDeadlineExceeded(m.Acquire(id, "", absl::Now() + absl::Milliseconds(50)).status()));
  absl::StatusOr<SessionLease> next;
  std::thread waiter([&] { next = m.Acquire(id, "", absl::Now() + absl::Seconds(60)); });
  lease->Reset();
  waiter.join();
  ASSERT_TRUE(next.ok()) << next.status();
  // Released and taken again: the new holder's request runs on, not stopped.
  EXPECT_TRUE(absl::IsAborted(m.Acquire(id, "", absl::InfiniteFuture()).status()));
}

// Found by the soak: a request with a deadline shorter than kStopNotice that
// met a running request waited to its deadline (or came after it), then got
// ABORTED although its client saw DEADLINE_EXCEEDED (the request counters
// disagreed).
TEST_F(SessionsTest, AWaitCutShortByTheRequestsDeadlineIsDeadlineExceeded) {
  SessionManager& m = Manager();
  auto lease = m.Create(model_, "", "");
  ASSERT_TRUE(lease.ok());
  const absl::Time start = absl::Now();
  const auto waited = m.Acquire((*lease)->id, "", start + absl::Milliseconds(30));
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited.status())) << waited.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(30));
  const auto late = m.Acquire((*lease)->id, "", start);
  EXPECT_TRUE(absl::IsDeadlineExceeded(late.status())) << late.status();
  EXPECT_TRUE(absl::IsAborted(m.Acquire((*lease)->id, "").status()));  // no wait asked: described as busy
}

TEST_F(SessionsTest, AForkCopiesHistoryAndStateAndThenBranches) {
  SessionManager& m = Manager();
  auto source = m.Create(model_, "alice", "alice");
  ASSERT_TRUE(source.ok());
  Run(**source, 6);
  auto fork = m.Fork(**source);
  ASSERT_TRUE(fork.ok()) << fork.status();
  EXPECT_NE((*fork)->id, (*source)->id);
  EXPECT_EQ((*fork)->tenant, "alice");
  EXPECT_EQ((*fork)->history.Tokens(), (*source)->history.Tokens());
  EXPECT_EQ((*fork)->seq->next_pos(), 6);
  (*fork)->history.Resize(2);  // the fork branches; the source keeps its history
  EXPECT_EQ((*source)->history.size(), 6u);
  EXPECT_EQ(m.size(), 2u);
}

TEST_F(SessionsTest, NewSequencesReserveFromTheMemoryBudget) {
  const size_t fresh = model_->SequenceBytes(0);
  MemoryBudget budget(3 * fresh);
  SessionManager& m = Manager({}, &budget);
  auto a = m.Create(model_, "", "");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(budget.in_use(), fresh);
  // A reservation beyond the budget is refused, names what it was for and
  // creates nothing.
  const absl::Status refused = m.Create(model_, "", "", 4 * fresh, "an import").status();
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_NE(refused.message().find("an import"), std::string::npos) << refused;
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(budget.in_use(), fresh);
  // Deleting a session releases its bytes.
  const std::string id = (*a)->id;
  a->Reset();
  ASSERT_TRUE(m.Delete(id, "").ok());
  EXPECT_EQ(budget.in_use(), 0u);
}

TEST_F(SessionsTest, AForkReservesWhatItsSourceHolds) {
  // What a 3-token sequence holds (its memory and the bookkeeping of its
  // tokens), measured on a session without a budget.
  size_t held = 0;
  {
    auto probe = Manager().Create(model_, "", "");
    ASSERT_TRUE(probe.ok());
    Run(**probe, 3);
    held = model_->HeldBytes(*(*probe)->seq, (*probe)->history.size());
    EXPECT_EQ(held, (*probe)->seq->memory()->Bytes(SnapshotScope::kFull) + 3 * ServedModel::kBookkeepingBytesPerSymbol);
  }
  sessions_.reset();
  for (const bool fits : {false, true}) {
    MemoryBudget budget(2 * held - (fits ? 0 : 1));
    SessionManager& m = Manager({}, &budget);
    auto source = m.Create(model_, "", "");
    ASSERT_TRUE(source.ok()) << source.status();
    Run(**source, 3);
    (*source)->memory.Set(model_->HeldBytes(*(*source)->seq, (*source)->history.size()));
    auto fork = m.Fork(**source);
    EXPECT_EQ(fork.ok(), fits) << fork.status();
    EXPECT_EQ(budget.in_use(), fits ? 2 * held : held);
    EXPECT_EQ(m.size(), fits ? 2u : 1u);
    if (fork.ok()) fork->Reset();
    source->Reset();
    sessions_.reset();  // before its budget goes
  }
}

TEST_F(SessionsTest, ParkAllKeepsIdleSessionsStatesInTheStore) {
  SessionManager& m = Manager();
  auto busy = m.Create(model_, "", "");
  auto idle = m.Create(model_, "", "");
  ASSERT_TRUE(busy.ok() && idle.ok());
  Run(**busy, 4);
  Run(**idle, 5);
  idle->Reset();
  EXPECT_EQ(m.ParkAll(), 1u);
}

}  // namespace
}  // namespace cairn::service
