// The checkpoint engine over real backends (the golden models): each test
// checks both that the logits equal a fresh computation and that only the
// necessary positions were recomputed.
#include "checkpoint/engine.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "tests/checkpoint/engine_testing.h"
#include "tests/checkpoint/recording_retention.h"
#include "tests/testing/fault_env.h"

namespace cairn::checkpoint {
namespace {

using testing::Deviation;
using testing::FreshLogits;

constexpr double kTolerance = 1e-4;  // golden README: F32 within 1e-4 x std

struct Row {
  const char* model;
  double tolerance;
};

const Row kRows[] = {
    {"golden/models/llama.gguf", kTolerance},
    {"golden/models/mamba2.gguf", kTolerance},
    {"golden/models/gemma3.gguf", 5e-3},
    {"golden/models/granitehybrid.gguf", kTolerance},
    {"golden/models/qwen35.gguf", kTolerance},
};

std::string RowName(const ::testing::TestParamInfo<Row>& info) {
  std::string s = info.param.model;
  s = s.substr(s.rfind('/') + 1);
  return s.substr(0, s.rfind('.'));
}

std::vector<TokenId> RandomTokens(std::mt19937& rng, int n, int vocab) {
  std::vector<TokenId> t(n);
  for (auto& x : t) x = 3 + static_cast<TokenId>(rng() % (vocab - 3));
  return t;
}

class EngineTest : public ::testing::TestWithParam<Row> {
 protected:
  void SetUp() override {
    CAIRN_REQUIRE_SHARED(GetParam().model);
    auto backend = testing::LoadBackend(GetParam().model);
    if (backend.status().code() == absl::StatusCode::kNotFound) {
      GTEST_SKIP() << backend.status().message();
    }
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    vocab_ = backend_->info().n_vocab;
    recurrent_ = !backend_->info().caps.truncatable;
    options_.prefill_chunk = 64;
    options_.every_n = 64;
    options_.tail_every = 16;
    Rebuild();
  }

  void Rebuild(size_t ram = size_t{256} << 20, std::string disk = "") {
    options_.ram_budget_bytes = ram;
    options_.disk_dir = std::move(disk);
    options_.disk_budget_bytes = 64 << 20;
    engine_.reset();
    store_.reset();
    if (options_.enabled) {
      StoreOptions store_options = options_.store();
      store_options.env = env_;
      if (retention_ != nullptr) store_options.retention = retention_;
      auto store = CheckpointStore::Create(store_options);
      ASSERT_TRUE(store.ok()) << store.status();
      store_ = std::move(*store);
    }
    auto engine = CheckpointEngine::Create(backend_.get(), store_, options_);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }

  std::unique_ptr<Sequence> NewSeq(const std::string& tenant = "") {
    auto s = engine_->NewSequence(tenant);
    EXPECT_TRUE(s.ok());
    return std::move(*s);
  }

  // Prefill + exactness check against a fresh computation.
  PrefillResult Run(Sequence& seq, const Prompt& prompt) {
    auto r = engine_->Prefill(seq, prompt);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    EXPECT_EQ(r->stats.reused + r->stats.recomputed, prompt.positions());
    auto fresh = FreshLogits(*backend_, prompt);
    EXPECT_TRUE(fresh.ok()) << fresh.status();
    if (fresh.ok()) {
      EXPECT_LE(Deviation(r->logits, *fresh), GetParam().tolerance);
      EXPECT_EQ(testing::Argmax(r->logits), testing::Argmax(*fresh));
    }
    return *r;
  }

  // A reply of n tokens decoded after `logits`; returns its tokens. Random
  // tokens, not greedy ones: a random model's greedy reply tends to repeat
  // one token, which would make shortened replies match by accident.
  std::vector<TokenId> Reply(Sequence& seq, std::vector<float> logits, int n) {
    std::vector<TokenId> out;
    for (int i = 0; i < n; ++i) {
      TokenId t = static_cast<TokenId>((testing::Argmax(logits) + rng_()) % (vocab_ - 3) + 3);
      out.push_back(t);
      auto next = engine_->Decode(seq, t);
      EXPECT_TRUE(next.ok()) << next.status();
      if (!next.ok()) break;
      logits = std::move(*next);
    }
    EXPECT_TRUE(engine_->EndGeneration(seq).ok());
    return out;
  }

  static void Add(Prompt& p, const std::vector<TokenId>& message) {
    p.AddTokens(message);
    p.EndMessage();
  }

