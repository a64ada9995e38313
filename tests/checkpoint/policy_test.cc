#include "checkpoint/policy.h"

#include <set>

#include "gtest/gtest.h"

namespace cairn::checkpoint {
namespace {

MemoryCapabilities Transformer() { return {true, 1 << 20, 1 << 20, false}; }
MemoryCapabilities Recurrent() { return {false, 0, 0, true}; }
MemoryCapabilities Swa(Pos window) { return {false, window, window, true}; }

Prompt Tokens(int n) {
  Prompt p;
  for (int i = 0; i < n; ++i) p.AddToken(10 + i);
  return p;
}

TEST(CheckpointPolicyTest, TruncatableMemoryNeedsNoCheckpoints) {
  CheckpointPolicy policy(Transformer(), PolicyOptions{});
  EXPECT_FALSE(policy.captures());
  Prompt p = Tokens(1000);
  p.EndMessage();
  EXPECT_TRUE(policy.PlanPrefill(p, 0, nullptr).empty());
  EXPECT_FALSE(policy.CaptureAfterGeneration(100));
}

TEST(CheckpointPolicyTest, DisabledCapturesNothingAnywhere) {
  PolicyOptions o;
  o.enabled = false;
  CheckpointPolicy policy(Recurrent(), o);
  EXPECT_FALSE(policy.captures());
  EXPECT_TRUE(policy.PlanPrefill(Tokens(600), 0, nullptr).empty());
  EXPECT_FALSE(policy.PreserveBranch(10000));
}

TEST(CheckpointPolicyTest, RecurrentCapturesPromptEndWithLogitsBoundariesAndIntervals) {
  PolicyOptions o;
  o.every_n = 100;
  o.tail_every = 0;
  CheckpointPolicy policy(Recurrent(), o);
  ASSERT_TRUE(policy.captures());
  Prompt p;
  for (int i = 0; i < 30; ++i) p.AddToken(i);
  p.EndMessage();  // after 30
  for (int i = 0; i < 220; ++i) p.AddToken(i);
  p.EndMessage();                              // after 250
  for (int i = 0; i < 10; ++i) p.AddToken(i);  // prompt end 260, not a message end
  auto points = policy.PlanPrefill(p, 0, nullptr);
  ASSERT_EQ(points.size(), 5u);
  EXPECT_EQ(points[0].symbols, 30u);
  EXPECT_EQ(points[0].reason, CaptureReason::kMessageBoundary);
  EXPECT_EQ(points[1].symbols, 100u);
  EXPECT_EQ(points[1].reason, CaptureReason::kInterval);
  EXPECT_EQ(points[2].symbols, 200u);
  EXPECT_EQ(points[3].symbols, 250u);
  EXPECT_EQ(points[4].symbols, 260u);
  EXPECT_EQ(points[4].reason, CaptureReason::kPromptEnd);
  EXPECT_TRUE(points[4].keep_logits);
  for (size_t i = 0; i + 1 < points.size(); ++i) EXPECT_FALSE(points[i].keep_logits);
}

TEST(CheckpointPolicyTest, StartsAfterReusedPartAndSkipsExistingCheckpoints) {
  PolicyOptions o;
  o.every_n = 100;
  o.tail_every = 0;
  CheckpointPolicy policy(Recurrent(), o);
  Prompt p = Tokens(50);
  p.EndMessage();
  for (int i = 0; i < 200; ++i) p.AddToken(i);
  // Resuming at 50 (a message end without a checkpoint yet): captured there
  // too; the point at 100 already exists.
  auto points = policy.PlanPrefill(p, 50, [](size_t s) { return s == 100; });
  std::vector<size_t> at;
  for (auto& pt : points) at.push_back(pt.symbols);
  EXPECT_EQ(at, (std::vector<size_t>{50, 200, 250}));
  // Starting beyond everything but the end: only the end.
  points = policy.PlanPrefill(p, 249, nullptr);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].symbols, 250u);
}

