// The step-by-step prompt (PrefillJob) over real backends (the golden
// models): runs batched with another sequence's decode, cancellation, and
// the sequence it leaves behind.
#include "checkpoint/prefill_job.h"

#include <algorithm>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "tests/checkpoint/engine_fixture.h"

namespace cairn::checkpoint {
namespace {

using testing::Deviation;
using testing::FreshLogits;

class PrefillJobTest : public EngineTest {};

TEST_P(PrefillJobTest, CancelledLongPromptResumesWhereItStopped) {
  testing::CancellingBackend cancelling(backend_.get());
  options_.tail_every = 0;  // chunks of exactly 64: the cancel point is known
  options_.spaced_first = 0;
  auto engine = CheckpointEngine::Create(&cancelling, store_, options_);
  ASSERT_TRUE(engine.ok());
  auto seq = (*engine)->NewSequence();
  ASSERT_TRUE(seq.ok());
  Prompt p;
  Add(p, RandomTokens(rng_, 300, vocab_));
  cancelling.Arm(2);  // cancelled before the third chunk of 64
  PrefillControl control{cancelling.flag()};
  auto r = (*engine)->Prefill(**seq, p, control);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ((*seq)->history().size(), 128u);
  cancelling.Disarm();
  // The same prompt again: continues at 128.
  auto r2 = (*engine)->Prefill(**seq, p);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->stats.recomputed, 300 - 128);
  auto fresh = FreshLogits(*backend_, p);
  ASSERT_TRUE(fresh.ok());
  EXPECT_LE(Deviation(r2->logits, *fresh), GetParam().tolerance);
  // Diverging at 200: recurrent memories resume from the interval checkpoint at 192.
  Prompt q;
  std::vector<TokenId> t(p.size());
  for (size_t i = 0; i < p.size(); ++i) t[i] = p.token(i);
  t[200] = 3 + (t[200] + 1) % (vocab_ - 3);
  Add(q, t);
  // (An SWA ring with enough slack cuts back directly.)
  const bool can_cut = CheckpointPolicy::CanCut((*seq)->memory()->caps(), 300, 200);
  auto r3 = (*engine)->Prefill(**seq, q);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->stats.recomputed, 300 - (can_cut ? 200 : 192));
  auto fresh3 = FreshLogits(*backend_, q);
  ASSERT_TRUE(fresh3.ok());
  EXPECT_LE(Deviation(r3->logits, *fresh3), GetParam().tolerance);
}

// The scheduler's way: one sequence decodes while another's prompt runs in
// the same Forward batch, through a PrefillJob and Append.
TEST_P(PrefillJobTest, PrefillJobBatchesWithAnotherSequencesDecode) {
  auto a = NewSeq();
  Prompt pa;
  Add(pa, RandomTokens(rng_, 30, vocab_));
  auto ra = Run(*a, pa);
  Prompt pb;
  Add(pb, RandomTokens(rng_, 90, vocab_));
  auto b = NewSeq();
  auto job = engine_->StartPrefill(*b, pb);
  ASSERT_TRUE(job.ok()) << job.status();
  std::vector<TokenId> decoded;
  int steps = 0;
  while (!(*job)->done()) {
    const TokenId t = 3 + static_cast<TokenId>(rng_() % (vocab_ - 3));
    SequenceRun runs[2] = {DecodeRun(*a, t), (*job)->NextRun(32)};
    auto out = backend_->Forward(runs);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE(engine_->Append(*a, std::span<const TokenId>(&t, 1)).ok());
    decoded.push_back(t);
    ASSERT_TRUE((*job)->Absorbed((*out)[1]).ok());
    ++steps;
  }
  EXPECT_GE(steps, 3);
  auto rb = (*job)->Finish();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ((*job)->Finish().status().code(), absl::StatusCode::kFailedPrecondition);
  job->reset();
  EXPECT_EQ(rb->stats.recomputed, 90);
  auto fresh = FreshLogits(*backend_, pb);
  ASSERT_TRUE(fresh.ok());
  EXPECT_LE(Deviation(rb->logits, *fresh), GetParam().tolerance);
  // A's history took the appended tokens: its next turn continues exactly.
  Prompt pa2 = pa;
  Add(pa2, decoded);
  Add(pa2, RandomTokens(rng_, 5, vocab_));
  EXPECT_EQ(Run(*a, pa2).stats.recomputed, 5);
  // Append refuses tokens the memory did not absorb.
  const TokenId x = 5;
  EXPECT_EQ(engine_->Append(*a, std::span<const TokenId>(&x, 1)).code(), absl::StatusCode::kFailedPrecondition);
}

