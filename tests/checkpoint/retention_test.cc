// Retention policies alone (pure decisions over facts) and through the store.
#include "checkpoint/retention.h"

#include <vector>

#include "checkpoint/store.h"
#include "gtest/gtest.h"

namespace cairn::checkpoint {
namespace {

RetentionFacts Facts(CheckpointId id, size_t bytes, double cost, uint64_t last_use_tick,
                     uint64_t last_use_request = 0) {
  RetentionFacts f;
  f.id = id;
  f.bytes = bytes;
  f.cost = cost;
  f.pos = static_cast<Pos>(cost);
  f.last_use = RetentionClock{last_use_tick, last_use_request};
  f.added = f.last_use;
  f.path_key = id;
  return f;
}

// Fifty prompts 3 apart: each prompt end is regenerated two prompts after
// capture, each tail point leaves unused at the same age.
void LearnPromptEndsUsedTailPointsNot(ForecastRetention& f, RetentionClock& now) {
  for (int i = 0; i < 50; ++i) {
    now.request += 3;
    RetentionFacts pe = Facts(1000 + i, 100, 50, now.tick, now.request - 2);
    pe.reason = CaptureReason::kPromptEnd;
    f.Observe(RetentionEvent::kUsed, pe, now);
    RetentionFacts tail = Facts(2000 + i, 100, 50, now.tick, now.request - 2);
    tail.reason = CaptureReason::kTail;
    f.Observe(RetentionEvent::kRemoved, tail, now);
  }
}

// A kind the store keeps refusing is never used in the store: only the
// misses the store reports (RetentionEvent::kMissed) show that it would be.
TEST(RetentionTest, ForecastLearnsFromMissesOfWhatItLeftOut) {
  ForecastRetention f;
  RetentionClock now{0, 0};
  for (int i = 0; i < 40; ++i) {
    now.request += 3;
    RetentionFacts pe = Facts(1000 + i, 100, 50, now.tick, now.request - 2);
    pe.reason = CaptureReason::kPromptEnd;
    pe.remembered = true;
    f.Observe(RetentionEvent::kRefused, pe, now);
    f.Observe(RetentionEvent::kMissed, pe, now);  // regenerated two prompts later
    RetentionFacts tail = Facts(2000 + i, 100, 50, now.tick, now.request - 2);
    tail.reason = CaptureReason::kTail;
    tail.remembered = true;
    f.Observe(RetentionEvent::kRemoved, tail, now);  // pushed out: no verdict yet
  }
  RetentionFacts pe = Facts(1, 100, 50, now.tick, now.request);
  pe.reason = CaptureReason::kPromptEnd;
  RetentionFacts tail = pe;
  tail.reason = CaptureReason::kTail;
  EXPECT_GT(f.Predict(pe, now).chance, 0.9);
  // The tail points' chance is still every kind's (all uses so far).
  EXPECT_GT(f.Predict(tail, now).chance, 0.9);
  for (int i = 0; i < 40; ++i) {
    RetentionFacts t = Facts(2000 + i, 100, 50, now.tick, now.request - 10);
    t.reason = CaptureReason::kTail;
    t.remembered = true;
    f.Observe(RetentionEvent::kForgotten, t, now);  // no prompt missed them
  }
  EXPECT_LT(f.Predict(tail, now).chance, 0.1);
  EXPECT_GT(f.Score(pe, now), f.Score(tail, now));
}

TEST(RetentionTest, LruEvictsTheLeastRecentlyUsedAndAdmitsEverything) {
  LruRetention lru;
  const RetentionClock now{100, 10};
  std::vector<RetentionFacts> c = {Facts(1, 10, 1000, 50), Facts(2, 10, 1, 20), Facts(3, 1000, 1, 90)};
  EXPECT_EQ(lru.ChooseVictim(c, now), 1u);
  EXPECT_TRUE(lru.Admit(Facts(4, 1 << 20, 1, 100), c, now));
}

TEST(RetentionTest, MarconiNeverEvictsABranchPointWhileOthersCanGo) {
  MarconiRetention marconi(1.0);
  const RetentionClock now{100, 10};
  std::vector<RetentionFacts> c = {Facts(1, 100, 100, 10), Facts(2, 100, 100, 90), Facts(3, 100, 100, 80)};
  c[0].branches = 3;  // the oldest is a shared prefix
  c[1].branches = 0;
  c[2].branches = 1;
  EXPECT_EQ(marconi.ChooseVictim(c, now), 2u);  // the least recent of the rest
  // Only branch points left: the budget still binds.
  std::vector<RetentionFacts> shared = {c[0], c[0]};
  shared[1].id = 9;
  shared[1].last_use.tick = 5;
  EXPECT_EQ(marconi.ChooseVictim(shared, now), 1u);
}

TEST(RetentionTest, MarconiWeighsFlopEfficiencyAgainstRecencyByAlpha) {
  const RetentionClock now{100, 10};
  // Recent but inefficient (few positions per byte) vs old but efficient.
  std::vector<RetentionFacts> c = {Facts(1, 1000, 10, 99), Facts(2, 1000, 1000, 1)};
  EXPECT_EQ(MarconiRetention(0.0).ChooseVictim(c, now), 1u);   // recency alone: the old one
  EXPECT_EQ(MarconiRetention(10.0).ChooseVictim(c, now), 0u);  // efficiency dominates
}

TEST(RetentionTest, ForecastLearnsWhichKindsAreUsedAgain) {
  ForecastRetention f;
  RetentionClock now{0, 0};
  LearnPromptEndsUsedTailPointsNot(f, now);
  RetentionFacts pe = Facts(1, 100, 50, now.tick, now.request);
  pe.reason = CaptureReason::kPromptEnd;
  RetentionFacts tail = Facts(2, 100, 50, now.tick, now.request);
  tail.reason = CaptureReason::kTail;
  EXPECT_GT(f.Predict(pe, now).chance, 0.9);
  EXPECT_LT(f.Predict(tail, now).chance, 0.1);
  EXPECT_GT(f.Score(pe, now), f.Score(tail, now));
  std::vector<RetentionFacts> both = {pe, tail};
  EXPECT_EQ(f.ChooseVictim(both, now), 1u);
  // A tail point may not push a prompt end out; the other way round it may.
  EXPECT_FALSE(f.Admit(tail, std::vector<RetentionFacts>{pe}, now));
  EXPECT_TRUE(f.Admit(pe, std::vector<RetentionFacts>{tail}, now));
}

TEST(RetentionTest, ForecastChargesTheStayOfCheckpointsNeverUsed) {
  ForecastRetention f;
  RetentionClock now{0, 1000};
  // Tail points: one in ten used a prompt after capture, the other nine sit
  // unused for a hundred prompts before they leave. Prompt ends: six in ten
  // used twenty prompts after capture, the others leave then.
  for (int i = 0; i < 100; ++i) {
    RetentionFacts tail = Facts(1000 + i, 100, 50, 0, now.request - (i % 10 == 0 ? 1 : 100));
    tail.reason = CaptureReason::kTail;
    f.Observe(i % 10 == 0 ? RetentionEvent::kUsed : RetentionEvent::kRemoved, tail, now);
    RetentionFacts pe = Facts(2000 + i, 100, 50, 0, now.request - 20);
    pe.reason = CaptureReason::kPromptEnd;
    f.Observe(i % 10 < 6 ? RetentionEvent::kUsed : RetentionEvent::kRemoved, pe, now);
  }
  RetentionFacts tail = Facts(1, 100, 50, 0, now.request);
  tail.reason = CaptureReason::kTail;
  RetentionFacts pe = Facts(2, 100, 50, 0, now.request);
  pe.reason = CaptureReason::kPromptEnd;
  // A tail point's rare use comes sooner, but the misses hold their bytes
  // for a hundred prompts each: a prompt end saves more per byte held (a
  // ratio of reuse chance to the wait given use ranked them the other way).
  EXPECT_NEAR(f.Predict(tail, now).chance, 0.1, 0.03);
  EXPECT_GT(f.Predict(tail, now).stay, 50);
  EXPECT_GT(f.Score(pe, now), f.Score(tail, now));
  std::vector<RetentionFacts> both = {tail, pe};
  EXPECT_EQ(f.ChooseVictim(both, now), 0u);
  EXPECT_FALSE(f.Admit(tail, std::vector<RetentionFacts>{pe}, now));
}

TEST(RetentionTest, ForecastAdmitsByTheMeanValueOfWhatItDisplaces) {
  ForecastRetention f;
  RetentionClock now{0, 0};
  LearnPromptEndsUsedTailPointsNot(f, now);
  // To fit, a 1000-byte prompt end would push out nine small tail points and
  // one small prompt end worth more per byte than itself.
  std::vector<RetentionFacts> victims;
  for (int i = 0; i < 9; ++i) {
    victims.push_back(Facts(10 + i, 100, 50, now.tick, now.request));
    victims.back().reason = CaptureReason::kTail;
  }
  victims.push_back(Facts(20, 100, 50, now.tick, now.request));
  victims.back().reason = CaptureReason::kPromptEnd;
  RetentionFacts big = Facts(30, 1000, 200, now.tick, now.request);
  big.reason = CaptureReason::kPromptEnd;
  EXPECT_LT(f.Score(big, now), f.Score(victims.back(), now));
  EXPECT_FALSE(OutscoresVictims(f, big, victims, now));  // beating every victim: refused
  EXPECT_TRUE(f.Admit(big, victims, now));               // worth more than them together
  // A large tail point is worth less than what it would displace.
  RetentionFacts big_tail = big;
  big_tail.reason = CaptureReason::kTail;
  EXPECT_FALSE(f.Admit(big_tail, victims, now));
  // Room to spare: no victims, always admitted.
  EXPECT_TRUE(f.Admit(big_tail, std::vector<RetentionFacts>{}, now));
}

TEST(RetentionTest, ForecastValuesAKindByWhatItsRestoresSaved) {
  ForecastRetention f;
  RetentionClock now{0, 10};
  RetentionFacts end = Facts(1, 100, 16, 0, 9);  // 16 positions past its parent...
  end.reason = CaptureReason::kAfterGeneration;
  end.pos = 800;
  EXPECT_DOUBLE_EQ(f.Saving(end), 16);  // nothing measured yet: its cost
  for (int i = 0; i < 20; ++i) {
    RetentionFacts used = end;
    used.saved = 600;  // ...but restores of its kind saved most of their position
    f.Observe(RetentionEvent::kCredited, used, now);
  }
  EXPECT_GT(f.Saving(end), 500);
}

TEST(RetentionTest, MakeRetentionByName) {
  EXPECT_EQ((*MakeRetention("cairn"))->name(), "cairn");
  EXPECT_EQ((*MakeRetention("lru"))->name(), "lru");
  EXPECT_EQ((*MakeRetention("marconi"))->name(), "marconi:1");
  EXPECT_EQ((*MakeRetention("marconi:0.5"))->name(), "marconi:0.5");
  EXPECT_FALSE(MakeRetention("belady").ok());
  EXPECT_FALSE(MakeRetention("marconi:x").ok());
}

Checkpoint Sized(size_t bytes) {
  Checkpoint cp;
  cp.snapshot.pos = 10;
  cp.snapshot.data.assign(bytes, 1);
  return cp;
}

TEST(RetentionTest, StoreAsksItsPolicyToAdmitAndCountsRefusals) {
  StoreOptions o;
  o.ram_budget_bytes = 3 * (1000 + 256);
  o.retention = std::make_shared<ForecastRetention>();
  auto store = *CheckpointStore::Create(o);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->Put(Sized(1000), 1000).ok());
  // Worth far less per byte than anything it would push out.
  PutInfo cheap;
  cheap.cost = 1;
  EXPECT_FALSE(store->WouldAdmit(1000, SnapshotScope::kCheckpoint, 10, cheap));
  EXPECT_EQ(store->Put(Sized(1000), cheap).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store->stats().rejected, 2u);
  EXPECT_EQ(store->stats().ram_entries, 3u);
  // Worth more: admitted, one goes.
  PutInfo dear;
  dear.cost = 1e6;
  EXPECT_TRUE(store->WouldAdmit(1000, SnapshotScope::kCheckpoint, 10, dear));
  EXPECT_TRUE(store->Put(Sized(1000), dear).ok());
  EXPECT_EQ(store->stats().ram_entries, 3u);
  EXPECT_EQ(store->stats().evictions, 1u);
}

TEST(RetentionTest, StoreTellsItsPolicyTheCurrentCost) {
  StoreOptions o;
  o.ram_budget_bytes = 2 * (1000 + 256);
  o.retention = std::make_shared<LruRetention>();
  auto store = *CheckpointStore::Create(o);
  const CheckpointId a = *store->Put(Sized(1000), 10);
  store->SetCost(a, 500);
  EXPECT_EQ(store->Info(a)->cost, 500);
  store->SetCost(a, 0);  // a value is never zero
  EXPECT_GT(store->Info(a)->cost, 0);
}

}  // namespace
}  // namespace cairn::checkpoint
