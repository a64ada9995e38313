// Session snapshots on their own, on real served models: an export restores
// to the same history and state; a snapshot as held computes nothing; a
// damaged snapshot or one of another model is refused and creates nothing;
// a signature is trusted only under the same key.
#include "service/sessions/session_snapshot.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "service/sessions/snapshot_seal.h"
#include "tests/service/testing/demo_registry.h"

namespace cairn::service {
namespace {

const Caller kAlice{"alice", "alice"};
const std::string kKey = "a shared key of enough bytes";

class SessionSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    models_ = testing::LoadDemoModels({"tf=demo-transformer", "rec=demo-recurrent"});
    ASSERT_NE(models_, nullptr);
    sessions_ = std::make_unique<SessionManager>(SessionOptions{});
  }
  void TearDown() override { sessions_.reset(); }

  // A session on `model` whose history has `n` tokens and whose sequence
  // holds the first `held` of them.
  SessionLease Session(const std::string& model, int n, int held) {
    ServedModel* m = *models_->Find(model);
    auto lease = sessions_->Create(m, kAlice.owner, kAlice.cache_tenant);
    EXPECT_TRUE(lease.ok()) << lease.status();
    checkpoint::Prompt prompt;
    for (int i = 0; i < n; ++i) {
      (*lease)->history.AddToken(300 + i);
      if (i < held) prompt.AddToken(300 + i);
    }
    if (held > 0) {
      EXPECT_TRUE(m->engine->Prefill(*(*lease)->seq, prompt).ok());
    }
    return std::move(*lease);
  }
  absl::StatusOr<SessionLease> Restore(const v1::SessionSnapshot& snap, const std::string& key = "") {
    return RestoreSession(snap, "", "", kAlice, *models_, *sessions_, nullptr, key);
  }

  std::unique_ptr<ModelRegistry> models_;
  std::unique_ptr<SessionManager> sessions_;  // declared last: goes first
};

TEST_F(SessionSnapshotTest, AnExportRestoresTheWholeHistoryWithItsState) {
  SessionLease source = Session("rec", 8, 5);  // 3 tokens not run yet (a reply's last, a rewind)
  auto snap = CaptureSession(*source, CaptureMode::kWholeHistory, nullptr, "");
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->model(), "rec");
  EXPECT_EQ(snap->pos(), 8);  // the export ran the rest
  auto restored = Restore(*snap);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_NE((*restored)->id, source->id);
  EXPECT_EQ((*restored)->history.Tokens(), source->history.Tokens());
  EXPECT_EQ((*restored)->seq->next_pos(), 8);
  EXPECT_EQ((*restored)->seq->history().size(), 8u);
}

TEST_F(SessionSnapshotTest, AsHeldTakesTheStateOnlyWhenItIsAPrefixAndComputesNothing) {
  SessionLease behind = Session("tf", 6, 4);
  auto snap = CaptureSession(*behind, CaptureMode::kAsHeld, nullptr, "");
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->pos(), 4);
  EXPECT_EQ(behind->seq->next_pos(), 4);
  SessionLease elsewhere = Session("tf", 6, 6);
  elsewhere->history.Resize(3);
  elsewhere->history.AddToken(7);  // the sequence now holds no prefix of it
  snap = CaptureSession(*elsewhere, CaptureMode::kAsHeld, nullptr, "");
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_TRUE(snap->state().empty());
  EXPECT_EQ(snap->history_size(), 4);
}

TEST_F(SessionSnapshotTest, DamagedOrForeignSnapshotsAreRefusedAndCreateNothing) {
  SessionLease source = Session("tf", 5, 5);
  auto snap = CaptureSession(*source, CaptureMode::kWholeHistory, nullptr, "");
  ASSERT_TRUE(snap.ok()) << snap.status();
  const size_t before = sessions_->size();
  v1::SessionSnapshot damaged = *snap;
  damaged.mutable_history(2)->set_token(301);
  EXPECT_TRUE(absl::IsInvalidArgument(Restore(damaged).status()));
  v1::SessionSnapshot other_version = *snap;
  other_version.set_version(99);
  EXPECT_TRUE(absl::IsInvalidArgument(Restore(other_version).status()));
  auto foreign = RestoreSession(*snap, "rec", "", kAlice, *models_, *sessions_, nullptr, "");
  EXPECT_TRUE(absl::IsFailedPrecondition(foreign.status())) << foreign.status();
  EXPECT_TRUE(absl::IsNotFound(RestoreSession(*snap, "nope", "", kAlice, *models_, *sessions_, nullptr, "").status()));
  EXPECT_EQ(sessions_->size(), before);
}

TEST_F(SessionSnapshotTest, OnlyTheSameKeyAuthenticatesAState) {
  SessionLease source = Session("tf", 5, 5);
  auto signed_snap = CaptureSession(*source, CaptureMode::kWholeHistory, nullptr, kKey);
  ASSERT_TRUE(signed_snap.ok()) << signed_snap.status();
  EXPECT_EQ(*VerifySnapshot(kKey, *signed_snap), SnapshotProvenance::kAuthenticated);
  EXPECT_EQ(*VerifySnapshot("another key of enough bytes", *signed_snap), SnapshotProvenance::kUnauthenticated);
  // Restored under the same key it may serve others; under another it is
  // kept to its own session (isolated).
  auto trusted = Restore(*signed_snap, kKey);
  ASSERT_TRUE(trusted.ok()) << trusted.status();
  EXPECT_FALSE((*trusted)->seq->isolated());
  auto isolated = Restore(*signed_snap, "another key of enough bytes");
  ASSERT_TRUE(isolated.ok()) << isolated.status();
  EXPECT_TRUE((*isolated)->seq->isolated());
}

}  // namespace
}  // namespace cairn::service
