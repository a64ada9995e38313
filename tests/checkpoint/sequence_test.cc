// Live sequences over real backends (the golden models): fork, export and
// import, isolation, parking when dropped, and SequenceHold for a decode
// running beside other threads' prefills.
#include "checkpoint/sequence.h"

#include <atomic>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/checkpoint/engine_fixture.h"

namespace cairn::checkpoint {
namespace {

using testing::Deviation;
using testing::FreshLogits;

class SequenceTest : public EngineTest {};

TEST_P(SequenceTest, ForkContinuesIndependently) {
  auto a = NewSeq();
  const Turn t1 = FirstTurn(*a, {40}, 6);
  auto b = engine_->Fork(*a);
  ASSERT_TRUE(b.ok());
  Prompt pa = t1.prompt, pb = t1.prompt;
  Add(pa, t1.reply);
  Add(pb, t1.reply);
  Add(pa, RandomTokens(rng_, 5, vocab_));
  Add(pb, RandomTokens(rng_, 7, vocab_));
  EXPECT_EQ(Run(**b, pb).stats.recomputed, 7);
  EXPECT_EQ(Run(*a, pa).stats.recomputed, 5);
}

TEST_P(SequenceTest, ExportImportRoundTrips) {
  auto a = NewSeq();
  const Turn t1 = FirstTurn(*a, {30}, 4);
  auto exported = engine_->Export(*a);
  ASSERT_TRUE(exported.ok()) << exported.status();
  auto b = engine_->Import(*exported, "other");
  ASSERT_TRUE(b.ok()) << b.status();
  Prompt q = t1.prompt;
  Add(q, t1.reply);
  Add(q, RandomTokens(rng_, 6, vocab_));
  EXPECT_EQ(Run(**b, q).stats.recomputed, 6);
  auto broken = *exported;
  broken.history.Resize(3);
  EXPECT_EQ(engine_->Import(broken).status().code(), absl::StatusCode::kInvalidArgument);
  broken = *exported;
  broken.snapshot.layout ^= 1;
  EXPECT_EQ(engine_->Import(broken).status().code(), absl::StatusCode::kInvalidArgument);
}

// A session that expires is parked: the conversation resumes on a new
// sequence (hybrids included, whose other checkpoints need the attention
// KV of a live sequence).
TEST_P(SequenceTest, DroppedSessionResumesFromItsParkedState) {
  Prompt p;
  Add(p, RandomTokens(rng_, 60, vocab_));
  Add(p, RandomTokens(rng_, 20, vocab_));
  auto seq = NewSeq();
  auto r = Run(*seq, p);
  Add(p, Reply(*seq, r.logits, 12));
  seq.reset();
  Add(p, RandomTokens(rng_, 9, vocab_));
  auto fresh = NewSeq();
  EXPECT_EQ(Run(*fresh, p).stats.recomputed, 9);
}

// The scheduler's decode (its own Forward on memory(), then Append) runs
// under a SequenceHold, so another thread's prefill never copies that memory
// while it is written: a held sequence is skipped as a copy source, and
// prefills copying a sequence that decodes concurrently stay exact.
TEST_P(SequenceTest, PrefillCopyingASequenceThatDecodesConcurrentlyIsExact) {
  const auto sys = RandomTokens(rng_, 40, vocab_);
  auto a = NewSeq();
  Prompt pa;
  Add(pa, sys);
  Run(*a, pa);
  ASSERT_TRUE(engine_->EndGeneration(*a).ok());  // publishes A at pa

  // Held: a prefill on another thread does not copy A.
  {
    SequenceHold hold(*a);
    Prompt pb = pa;
    Add(pb, RandomTokens(rng_, 7, vocab_));
    absl::StatusOr<PrefillResult> rb = absl::UnknownError("not run");
    std::thread t([&] {
      auto b = engine_->NewSequence();
      if (b.ok()) rb = engine_->Prefill(**b, pb);
    });
    t.join();
    ASSERT_TRUE(rb.ok()) << rb.status();
    EXPECT_NE(rb->stats.source, ReuseKind::kOtherSequence);
    auto fresh = FreshLogits(*backend_, pb);
    ASSERT_TRUE(fresh.ok());
    EXPECT_LE(Deviation(rb->logits, *fresh), GetParam().tolerance);
    hold.Release();
    const TokenId x = 5;
    EXPECT_EQ(hold.Append(std::span<const TokenId>(&x, 1)).code(), absl::StatusCode::kFailedPrecondition);
  }

  // A decodes (the scheduler's way) while the main thread prefills other
  // sequences on prompts that share A's published prefix.
  std::vector<TokenId> decoded;
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread decoder([&] {
    std::mt19937 rng(7);
    for (int i = 0; i < 48 && (i < 8 || !stop.load()); ++i) {
      const TokenId t = 3 + static_cast<TokenId>(rng() % (vocab_ - 3));
      SequenceHold hold(*a);
      SequenceRun run = DecodeRun(*a, t);
      auto out = backend_->Forward(std::span<const SequenceRun>(&run, 1));
      if (!out.ok() || !hold.Append(std::span<const TokenId>(&t, 1)).ok()) {
        ++bad;
        return;
      }
      decoded.push_back(t);
    }
  });
  for (int k = 0; k < 4; ++k) {
    Prompt pb = pa;
    Add(pb, RandomTokens(rng_, 3 + static_cast<int>(rng_() % 8), vocab_));
    auto b = NewSeq();
    auto rb = engine_->Prefill(*b, pb);
    ASSERT_TRUE(rb.ok()) << rb.status();
    auto fresh = FreshLogits(*backend_, pb);
    ASSERT_TRUE(fresh.ok());
    EXPECT_LE(Deviation(rb->logits, *fresh), GetParam().tolerance) << "prompt " << k;
    EXPECT_EQ(testing::Argmax(rb->logits), testing::Argmax(*fresh));
  }
  stop.store(true);
  decoder.join();
  EXPECT_EQ(bad.load(), 0);
  // A's own state stayed exact: its next turn computes only the new message.
  Prompt pa2 = pa;
  Add(pa2, decoded);
  Add(pa2, RandomTokens(rng_, 5, vocab_));
  EXPECT_EQ(Run(*a, pa2).stats.recomputed, 5);
}

// An isolated sequence's state serves only itself and its forks: another
// sequence of the same tenant recomputes everything, even after the
// isolated one is dropped (and parked).
TEST_P(SequenceTest, IsolatedStateServesOnlyItsForks) {
  auto a = NewSeq("t");
  engine_->Isolate(*a);
  EXPECT_TRUE(a->isolated());
  EXPECT_NE(a->tenant(), "t");
  Prompt p;
  Add(p, RandomTokens(rng_, 50, vocab_));
  Run(*a, p);
  ASSERT_TRUE(engine_->EndGeneration(*a).ok());
  auto fork = engine_->Fork(*a);
  ASSERT_TRUE(fork.ok()) << fork.status();
  EXPECT_TRUE((*fork)->isolated());
  EXPECT_EQ((*fork)->tenant(), a->tenant());
  Prompt q = p;
  Add(q, RandomTokens(rng_, 6, vocab_));
  EXPECT_EQ(Run(**fork, q).stats.recomputed, 6);
  fork->reset();
  a.reset();
  auto other = NewSeq("t");
  EXPECT_EQ(Run(*other, q).stats.recomputed, q.positions());
}

INSTANTIATE_TEST_SUITE_P(Families, SequenceTest, ::testing::ValuesIn(kRows), RowName);

}  // namespace
}  // namespace cairn::checkpoint
