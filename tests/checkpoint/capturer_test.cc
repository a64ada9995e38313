// Capture decisions through the engine over real backends (the golden
// models): checkpoints inside and after replies, tail points, divergence
// points, parking, and re-indexing after a restart.
#include "checkpoint/capturer.h"

#include <filesystem>
#include <vector>

#include "gtest/gtest.h"
#include "tests/checkpoint/engine_fixture.h"

namespace cairn::checkpoint {
namespace {

class CapturerTest : public EngineTest {};

TEST_P(CapturerTest, DropThinkRecomputesOnlyTheShortenedReply) {
  auto seq = NewSeq();
  const Turn t1 = FirstTurn(*seq, {60, 20}, 24);
  Prompt p2 = t1.prompt;
  Add(p2, std::vector<TokenId>(t1.reply.begin() + 8, t1.reply.end()));
  Add(p2, RandomTokens(rng_, 11, vocab_));
  auto r2 = Run(*seq, p2);
  EXPECT_EQ(r2.stats.recomputed, 16 + 11);
}

// A reply re-sent cut short (a client-side stop string): generation
// checkpoints every 16 positions let it resume at most 15 positions before
// the cut on every family. A truncatable memory just cuts back.
TEST_P(CapturerTest, ReplyResentCutShortResumesNearTheCut) {
  options_.generation_every = 16;
  Rebuild();
  auto seq = NewSeq();
  const Turn t1 = FirstTurn(*seq, {50, 20}, 40);
  Prompt p2 = t1.prompt;
  Add(p2, std::vector<TokenId>(t1.reply.begin(), t1.reply.begin() + 37));  // cut at 37
  Add(p2, RandomTokens(rng_, 9, vocab_));
  auto r2 = Run(*seq, p2);
  // Checkpoints at 16 and 32 generated positions: 5 of the reply to redo
  // (none where the memory cuts back: KV cache, SWA ring slack).
  const bool cuts = backend_->info().caps.rollback_slack >= 3;
  EXPECT_EQ(r2.stats.recomputed, (cuts ? 0 : 37 - 32) + 9);
  // The next turn drops the reply's checkpoints with the turn that used them.
  EXPECT_EQ(NextTurnRecomputed(*seq, p2, r2.logits, 4, 5), 5);
}

// Without message boundaries (plain token prompts) a shared system prompt is
// found where the second conversation leaves the first one's path, and kept
// there for any later one.
TEST_P(CapturerTest, SharedPrefixWithoutBoundariesIsLearnedWhereConversationsDiverge) {
  auto sys = RandomTokens(rng_, 80, vocab_);
  auto plain = [&](int user_len) {
    Prompt p;
    p.AddTokens(sys);
    p.AddTokens(RandomTokens(rng_, user_len, vocab_));
    return p;
  };
  auto a = NewSeq();
  Run(*a, plain(30));
  a.reset();  // gone: only the store can serve the next ones
  auto b = NewSeq();
  Run(*b, plain(20));
  b.reset();
  auto c = NewSeq();
  EXPECT_EQ(Run(*c, plain(13)).stats.recomputed, 13);
}

// An early turn edited in a plain-prompt conversation (no boundaries), two
// turns later: the tail points of that turn's prompt were kept (stale), so
// the prompt resumes at most one spacing before the change.
TEST_P(CapturerTest, EarlyEditWithoutBoundariesResumesNearTheChange) {
  auto seq = NewSeq();
  std::vector<std::vector<TokenId>> msgs = {RandomTokens(rng_, 40, vocab_), RandomTokens(rng_, 30, vocab_)};
  auto build = [&] {
    Prompt p;
    for (const auto& m : msgs) p.AddTokens(m);
    return p;
  };
  for (int t = 0; t < 2; ++t) {
    auto r = Run(*seq, build());
    msgs.push_back(Reply(*seq, r.logits, 10));
    msgs.push_back(RandomTokens(rng_, 20, vocab_));
  }
  // Edit the first turn's user message (symbols 40..69) at 60.
  msgs[1][20] = 3 + (msgs[1][20] + 1) % (vocab_ - 3);
  const Prompt edited = build();
  const int64_t after_edit = edited.positions() - 60;
  const int64_t recomputed = Run(*seq, edited).stats.recomputed;
  EXPECT_GE(recomputed, after_edit);
  EXPECT_LE(recomputed, after_edit + (recurrent_ ? options_.tail_every : 0));
}

// A disk tier outlives the process: a new engine over the same directory
// indexes the spilled checkpoints again and reuses them.
TEST_P(CapturerTest, SpilledCheckpointsServeAfterRestart) {
  if (!recurrent_) GTEST_SKIP() << "a truncatable memory keeps no checkpoints";
  char tmpl[] = "/tmp/cairn-restart-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  Prompt p;
  Add(p, RandomTokens(rng_, 70, vocab_));
  Add(p, RandomTokens(rng_, 20, vocab_));
  {
    Rebuild(size_t{256} << 20, dir);
    auto a = NewSeq();
    Run(*a, p);
    ASSERT_TRUE(engine_->Park(*a).ok());
    a.reset();
    // Valuable filler pushes the engine's checkpoints out to disk.
    const size_t ram = store_->options().ram_budget_bytes;
    for (int i = 0; i < 4; ++i) {
      Checkpoint filler;
      filler.snapshot.data.resize(ram / 3);
      ASSERT_TRUE(store_->Put(std::move(filler), 1e12).ok());
    }
    ASSERT_GT(store_->stats().disk_entries, 0u);
  }
  Rebuild(size_t{256} << 20, dir);  // a new store and engine: the restart
  EXPECT_GT(store_->stats().recovered, 0u);
  EXPECT_GT(engine_->index().entries(), 0u);
  auto b = NewSeq();
  auto r = Run(*b, p);
  EXPECT_LT(r.stats.recomputed, p.positions());
  std::filesystem::remove_all(dir);
}

// Parking keeps exactly one full snapshot at the sequence's history (the
// checkpoint-scope one taken there after the reply is superseded), and a
// second park adds nothing.
TEST_P(CapturerTest, ParkKeepsOneFullSnapshotAtTheHistory) {
  auto seq = NewSeq();
  const Turn t1 = FirstTurn(*seq, {50}, 6);
  ASSERT_TRUE(engine_->Park(*seq).ok());
  std::vector<EntryKind> at_end;
  for (const IndexHit& h : engine_->index().Lookup("", seq->history().keys(), 0).on_path) {
    if (h.depth == seq->history().size() && h.entry.kind != EntryKind::kLive) at_end.push_back(h.entry.kind);
  }
  ASSERT_EQ(at_end.size(), 1u);
  EXPECT_EQ(at_end[0], EntryKind::kFull);
  const uint64_t puts = store_->stats().puts;
  ASSERT_TRUE(engine_->Park(*seq).ok());
  EXPECT_EQ(store_->stats().puts, puts);
  // The parked state serves a new sequence on its own.
  Prompt next = t1.prompt;
  Add(next, t1.reply);
  Add(next, RandomTokens(rng_, 5, vocab_));
  seq.reset();
  auto fresh = NewSeq();
  EXPECT_EQ(Run(*fresh, next).stats.recomputed, 5);
}

INSTANTIATE_TEST_SUITE_P(Families, CapturerTest, ::testing::ValuesIn(kRows), RowName);

}  // namespace
}  // namespace cairn::checkpoint