TEST(CheckpointPolicyTest, TailPointsOnlyInsideTheLastMessage) {
  PolicyOptions o;
  o.every_n = 0;
  o.tail_every = 10;
  CheckpointPolicy policy(Recurrent(), o);
  Prompt p = Tokens(40);
  p.EndMessage();
  for (int i = 0; i < 35; ++i) p.AddToken(i);  // last message: 40..75
  p.EndMessage();
  std::vector<size_t> at;
  for (auto& pt : policy.PlanPrefill(p, 0, nullptr)) at.push_back(pt.symbols);
  EXPECT_EQ(at, (std::vector<size_t>{40, 50, 60, 70, 75}));
  // Counted from the last message's start, not from the resume point.
  at.clear();
  for (auto& pt : policy.PlanPrefill(p, 55, nullptr)) at.push_back(pt.symbols);
  EXPECT_EQ(at, (std::vector<size_t>{60, 70, 75}));
  // Points a cut can reach from the prompt end are skipped (SWA slack);
  // message boundaries and the end stay.
  at.clear();
  for (auto& pt : policy.PlanPrefill(p, 0, nullptr, 12)) at.push_back(pt.symbols);
  EXPECT_EQ(at, (std::vector<size_t>{40, 50, 60, 75}));
  // Only the last tail_span positions get them.
  o.tail_span = 20;
  at.clear();
  for (auto& pt : CheckpointPolicy(Recurrent(), o).PlanPrefill(p, 0, nullptr)) at.push_back(pt.symbols);
  EXPECT_EQ(at, (std::vector<size_t>{40, 65, 75}));
  o.tail_every = 0;
  at.clear();
  for (auto& pt : CheckpointPolicy(Recurrent(), o).PlanPrefill(p, 0, nullptr)) at.push_back(pt.symbols);
  EXPECT_EQ(at, (std::vector<size_t>{40, 75}));
}

TEST(CheckpointPolicyTest, TailPointsOfOnePromptFitTheirShareOfTheBudget) {
  PolicyOptions o;
  o.tail_every = 8;
  o.tail_span = 128;  // 16 points
  o.tail_budget_fraction = 1.0 / 16;
  CheckpointPolicy policy(Recurrent(), o);
  const size_t budget = size_t{2} << 30;                 // 128 MiB for tail points
  EXPECT_EQ(policy.TailSpacing(5 << 20, budget), 8);     // 16 x 5 MiB fit
  EXPECT_EQ(policy.TailSpacing(16 << 20, budget), 16);   // 8 fit: every 16
  EXPECT_EQ(policy.TailSpacing(75 << 20, budget), 128);  // 1 fits
  EXPECT_EQ(policy.TailSpacing(200 << 20, budget), 0);   // none: off
  o.tail_every = 0;
  EXPECT_EQ(CheckpointPolicy(Recurrent(), o).TailSpacing(1, budget), 0);
  // The spacing given to PlanPrefill replaces the option.
  Prompt p = Tokens(40);
  p.EndMessage();
  for (int i = 0; i < 35; ++i) p.AddToken(i);
  p.EndMessage();
  std::vector<size_t> at;
  for (auto& pt : policy.PlanPrefill(p, 0, nullptr, 0, 16)) at.push_back(pt.symbols);
  EXPECT_EQ(at, (std::vector<size_t>{40, 56, 72, 75}));
  at.clear();
  for (auto& pt : policy.PlanPrefill(p, 0, nullptr, 0, 0)) at.push_back(pt.symbols);
  EXPECT_EQ(at, (std::vector<size_t>{40, 75}));
}