// A memory that ran ahead of its history (a Forward without Append) is
// refused before anything changes, and the sequence is not left locked.
TEST_P(PrefillJobTest, StartPrefillRefusesAMemoryAheadOfItsHistory) {
  auto seq = NewSeq();
  Prompt p;
  Add(p, RandomTokens(rng_, 20, vocab_));
  Run(*seq, p);
  const TokenId t = 7;
  {
    SequenceHold hold(*seq);
    SequenceRun run = DecodeRun(*seq, t);
    ASSERT_TRUE(backend_->Forward(std::span<const SequenceRun>(&run, 1)).ok());
  }  // released without Append
  Prompt q = p;
  Add(q, RandomTokens(rng_, 5, vocab_));
  EXPECT_EQ(engine_->StartPrefill(*seq, q).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(seq->history().size(), 20u);
  ASSERT_TRUE(engine_->Append(*seq, std::span<const TokenId>(&t, 1)).ok());  // not locked
  Prompt r = p;
  r.AddToken(t);
  r.EndMessage();
  Add(r, RandomTokens(rng_, 5, vocab_));
  EXPECT_EQ(Run(*seq, r).stats.recomputed, 5);
}

// A job dropped midway (its owner gave up) leaves the sequence holding the
// runs it absorbed, unlocked: the same prompt continues from there.
TEST_P(PrefillJobTest, DroppedJobLeavesTheAbsorbedPrefix) {
  auto seq = NewSeq();
  Prompt p;
  Add(p, RandomTokens(rng_, 100, vocab_));
  size_t absorbed = 0;
  {
    auto job = engine_->StartPrefill(*seq, p);
    ASSERT_TRUE(job.ok()) << job.status();
    SequenceRun run = (*job)->NextRun(32);
    absorbed = run.tokens.size();
    auto out = backend_->Forward(std::span<const SequenceRun>(&run, 1));
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE((*job)->Absorbed((*out)[0]).ok());
    EXPECT_FALSE((*job)->done());
  }
  ASSERT_GT(absorbed, 0u);
  EXPECT_EQ(seq->history().size(), absorbed);
  EXPECT_EQ(Run(*seq, p).stats.recomputed, static_cast<Pos>(100 - absorbed));
}

// A point asked for while the job runs (another request shares the prefix
// up to it): the runs stop there and a full checkpoint is kept, which a
// fresh sequence restores; points already absorbed or past the prompt are
// refused.
TEST_P(PrefillJobTest, SharedPointKeepsAFullCheckpointAFreshSequenceRestores) {
  options_.tail_every = 0;
  options_.spaced_first = 0;
  Rebuild();
  const std::vector<TokenId> tokens = RandomTokens(rng_, 100, vocab_);
  Prompt p;
  Add(p, tokens);
  auto a = NewSeq();
  auto job = engine_->StartPrefill(*a, p);
  ASSERT_TRUE(job.ok()) << job.status();
  std::vector<size_t> stops;
  auto step = [&](int32_t budget) {
    SequenceRun run = (*job)->NextRun(budget);
    auto out = backend_->Forward(std::span<const SequenceRun>(&run, 1));
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE((*job)->Absorbed((*out)[0]).ok());
    stops.push_back((*job)->absorbed());
  };
  step(32);
  ASSERT_EQ((*job)->absorbed(), 32u);
  EXPECT_FALSE((*job)->AddSharedPoint(32));
  EXPECT_FALSE((*job)->AddSharedPoint(101));
  EXPECT_TRUE((*job)->AddSharedPoint(77));
  while (!(*job)->done()) step(64);
  EXPECT_NE(std::find(stops.begin(), stops.end(), 77u), stops.end());
  auto ra = (*job)->Finish();
  ASSERT_TRUE(ra.ok()) << ra.status();
  job->reset();
  Prompt q;
  Add(q, std::vector<TokenId>(tokens.begin(), tokens.begin() + 77));
  Add(q, RandomTokens(rng_, 10, vocab_));
  const IndexMatch match = engine_->index().Lookup("", q.keys(), 0);
  EXPECT_TRUE(std::any_of(match.on_path.begin(), match.on_path.end(),
                          [](const IndexHit& h) { return h.depth == 77 && h.entry.kind == EntryKind::kFull; }));
  auto b = NewSeq();
  const PrefillResult rb = Run(*b, q);  // checked against a fresh computation
  EXPECT_EQ(rb.stats.reused, 77);
  EXPECT_EQ(rb.stats.recomputed, 10);
}

INSTANTIATE_TEST_SUITE_P(Families, PrefillJobTest, ::testing::ValuesIn(kRows), RowName);

}  // namespace
}  // namespace cairn::checkpoint
