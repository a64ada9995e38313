// The fixture of the checkpoint engine's tests over real backends (the golden
// models): an engine, a store and helpers that run prompts, check each
// against a fresh computation and decode replies. Each test file derives its
// own suite from EngineTest and instantiates it over kRows.
#ifndef CAIRN_TESTS_CHECKPOINT_ENGINE_FIXTURE_H_
#define CAIRN_TESTS_CHECKPOINT_ENGINE_FIXTURE_H_

#include <initializer_list>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/engine.h"
#include "gtest/gtest.h"
#include "tests/checkpoint/engine_testing.h"
#include "tests/testing/fault_env.h"

namespace cairn::checkpoint {

inline constexpr double kTolerance = 1e-4;  // golden README: F32 within 1e-4 x std

struct Row {
  const char* model;
  double tolerance;
};

// The golden models of every family, and the deviation each is held to.
inline const Row kRows[] = {
    {"golden/models/llama.gguf", kTolerance},  {"golden/models/mamba2.gguf", kTolerance},
    {"golden/models/gemma3.gguf", 5e-3},       {"golden/models/granitehybrid.gguf", kTolerance},
    {"golden/models/qwen35.gguf", kTolerance},
};

inline std::string RowName(const ::testing::TestParamInfo<Row>& info) {
  std::string s = info.param.model;
  s = s.substr(s.rfind('/') + 1);
  return s.substr(0, s.rfind('.'));
}

inline std::vector<TokenId> RandomTokens(std::mt19937& rng, int n, int vocab) {
  std::vector<TokenId> t(n);
  for (auto& x : t) x = 3 + static_cast<TokenId>(rng() % (vocab - 3));
  return t;
}

// An engine over one golden model (the parameter) with a byte-budgeted
// store; its helpers run prompts and check them against a fresh computation.
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
    auto fresh = testing::FreshLogits(*backend_, prompt);
    EXPECT_TRUE(fresh.ok()) << fresh.status();
    if (fresh.ok()) {
      EXPECT_LE(testing::Deviation(r->logits, *fresh), GetParam().tolerance);
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

  // A conversation's first turn on `seq`: a prompt of messages of random
  // tokens of the given lengths, computed and checked (Run), then a reply of
  // `reply_tokens` tokens (Reply).
  struct Turn {
    Prompt prompt;
    PrefillResult result;
    std::vector<TokenId> reply;
  };
  Turn FirstTurn(Sequence& seq, std::initializer_list<int> message_lengths, int reply_tokens) {
    Turn turn;
    for (int n : message_lengths) Add(turn.prompt, RandomTokens(rng_, n, vocab_));
    turn.result = Run(seq, turn.prompt);
    turn.reply = Reply(seq, turn.result.logits, reply_tokens);
    return turn;
  }

  // The next turn on `seq` after `prompt`, whose last row's logits are
  // `logits`: a reply of `reply_tokens` (Reply), then a new message of
  // `message_tokens` random tokens. Returns the positions its prompt
  // recomputed (Run checks it).
  Pos NextTurnRecomputed(Sequence& seq, const Prompt& prompt, const std::vector<float>& logits, int reply_tokens,
                         int message_tokens) {
    Prompt next = prompt;
    Add(next, Reply(seq, logits, reply_tokens));
    Add(next, RandomTokens(rng_, message_tokens, vocab_));
    return Run(seq, next).stats.recomputed;
  }

  // A one-token decode run on `seq`'s memory for the caller's own Forward
  // (under a SequenceHold when other threads use the engine); `token` must
  // outlive the run.
  static SequenceRun DecodeRun(Sequence& seq, const TokenId& token) {
    static const int32_t kRow0 = 0;
    SequenceRun run;
    run.memory = seq.memory();
    run.start_pos = seq.next_pos();
    run.tokens = std::span<const TokenId>(&token, 1);
    run.logit_rows = std::span<const int32_t>(&kRow0, 1);
    return run;
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
  Env* env_ = nullptr;                          // the store's; null: the default
  std::shared_ptr<RetentionPolicy> retention_;  // the store's; null: the default
  std::shared_ptr<CheckpointStore> store_;
  std::unique_ptr<CheckpointEngine> engine_;
  std::mt19937 rng_{42};
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_TESTS_CHECKPOINT_ENGINE_FIXTURE_H_