TEST(CheckpointPolicyTest, ManyLiveSequencesShareTheBudgetForTailAndReplyPoints) {
  PolicyOptions o;
  o.tail_every = 8;
  o.generation_every = 16;
  o.tail_span = 128;
  o.tail_budget_fraction = 1.0 / 16;
  CheckpointPolicy policy(Recurrent(), o);
  const size_t budget = size_t{64} << 20;
  EXPECT_EQ(policy.TailSpacing(1 << 20, budget, 1), 32);   // 4 of 1 MiB fit in budget / 16
  EXPECT_EQ(policy.TailSpacing(1 << 20, budget, 32), 64);  // budget / 32: 2 fit
  EXPECT_EQ(policy.TailSpacing(1 << 20, budget, 128), 0);  // not one in budget / 128
  EXPECT_EQ(policy.GenerationSpacing(1 << 20, budget, 1), 32);
  EXPECT_EQ(policy.GenerationSpacing(64 << 10, budget, 1), 16);  // 64 fit: as configured
  EXPECT_TRUE(policy.CaptureDuringGeneration(16, 16));
  EXPECT_FALSE(policy.CaptureDuringGeneration(16, 32));
  EXPECT_FALSE(policy.CaptureDuringGeneration(16, 0));
  o.budget_spacing = false;  // the same points at every budget
  EXPECT_EQ(CheckpointPolicy(Recurrent(), o).TailSpacing(1 << 20, budget, 128), 8);
}

std::vector<Pos> PositionsOf(const Prompt& p, const std::vector<CapturePoint>& points,
                             CaptureReason only = CaptureReason::kSpaced) {
  std::vector<Pos> at;
  for (const CapturePoint& pt : points) {
    if (pt.reason == only) at.push_back(p.pos_after(pt.symbols));
  }
  return at;
}

// The default spacing (32, then an eighth) with intervals every 512 and no
// tail points.
PolicyOptions SpacedAndIntervals() {
  PolicyOptions o;
  o.every_n = 512;
  o.tail_every = 0;
  return o;
}

TEST(CheckpointPolicyTest, SpacedPointsInsideAnUnmarkedPromptGrowGeometricallyFromItsStart) {
  PolicyOptions o = SpacedAndIntervals();
  ASSERT_EQ(o.spaced_first, 32);
  ASSERT_EQ(o.spaced_fraction, 1.0 / 8);
  CheckpointPolicy policy(Recurrent(), o);
  const Prompt p = Tokens(1200);
  const auto plan = policy.PlanPrefill(p, 0, nullptr);
  // 32 apart, then an eighth of the mark: 256 + 32, 288 + 36, 324 + 40, ...
  EXPECT_EQ(PositionsOf(p, plan), (std::vector<Pos>{32,  64,  96,  128, 160, 192, 224, 256, 288,  324, 364,
                                                    409, 460, 517, 581, 653, 734, 825, 928, 1044, 1174}));
  EXPECT_EQ(PositionsOf(p, plan, CaptureReason::kInterval), (std::vector<Pos>{512, 1024}));
  // A divergence anywhere resumes at most max(32, an eighth of its position)
  // before it, from the points before it.
  std::vector<Pos> all = {0};
  for (const CapturePoint& pt : plan) all.push_back(p.pos_after(pt.symbols));
  for (Pos d = 1; d <= 1200; ++d) {
    Pos below = 0;
    for (Pos q : all) {
      if (q <= d) below = std::max(below, q);
    }
    EXPECT_LE(d - below, std::max<Pos>(32, d / 8)) << d;
  }
  // Resumed at 300: only the marks after it.
  EXPECT_EQ(PositionsOf(p, policy.PlanPrefill(p, 300, nullptr)).front(), 324);
  // Where the interval points are denser the series stops: 517 + 64 = 581,
  // then 72 apart would be wider than intervals every 64.
  o.every_n = 64;
  EXPECT_EQ(PositionsOf(p, CheckpointPolicy(Recurrent(), o).PlanPrefill(p, 0, nullptr)).back(), 581);
  o.every_n = 512;
  // A backend without snapshots inside a run (each point a split Forward
  // call): four times wider, 128 apart, then half the mark.
  o.spaced_min_scale = kSplitSpacedScale;
  const CheckpointPolicy split(Recurrent(), o);
  EXPECT_EQ(split.SpacedScale(p.positions(), 1, size_t{1} << 30), 4);
  EXPECT_EQ(PositionsOf(p, split.PlanPrefill(p, 0, nullptr)), (std::vector<Pos>{128, 256, 384, 576, 864}));
  o.spaced_min_scale = 1;
  // Off, or a prompt whose client marks boundaries: none.
  o.spaced_first = 0;
  EXPECT_TRUE(PositionsOf(p, CheckpointPolicy(Recurrent(), o).PlanPrefill(p, 0, nullptr)).empty());
  Prompt marked = Tokens(300);
  marked.EndMessage();
  marked.AddTokens(std::vector<TokenId>(500, 7));
  EXPECT_TRUE(PositionsOf(marked, policy.PlanPrefill(marked, 0, nullptr)).empty());
}

