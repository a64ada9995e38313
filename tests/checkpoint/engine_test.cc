// The checkpoint engine's entry points over real backends (the golden
// models): every prompt's logits equal a fresh computation, and only the
// necessary positions are recomputed. The engine's parts have their own
// files beside this one (reuse_planner_test.cc, capturer_test.cc,
// prefill_job_test.cc, sequence_test.cc).
#include "checkpoint/engine.h"

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/checkpoint/engine_fixture.h"

namespace cairn::checkpoint {
namespace {

using testing::Deviation;
using testing::FreshLogits;

TEST_P(EngineTest, AppendedTurnComputesOnlyTheNewMessage) {
  auto seq = NewSeq();
  auto sys = RandomTokens(rng_, 40, vocab_), u1 = RandomTokens(rng_, 20, vocab_), u2 = RandomTokens(rng_, 15, vocab_);
  Prompt p1;
  Add(p1, sys);
  Add(p1, u1);
  auto r1 = Run(*seq, p1);
  EXPECT_EQ(r1.stats.recomputed, 60);
  auto reply = Reply(*seq, r1.logits, 10);
  Prompt p2 = p1;
  Add(p2, reply);
  Add(p2, u2);
  auto r2 = Run(*seq, p2);
  EXPECT_EQ(r2.stats.recomputed, 15);
  EXPECT_EQ(r2.stats.reused, 70);
}

// Sessions on several threads share one engine, store and index (as in the
// service): every request still equals a fresh computation.
TEST_P(EngineTest, ConcurrentSessionsShareTheEngine) {
  Rebuild(size_t{1} << 20);  // small: evictions race with lookups
  const auto sys = RandomTokens(rng_, 60, vocab_);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      auto seq = engine_->NewSequence();
      if (!seq.ok()) {
        ++bad;
        return;
      }
      Prompt p;
      Add(p, sys);
      for (int turn = 0; turn < 6; ++turn) {
        Add(p, RandomTokens(rng, 5 + rng() % 20, vocab_));
        auto r = engine_->Prefill(**seq, p);
        auto fresh = FreshLogits(*backend_, p);
        if (!r.ok() || !fresh.ok() || Deviation(r->logits, *fresh) > GetParam().tolerance) {
          ++bad;
          return;
        }
        std::vector<TokenId> reply;
        for (int i = 0; i < 6; ++i) {
          reply.push_back(3 + rng() % (vocab_ - 3));
          if (!engine_->Decode(**seq, reply.back()).ok()) ++bad;
        }
        if (!engine_->EndGeneration(**seq).ok()) ++bad;
        if (turn % 3 == 2) {  // regenerate from the same prompt
          auto again = engine_->Prefill(**seq, p);
          if (!again.ok() || Deviation(again->logits, *fresh) > GetParam().tolerance) ++bad;
          reply.assign(reply.begin(), reply.begin() + 3);
          for (TokenId x : reply) {
            if (!engine_->Decode(**seq, x).ok()) ++bad;
          }
        }
        Add(p, reply);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(store_->stats().ram_bytes, store_->options().ram_budget_bytes);
}

// Multimodal chunks (models that take embeddings): positions advance by
// max(nx, ny), chunks are never split, and reuse around them stays exact.
TEST_P(EngineTest, EmbeddingChunksAreReusedWhole) {
  const ModelInfo& info = backend_->info();
  if (!info.accepts_embeddings) GTEST_SKIP() << info.arch << " takes no embedding chunks";
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> img1(4 * 3 * info.n_embd), img2(2 * 5 * info.n_embd);
  for (float& x : img1) x = u(rng_);
  for (float& x : img2) x = u(rng_);
  const EmbeddingChunk c1{img1.data(), 4, 3}, c2{img2.data(), 2, 5};
  auto seq = NewSeq();
  Prompt p;
  Add(p, RandomTokens(rng_, 20, vocab_));
  p.AddTokens(RandomTokens(rng_, 3, vocab_));
  ASSERT_TRUE(p.AddChunk(c1, info.n_embd).ok());
  p.AddTokens(RandomTokens(rng_, 6, vocab_));
  ASSERT_TRUE(p.AddChunk(c2, info.n_embd).ok());
  p.EndMessage();
  EXPECT_EQ(p.positions(), 20 + 3 + 4 + 6 + 5);
  auto r1 = Run(*seq, p);
  EXPECT_EQ(r1.stats.recomputed, p.positions());
  auto reply = Reply(*seq, r1.logits, 6);
  EXPECT_EQ(Run(*seq, p).stats.recomputed, 0);  // regenerate
  Reply(*seq, r1.logits, 6);
  Prompt p2 = p;
  Add(p2, reply);
  Add(p2, RandomTokens(rng_, 4, vocab_));
  EXPECT_EQ(Run(*seq, p2).stats.recomputed, 6 + 4);
  // The same text with another second image: diverges at that chunk, whole.
  std::vector<float> img3 = img2;
  img3[7] += 0.5f;
  Prompt p3;
  Add(p3, std::vector<TokenId>(p.path().keys().begin(), p.path().keys().begin() + 20));
  for (size_t i = 20; i < 23; ++i) p3.AddToken(p.token(i));
  ASSERT_TRUE(p3.AddChunk(c1, info.n_embd).ok());
  for (size_t i = 24; i < 30; ++i) p3.AddToken(p.token(i));
  ASSERT_TRUE(p3.AddChunk(EmbeddingChunk{img3.data(), 2, 5}, info.n_embd).ok());
  p3.EndMessage();
  auto r3 = Run(*seq, p3);
  EXPECT_GE(r3.stats.recomputed, 5);  // at least the whole changed chunk
  EXPECT_LE(r3.stats.recomputed, 5 + 16);
}

TEST_P(EngineTest, DisabledCheckpointingIsTheBaseline) {
  options_.enabled = false;
  Rebuild();
  auto seq = NewSeq();
  Prompt p;
  Add(p, RandomTokens(rng_, 50, vocab_));
  auto r1 = Run(*seq, p);
  Reply(*seq, r1.logits, 5);
  // A KV cache (or an SWA ring with slack) still cuts itself back; a
  // recurrent state cannot go back.
  const bool can_cut = CheckpointPolicy::CanCut(seq->memory()->caps(), seq->next_pos(), 50);
  auto r2 = Run(*seq, p);
  EXPECT_EQ(r2.stats.recomputed, can_cut ? 0 : 50);
  EXPECT_EQ(engine_->index().entries(), 0u);
}

TEST_P(EngineTest, RejectsBadPromptsWithoutChangingTheSequence) {
  auto seq = NewSeq();
  Prompt p;
  Add(p, RandomTokens(rng_, 20, vocab_));
  Run(*seq, p);
  Prompt bad = p;
  bad.AddToken(vocab_);
  EXPECT_EQ(engine_->Prefill(*seq, bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Prefill(*seq, Prompt()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(seq->history().size(), 20u);
  EXPECT_EQ(seq->next_pos(), 20);
  EXPECT_EQ(Run(*seq, p).stats.recomputed, 0);
}

INSTANTIATE_TEST_SUITE_P(Families, EngineTest, ::testing::ValuesIn(kRows), RowName);

}  // namespace
}  // namespace cairn::checkpoint
