// Reuse planning through the engine over real backends (the golden models):
// which state a prompt resumes from, the fallback when one cannot serve, and
// what the store's policy hears of it.
#include "checkpoint/reuse_planner.h"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "tests/checkpoint/engine_fixture.h"
#include "tests/checkpoint/recording_retention.h"

namespace cairn::checkpoint {
namespace {

class ReusePlannerTest : public EngineTest {};

TEST_P(ReusePlannerTest, RegenerateNeedsNoForwardPass) {
  auto seq = NewSeq();
  Prompt p;
  Add(p, RandomTokens(rng_, 50, vocab_));
  Add(p, RandomTokens(rng_, 30, vocab_));
  auto r1 = Run(*seq, p);
  Reply(*seq, r1.logits, 12);
  auto r2 = Run(*seq, p);
  EXPECT_EQ(r2.stats.recomputed, 0);
  EXPECT_TRUE(r2.stats.logits_from_checkpoint);
  EXPECT_EQ(r2.logits, r1.logits);  // the very same numbers
  // And generation from there is exact too.
  EXPECT_EQ(NextTurnRecomputed(*seq, p, r2.logits, 5, 7), 7);
}

TEST_P(ReusePlannerTest, EditOfTheLastMessageResumesAtItsStart) {
  auto seq = NewSeq();
  auto u2 = RandomTokens(rng_, 30, vocab_);
  Prompt base;
  Add(base, RandomTokens(rng_, 40, vocab_));
  Add(base, RandomTokens(rng_, 10, vocab_));
  auto r0 = Run(*seq, base);
  auto reply = Reply(*seq, r0.logits, 8);
  Add(base, reply);
  Prompt p1 = base;
  Add(p1, u2);
  auto r1 = Run(*seq, p1);
  Reply(*seq, r1.logits, 8);
  auto edited = u2;
  for (size_t i = 15; i < edited.size(); ++i) edited[i] = 3 + (edited[i] + 7) % (vocab_ - 3);
  Prompt p2 = base;
  Add(p2, edited);
  auto r2 = Run(*seq, p2);
  if (recurrent_) {
    // From the message boundary (or an interval checkpoint inside it).
    EXPECT_LE(r2.stats.recomputed, 30);
    EXPECT_GE(r2.stats.recomputed, 15);
  } else {
    EXPECT_EQ(r2.stats.recomputed, 15);
  }
}

TEST_P(ReusePlannerTest, BranchAndReturnRecomputesOnlyTheNewTurn) {
  auto seq = NewSeq();
  Prompt main;
  Add(main, RandomTokens(rng_, 30, vocab_));
  std::vector<Prompt> turns;
  for (int t = 0; t < 3; ++t) {
    Add(main, RandomTokens(rng_, 12, vocab_));
    auto r = Run(*seq, main);
    Add(main, Reply(*seq, r.logits, 10));
    turns.push_back(main);
  }
  // Back two turns, two new turns.
  Prompt branch = turns[0];
  for (int t = 0; t < 2; ++t) {
    Add(branch, RandomTokens(rng_, 12, vocab_));
    auto r = Run(*seq, branch);
    Add(branch, Reply(*seq, r.logits, 10));
  }
  Prompt back = main;
  Add(back, RandomTokens(rng_, 9, vocab_));
  auto r = Run(*seq, back);
  EXPECT_EQ(r.stats.recomputed, 9);
}

TEST_P(ReusePlannerTest, SharedSystemPromptServesOtherSessionsOfTheSameTenant) {
  auto sys = RandomTokens(rng_, 80, vocab_);
  auto a = NewSeq("t1");
  Prompt pa;
  Add(pa, sys);
  Add(pa, RandomTokens(rng_, 20, vocab_));
  Run(*a, pa);
  auto b = NewSeq("t1");
  Prompt pb;
  Add(pb, sys);
  Add(pb, RandomTokens(rng_, 13, vocab_));
  EXPECT_EQ(Run(*b, pb).stats.recomputed, 13);
  // Another tenant never sees it.
  auto c = NewSeq("t2");
  EXPECT_EQ(Run(*c, pb).stats.recomputed, 93);
}

// The checkpoints of a conversation pushed out of a full store, then the
// conversation sent again: the store's policy hears of the deepest one that
// would have served (a policy learning only from what it kept would never
// see what it keeps leaving out).
TEST_P(ReusePlannerTest, PolicyHearsOfTheCheckpointAPromptMissed) {
  auto policy = std::make_shared<RecordingRetention>();
  retention_ = policy;
  Rebuild();
  Prompt p;
  Add(p, RandomTokens(rng_, 70, vocab_));
  Add(p, RandomTokens(rng_, 20, vocab_));
  Run(*NewSeq(), p);  // the sequence ends: its state is kept as dropped
  const size_t ram = store_->options().ram_budget_bytes;
  for (int i = 0; i < 4; ++i) {
    Checkpoint filler;
    filler.snapshot.data.resize(ram / 3);
    ASSERT_TRUE(store_->Put(std::move(filler), 1e12).ok());
  }
  size_t remembered = 0;
  for (const auto& r : policy->Of(RetentionEvent::kRemoved)) remembered += r.remembered;
  EXPECT_GT(remembered, 0u);
  EXPECT_TRUE(policy->Of(RetentionEvent::kMissed).empty());

  EXPECT_EQ(Run(*NewSeq(), p).stats.reused, 0);
  const auto missed = policy->Of(RetentionEvent::kMissed);
  ASSERT_EQ(missed.size(), 1u);
  EXPECT_EQ(missed[0].path_key, PathKey("", p.keys()));
  // Forgotten once told: the same prompt again misses nothing more.
  Run(*NewSeq(), p);
  EXPECT_EQ(policy->Of(RetentionEvent::kMissed).size(), 1u);
}

TEST_P(ReusePlannerTest, CorruptSpilledCheckpointIsNeverRestored) {
  char tmpl[] = "/tmp/cairn-engine-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  Prompt p;
  ASSERT_NO_FATAL_FAILURE(ParkThenSpill(dir, p));
  // Then damage the files.
  int damaged = 0;
  for (auto& f : std::filesystem::directory_iterator(dir)) {
    std::fstream s(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    s.seekp(100);
    s.write("\x5a\x5a", 2);
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  auto b = NewSeq();
  auto r = Run(*b, p);  // exact: the damaged snapshot is not restored
  EXPECT_EQ(r.stats.recomputed, p.positions());
  EXPECT_GT(store_->stats().corrupt, 0u);
  std::filesystem::remove_all(dir);
}

TEST_P(ReusePlannerTest, UnreadableSpilledCheckpointIsRecomputed) {
  char tmpl[] = "/tmp/cairn-engine-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  cairn::testing::FaultEnv& env = fault_env_;
  env_ = &env;
  Prompt p;
  ASSERT_NO_FATAL_FAILURE(ParkThenSpill(dir, p));
  // Then every read of a file fails as a failing disk's would (EIO).
  ASSERT_GT(store_->stats().disk_entries, 0u);
  env.Fail(cairn::testing::FaultEnv::Op::kRead, dir, EIO, 1000);
  auto b = NewSeq();
  auto r = Run(*b, p);  // exact (Run compares with a fresh computation)
  EXPECT_EQ(r.stats.recomputed, p.positions());
  EXPECT_GT(env.failures(), 0);
  std::filesystem::remove_all(dir);
}

// A live sequence held by another user (a decode under a SequenceHold) is
// skipped as a copy source: the planner counts the failed plan, falls back
// to the next best, and the result is still exact. The same requests on a
// fresh engine with nothing held show what the planner chose otherwise.
TEST_P(ReusePlannerTest, HeldSequenceIsSkippedAsACopySource) {
  Prompt pa;
  Add(pa, RandomTokens(rng_, 40, vocab_));
  Prompt pb = pa;
  Add(pb, RandomTokens(rng_, 7, vocab_));
  PrefillResult results[2];
  uint64_t failures[2] = {0, 0};
  for (int held = 0; held < 2; ++held) {
    Rebuild();
    auto a = NewSeq();
    Run(*a, pa);
    ASSERT_TRUE(engine_->EndGeneration(*a).ok());  // publishes A at pa
    std::optional<SequenceHold> hold;
    if (held) hold.emplace(*a);
    auto b = NewSeq();
    results[held] = Run(*b, pb);  // exact: Run compares with a fresh computation
    failures[held] = engine_->stats().restore_failures;
  }
  EXPECT_EQ(failures[0], 0u);
  EXPECT_NE(results[1].stats.source, ReuseKind::kOtherSequence);
  if (results[0].stats.source == ReuseKind::kOtherSequence) {
    EXPECT_EQ(failures[1], 1u);  // tried A, busy, fell back
  } else {
    EXPECT_EQ(failures[1], 0u);  // A was not the choice: nothing changes
    EXPECT_EQ(results[1].stats.source, results[0].stats.source);
    EXPECT_EQ(results[1].stats.recomputed, results[0].stats.recomputed);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ReusePlannerTest, ::testing::ValuesIn(kRows), RowName);

}  // namespace
}  // namespace cairn::checkpoint