TEST(CheckpointPolicyTest, SpacedPointsLeaveTheTailToTailPointsButNotTheCutWindowToACut) {
  PolicyOptions o = SpacedAndIntervals();
  o.tail_every = 16;  // over the last 128 positions
  CheckpointPolicy policy(Recurrent(), o);
  const Prompt p = Tokens(400);  // tail points from 272
  const auto plan = policy.PlanPrefill(p, 0, nullptr);
  EXPECT_EQ(PositionsOf(p, plan), (std::vector<Pos>{32, 64, 96, 128, 160, 192, 224, 256}));
  EXPECT_EQ(PositionsOf(p, plan, CaptureReason::kTail).front(), 288);
  // An SWA ring that can cut back 200 positions from this prompt's end
  // cannot once later turns moved it on, when a trim leaves this prompt:
  // the spaced points in that window stay.
  o.tail_every = 0;
  const auto swa = CheckpointPolicy(Swa(200), o).PlanPrefill(p, 0, nullptr, 200);
  EXPECT_EQ(PositionsOf(p, swa), (std::vector<Pos>{32, 64, 96, 128, 160, 192, 224, 256, 288, 324, 364}));
}

TEST(CheckpointPolicyTest, SpacedPointsOfOnePromptFitTheirShareOfTheBudget) {
  PolicyOptions o = SpacedAndIntervals();
  ASSERT_EQ(o.tail_budget_fraction, 1.0 / 16);
  CheckpointPolicy policy(Recurrent(), o);
  const size_t budget = size_t{1} << 30;  // 64 MiB per prompt
  const Prompt p = Tokens(1200);          // 21 marks at scale 1
  EXPECT_EQ(policy.SpacedScale(p.positions(), 1 << 20, budget), 1);
  for (size_t mib : {4, 8, 16, 32, 64}) {
    const int scale = policy.SpacedScale(p.positions(), mib << 20, budget);
    ASSERT_GT(scale, 1) << mib;
    const auto plan = policy.PlanPrefill(p, 0, nullptr, 0, -1, 0, scale);
    EXPECT_LE(PositionsOf(p, plan).size(), 64 / mib) << mib;
    // Wider, the few marks left fall on interval points (512, 1024).
    if (mib <= 16) {
      EXPECT_FALSE(PositionsOf(p, plan).empty()) << mib;
    }
  }
  EXPECT_EQ(policy.SpacedScale(p.positions(), 65 << 20, budget), 0);  // not one fits
  EXPECT_TRUE(PositionsOf(p, policy.PlanPrefill(p, 0, nullptr, 0, -1, 0, 0)).empty());
  EXPECT_EQ(policy.SpacedScale(p.positions(), 1 << 20, budget, 2048), 0);  // 2048 sequences share it
  o.budget_spacing = false;
  EXPECT_EQ(CheckpointPolicy(Recurrent(), o).SpacedScale(p.positions(), 65 << 20, budget), 1);
  o.spaced_first = 0;
  EXPECT_EQ(CheckpointPolicy(Recurrent(), o).SpacedScale(p.positions(), 1, budget), 0);
}