  // A store with its disk tier in `dir`; `p` (two messages) is computed and
  // parked, then valuable filler pushes every checkpoint out to disk.
  void ParkThenSpill(const std::string& dir, Prompt& p) {
    Rebuild(size_t{256} << 20, dir);
    Add(p, RandomTokens(rng_, 70, vocab_));
    Add(p, RandomTokens(rng_, 20, vocab_));
    {
      auto a = NewSeq();
      Run(*a, p);
      ASSERT_TRUE(engine_->Park(*a).ok());
    }
    const size_t ram = store_->options().ram_budget_bytes;
    for (int i = 0; i < 4; ++i) {
      Checkpoint filler;
      filler.snapshot.data.resize(ram / 3);
      ASSERT_TRUE(store_->Put(std::move(filler), 1e12).ok());
    }
  }

  std::unique_ptr<Backend> backend_;
  int vocab_ = 0;
  bool recurrent_ = false;
  CheckpointOptions options_;
  // Declared before the store: it must outlive it.
  cairn::testing::FaultEnv fault_env_;
  Env* env_ = nullptr;  // the store's; null: the default
  std::shared_ptr<RetentionPolicy> retention_;  // the store's; null: the default
  std::shared_ptr<CheckpointStore> store_;
  std::unique_ptr<CheckpointEngine> engine_;
  std::mt19937 rng_{42};
};

TEST_P(EngineTest, AppendedTurnComputesOnlyTheNewMessage) {
  auto seq = NewSeq();
  auto sys = RandomTokens(rng_, 40, vocab_), u1 = RandomTokens(rng_, 20, vocab_),
       u2 = RandomTokens(rng_, 15, vocab_);
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

TEST_P(EngineTest, RegenerateNeedsNoForwardPass) {
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
  auto reply = Reply(*seq, r2.logits, 5);
  Prompt p3 = p;
  Add(p3, reply);
  Add(p3, RandomTokens(rng_, 7, vocab_));
  EXPECT_EQ(Run(*seq, p3).stats.recomputed, 7);
}

TEST_P(EngineTest, DropThinkRecomputesOnlyTheShortenedReply) {
  auto seq = NewSeq();
  Prompt p1;
  Add(p1, RandomTokens(rng_, 60, vocab_));
  Add(p1, RandomTokens(rng_, 20, vocab_));
  auto r1 = Run(*seq, p1);
  auto reply = Reply(*seq, r1.logits, 24);
  Prompt p2 = p1;
  Add(p2, std::vector<TokenId>(reply.begin() + 8, reply.end()));
  Add(p2, RandomTokens(rng_, 11, vocab_));
  auto r2 = Run(*seq, p2);
  EXPECT_EQ(r2.stats.recomputed, 16 + 11);
}

// A reply re-sent cut short (a client-side stop string): generation
// checkpoints every 16 positions let it resume at most 15 positions before
// the cut on every family. A truncatable memory just cuts back.
TEST_P(EngineTest, ReplyResentCutShortResumesNearTheCut) {
  options_.generation_every = 16;
  Rebuild();
  auto seq = NewSeq();
  Prompt p1;
  Add(p1, RandomTokens(rng_, 50, vocab_));
  Add(p1, RandomTokens(rng_, 20, vocab_));
  auto r1 = Run(*seq, p1);
  auto reply = Reply(*seq, r1.logits, 40);
  Prompt p2 = p1;
  Add(p2, std::vector<TokenId>(reply.begin(), reply.begin() + 37));  // cut at 37
  Add(p2, RandomTokens(rng_, 9, vocab_));
  auto r2 = Run(*seq, p2);
  // Checkpoints at 16 and 32 generated positions: 5 of the reply to redo
  // (none where the memory cuts back: KV cache, SWA ring slack).
  const bool cuts = backend_->info().caps.rollback_slack >= 3;
  EXPECT_EQ(r2.stats.recomputed, (cuts ? 0 : 37 - 32) + 9);
  // The next turn drops the reply's checkpoints with the turn that used them.
  auto reply2 = Reply(*seq, r2.logits, 4);
  Prompt p3 = p2;
  Add(p3, reply2);
  Add(p3, RandomTokens(rng_, 5, vocab_));
  EXPECT_EQ(Run(*seq, p3).stats.recomputed, 5);
}

TEST_P(EngineTest, EditOfTheLastMessageResumesAtItsStart) {
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

TEST_P(EngineTest, BranchAndReturnRecomputesOnlyTheNewTurn) {
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

TEST_P(EngineTest, SharedSystemPromptServesOtherSessionsOfTheSameTenant) {
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

// Without message boundaries (plain token prompts) a shared system prompt is
// found where the second conversation leaves the first one's path, and kept
// there for any later one.
TEST_P(EngineTest, SharedPrefixWithoutBoundariesIsLearnedWhereConversationsDiverge) {
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

// A session that expires is parked: the conversation resumes on a new
// sequence (hybrids included, whose other checkpoints need the attention
// KV of a live sequence).
TEST_P(EngineTest, DroppedSessionResumesFromItsParkedState) {
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

// The checkpoints of a conversation pushed out of a full store, then the
// conversation sent again: the store's policy hears of the deepest one that
// would have served (a policy learning only from what it kept would never
// see what it keeps leaving out).
TEST_P(EngineTest, PolicyHearsOfTheCheckpointAPromptMissed) {
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

// An early turn edited in a plain-prompt conversation (no boundaries), two
// turns later: the tail points of that turn's prompt were kept (stale), so
// the prompt resumes at most one spacing before the change.
TEST_P(EngineTest, EarlyEditWithoutBoundariesResumesNearTheChange) {
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

TEST_P(EngineTest, CancelledLongPromptResumesWhereItStopped) {
  testing::CancellingBackend cancelling(backend_.get());
  options_.tail_every = 0;  // chunks of exactly 64: the cancel point is known
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

TEST_P(EngineTest, CorruptSpilledCheckpointIsNeverRestored) {
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

TEST_P(EngineTest, UnreadableSpilledCheckpointIsRecomputed) {
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

TEST_P(EngineTest, ForkContinuesIndependently) {
  auto a = NewSeq();
  Prompt p;
  Add(p, RandomTokens(rng_, 40, vocab_));
  auto r = Run(*a, p);
  auto reply = Reply(*a, r.logits, 6);
  auto b = engine_->Fork(*a);
  ASSERT_TRUE(b.ok());
  Prompt pa = p, pb = p;
  Add(pa, reply);
  Add(pb, reply);
  Add(pa, RandomTokens(rng_, 5, vocab_));
  Add(pb, RandomTokens(rng_, 7, vocab_));
  EXPECT_EQ(Run(**b, pb).stats.recomputed, 7);
  EXPECT_EQ(Run(*a, pa).stats.recomputed, 5);
}

TEST_P(EngineTest, ExportImportRoundTrips) {
  auto a = NewSeq();
  Prompt p;
  Add(p, RandomTokens(rng_, 30, vocab_));
  auto r = Run(*a, p);
  auto reply = Reply(*a, r.logits, 4);
  auto exported = engine_->Export(*a);
  ASSERT_TRUE(exported.ok()) << exported.status();
  auto b = engine_->Import(*exported, "other");
  ASSERT_TRUE(b.ok()) << b.status();
  Prompt q = p;
  Add(q, reply);
  Add(q, RandomTokens(rng_, 6, vocab_));
  EXPECT_EQ(Run(**b, q).stats.recomputed, 6);
  auto broken = *exported;
  broken.history.Resize(3);
  EXPECT_EQ(engine_->Import(broken).status().code(), absl::StatusCode::kInvalidArgument);
  broken = *exported;
  broken.snapshot.layout ^= 1;
  EXPECT_EQ(engine_->Import(broken).status().code(), absl::StatusCode::kInvalidArgument);
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

// The scheduler's way: one sequence decodes while another's prompt runs in
// the same Forward batch, through a PrefillJob and Append.
TEST_P(EngineTest, PrefillJobBatchesWithAnotherSequencesDecode) {
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
    const int32_t row = 0;
    SequenceRun runs[2];
    runs[0].memory = a->memory();
    runs[0].start_pos = a->next_pos();
    runs[0].tokens = std::span<const TokenId>(&t, 1);
    runs[0].logit_rows = std::span<const int32_t>(&row, 1);
    runs[1] = (*job)->NextRun(32);
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
  EXPECT_EQ(engine_->Append(*a, std::span<const TokenId>(&x, 1)).code(),
            absl::StatusCode::kFailedPrecondition);
}

// The scheduler's decode (its own Forward on memory(), then Append) runs
// under a SequenceHold, so another thread's prefill never copies that memory
// while it is written: a held sequence is skipped as a copy source, and
// prefills copying a sequence that decodes concurrently stay exact.
TEST_P(EngineTest, PrefillCopyingASequenceThatDecodesConcurrentlyIsExact) {
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
    EXPECT_EQ(hold.Append(std::span<const TokenId>(&x, 1)).code(),
              absl::StatusCode::kFailedPrecondition);
  }

  // A decodes (the scheduler's way) while the main thread prefills other
  // sequences on prompts that share A's published prefix.
  std::vector<TokenId> decoded;
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread decoder([&] {
    std::mt19937 rng(7);
    const int32_t row = 0;
    for (int i = 0; i < 48 && (i < 8 || !stop.load()); ++i) {
      const TokenId t = 3 + static_cast<TokenId>(rng() % (vocab_ - 3));
      SequenceHold hold(*a);
      SequenceRun run;
      run.memory = a->memory();
      run.start_pos = a->next_pos();
      run.tokens = std::span<const TokenId>(&t, 1);
      run.logit_rows = std::span<const int32_t>(&row, 1);
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

// A disk tier outlives the process: a new engine over the same directory
// indexes the spilled checkpoints again and reuses them.
TEST_P(EngineTest, SpilledCheckpointsServeAfterRestart) {
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