TEST(CheckpointPolicyTest, DivergencePointsMarkWhereAPromptLeavesAKnownPath) {
  PolicyOptions o;
  o.every_n = 0;
  o.tail_every = 0;
  o.spaced_first = 0;
  CheckpointPolicy policy(Recurrent(), o);
  Prompt p = Tokens(300);  // plain tokens: no boundary marks where another prompt diverged
  auto plan = policy.PlanPrefill(p, 0, nullptr, 0, -1, 120);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].symbols, 120u);
  EXPECT_EQ(plan[0].reason, CaptureReason::kDivergence);
  EXPECT_EQ(plan[1].reason, CaptureReason::kPromptEnd);
  // Not where the reuse already reaches, nor where a snapshot exists.
  EXPECT_EQ(policy.PlanPrefill(p, 120, nullptr, 0, -1, 120).size(), 1u);
  EXPECT_EQ(policy
                .PlanPrefill(
                    p, 0, [](size_t d) { return d == 120; }, 0, -1, 120)
                .size(),
            1u);
  // A prompt that is all a known path's prefix (a regenerate): its end is
  // the divergence point, with logits.
  plan = policy.PlanPrefill(p, 0, nullptr, 0, -1, 300);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].reason, CaptureReason::kDivergence);
  EXPECT_TRUE(plan[0].keep_logits);
  o.divergence_points = false;
  EXPECT_EQ(CheckpointPolicy(Recurrent(), o).PlanPrefill(p, 0, nullptr, 0, -1, 120).size(), 1u);
}

TEST(CheckpointPolicyTest, MarconiPlacementKeepsOnlyDivergencePoints) {
  PolicyOptions o;
  o.placement = Placement::kMarconi;
  o.every_n = 64;
  CheckpointPolicy policy(Recurrent(), o);
  Prompt p = Tokens(200);
  p.EndMessage();
  for (int i = 0; i < 50; ++i) p.AddToken(i);
  p.EndMessage();
  EXPECT_TRUE(policy.PlanPrefill(p, 0, nullptr).empty());  // no boundary, interval, tail or end
  auto plan = policy.PlanPrefill(p, 0, nullptr, 0, -1, 200);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].symbols, 200u);
  EXPECT_FALSE(policy.CaptureDuringGeneration(64, 16));  // no points inside replies
  EXPECT_TRUE(policy.CaptureAfterGeneration(1));         // the end of each request
}

TEST(CheckpointPolicyTest, NeverCapturesInsideAMultimodalChunk) {
  PolicyOptions o;
  o.every_n = 8;
  CheckpointPolicy policy(Recurrent(), o);
  std::vector<float> rows(8 * 5 * 4, 0.5f);
  Prompt p = Tokens(5);                                                // positions 0..4
  ASSERT_TRUE(p.AddChunk(EmbeddingChunk{rows.data(), 8, 5}, 4).ok());  // positions 5..12
  for (int i = 0; i < 10; ++i) p.AddToken(i);                          // 13..22
  auto points = policy.PlanPrefill(p, 0, nullptr);
  std::set<Pos> positions;
  for (auto& pt : points) positions.insert(p.pos_after(pt.symbols));
  // The multiple 8 falls inside the chunk: the capture comes right after it.
  EXPECT_TRUE(positions.count(13));
  EXPECT_TRUE(positions.count(16));
  EXPECT_TRUE(positions.count(23));
  for (Pos q : positions) EXPECT_FALSE(q > 5 && q < 13) << q;
}

TEST(CheckpointPolicyTest, CanCutFollowsCapabilities) {
  EXPECT_TRUE(CheckpointPolicy::CanCut(Transformer(), 100, 3));
  EXPECT_TRUE(CheckpointPolicy::CanCut(Recurrent(), 100, 100));
  EXPECT_TRUE(CheckpointPolicy::CanCut(Recurrent(), 100, 0));
  EXPECT_FALSE(CheckpointPolicy::CanCut(Recurrent(), 100, 99));
  EXPECT_TRUE(CheckpointPolicy::CanCut(Swa(6), 100, 94));
  EXPECT_FALSE(CheckpointPolicy::CanCut(Swa(6), 100, 93));
  EXPECT_FALSE(CheckpointPolicy::CanCut(Transformer(), 100, 101));
  EXPECT_FALSE(CheckpointPolicy::CanCut(Transformer(), 100, -1));
}

TEST(CheckpointPolicyTest, ChooseRestorePrefersMostReuseThenLogitsThenCheaperKind) {
  std::vector<ReuseCandidate> c = {
      {ReuseKind::kLive, 10, 10, 0, false},
      {ReuseKind::kFullSnapshot, 40, 40, 1000, false},
      {ReuseKind::kCheckpointOnLive, 40, 40, 500, false},
      {ReuseKind::kOtherSequence, 30, 30, 0, false},
  };
  EXPECT_EQ(CheckpointPolicy::ChooseRestore(c), 2);
  c.push_back({ReuseKind::kBaseAndCheckpoint, 40, 40, 9000, true});
  EXPECT_EQ(CheckpointPolicy::ChooseRestore(c), 4);  // logits spare the last row
  c.push_back({ReuseKind::kFullSnapshot, 41, 41, 1, false});
  EXPECT_EQ(CheckpointPolicy::ChooseRestore(c), 5);
  EXPECT_EQ(CheckpointPolicy::ChooseRestore({}), -1);
  std::vector<ReuseCandidate> same = {{ReuseKind::kFullSnapshot, 5, 5, 900, false},
                                      {ReuseKind::kFullSnapshot, 5, 5, 100, false}};
  EXPECT_EQ(CheckpointPolicy::ChooseRestore(same), 1);
}

TEST(CheckpointPolicyTest, ScopeAndBranchDecisions) {
  CheckpointPolicy policy(Recurrent(), PolicyOptions{});
  EXPECT_EQ(policy.ScopeFor(1000, 1000), SnapshotScope::kFull);
  EXPECT_EQ(policy.ScopeFor(1000, 2000), SnapshotScope::kFull);
  EXPECT_EQ(policy.ScopeFor(1000, 2001), SnapshotScope::kCheckpoint);
  EXPECT_TRUE(policy.PreserveBranch(32));
  EXPECT_FALSE(policy.PreserveBranch(31));
  EXPECT_TRUE(policy.CaptureAfterGeneration(1));
  EXPECT_FALSE(policy.CaptureAfterGeneration(0));
  // Branch preservation applies to transformers too: returning would
  // otherwise recompute the abandoned branch.
  EXPECT_TRUE(CheckpointPolicy(Transformer(), PolicyOptions{}).PreserveBranch(100));
}

TEST(PromptTest, ChunkKeysAreAtomicAndContentAddressed) {
  std::vector<float> a(2 * 3 * 4, 1.0f), b = a;
  b[7] = 2.0f;
  EmbeddingChunk ca{a.data(), 2, 3}, cb{b.data(), 2, 3}, ct{a.data(), 3, 2};
  EXPECT_NE(ChunkKey(ca, 4), ChunkKey(cb, 4));
  EXPECT_NE(ChunkKey(ca, 4), ChunkKey(ct, 4));  // same rows, other grid
  EXPECT_EQ(ChunkKey(ca, 4), ChunkKey(EmbeddingChunk{a.data(), 2, 3}, 4));
  EXPECT_TRUE(IsChunkKey(ChunkKey(ca, 4)));
  Prompt p;
  p.AddToken(7);
  ASSERT_TRUE(p.AddChunk(ca, 4).ok());
  EXPECT_EQ(p.size(), 2u);
  EXPECT_EQ(p.positions(), 1 + 3);
  EXPECT_FALSE(IsChunkKey(p.keys()[0]));
  EXPECT_FALSE(p.AddChunk(EmbeddingChunk{nullptr, 1, 1}, 4).ok());
  EXPECT_FALSE(p.AddChunk(EmbeddingChunk{a.data(), 0, 1}, 4).ok());
  EXPECT_EQ(p.path().SymbolsAtOrBefore(3), 1u);
  EXPECT_EQ(p.path().SymbolsAtOrBefore(4), 2u);
}

}  // namespace
}  // namespace cairn::checkpoint
