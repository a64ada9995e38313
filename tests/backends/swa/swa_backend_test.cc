// The sliding-window family against llama.cpp's golden logits (gemma3,
// window 8), against an independent plain implementation on synthetic gemma2
// and gemma3 models (soft caps, RoPE scaling, pattern), and the memory
// semantics that only this family has: a rollback window that follows the
// ring, checkpoints of the rings alone, and restores that cut the global
// layers back.
#include "backends/swa/swa_backend.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends/model/gguf.h"
#include "backends/model/gguf_writer.h"
#include "gtest/gtest.h"
#include "synthetic/architectures.h"
#include "tests/testing/gguf_rewrite.h"
#include "tests/testing/shared_data.h"
#include "tools/eval_lib.h"

namespace cairn {
namespace {

constexpr char kModel[] = "golden/models/gemma3.gguf";
constexpr char kLogits[] = "golden/logits/gemma3.bin";
constexpr double kGoldenTolerance = 5e-3;  // llama.cpp's fp16 GELU table (golden README)
// Our own batch shapes against each other: F32 rounding only.
constexpr double kSelfTolerance = 1e-4;

std::unique_ptr<Backend> Load(int32_t slack, int32_t max_context = 0) {
  auto model = ModelFile::Open(testing::SharedPath(kModel));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  BackendOptions options;
  options.max_context = max_context;
  SwaOptions swa;
  swa.rollback_slack = slack;
  auto b = SwaFamily(swa).create(std::shared_ptr<const ModelFile>(std::move(*model)), options);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}

SequenceLogits Feed(Backend& b, SequenceMemory* mem, const std::vector<TokenId>& tokens, size_t begin, size_t end) {
  std::vector<int32_t> rows(end - begin);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>(i);
  SequenceRun run;
  run.memory = mem;
  run.start_pos = mem->next_pos();
  run.tokens = std::span<const TokenId>(tokens).subspan(begin, end - begin);
  run.logit_rows = rows;
  auto r = b.Forward(std::span<const SequenceRun>(&run, 1));
  EXPECT_TRUE(r.ok()) << r.status();
  SequenceLogits out;
  out.n_tokens = static_cast<int32_t>(end - begin);
  out.n_vocab = b.info().n_vocab;
  if (r.ok()) out.values = (*r)[0].values;
  return out;
}

// Feeds tokens[begin, end) in pieces of `chunk`.
SequenceLogits FeedChunks(Backend& b, SequenceMemory* mem, const std::vector<TokenId>& tokens, size_t begin, size_t end,
                          size_t chunk) {
  SequenceLogits all{static_cast<int32_t>(end - begin), b.info().n_vocab, {}};
  for (size_t s = begin; s < end; s += chunk) {
    SequenceLogits part = Feed(b, mem, tokens, s, std::min(end, s + chunk));
    all.values.insert(all.values.end(), part.values.begin(), part.values.end());
  }
  return all;
}

SequenceLogits Slice(const SequenceLogits& s, int32_t begin, int32_t end) {
  return SequenceLogits{end - begin, s.n_vocab,
                        std::vector<float>(s.values.begin() + static_cast<size_t>(begin) * s.n_vocab,
                                           s.values.begin() + static_cast<size_t>(end) * s.n_vocab)};
}

void ExpectClose(const SequenceLogits& got, const SequenceLogits& ref, double tol, const std::string& what) {
  auto c = CompareLogits(got, ref);
  ASSERT_TRUE(c.ok()) << what << ": " << c.status();
  EXPECT_LE(c->max_rel, tol) << what << ": max|diff| " << c->max_abs_diff << " std " << c->ref_std;
  EXPECT_EQ(c->argmax_agree, c->rows) << what;
}

class SwaGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_REQUIRE_SHARED(kModel);
    CAIRN_REQUIRE_SHARED(kLogits);
    auto seqs = ReadTokenFile(testing::SharedPath("golden/tokens.txt"));
    ASSERT_TRUE(seqs.ok()) << seqs.status();
    tokens_ = *seqs;
    ASSERT_EQ(tokens_.size(), 4u);
    auto ref = ReadLogitsFile(testing::SharedPath(kLogits));
    ASSERT_TRUE(ref.ok()) << ref.status();
    golden_ = *ref;
    long_ = tokens_[3];  // 160 tokens: 20 windows
    ASSERT_EQ(long_.size(), 160u);
  }
  std::vector<std::vector<TokenId>> tokens_;
  std::vector<SequenceLogits> golden_;
  std::vector<TokenId> long_;
};

TEST_F(SwaGoldenTest, ModelInfoAndFreshCapabilities) {
  auto b = Load(512);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->info().arch, "gemma3");
  EXPECT_EQ(b->info().family, "swa");
  EXPECT_EQ(b->info().n_vocab, 512);
  EXPECT_FALSE(b->info().caps.truncatable);
  EXPECT_TRUE(b->info().caps.has_checkpoint_state);
  EXPECT_EQ(b->info().caps.rollback_window, 0);
}

// Every chunking, with a ring that never wraps (default slack) and with one
// that wraps every few tokens (slack 1 and 3: rings of 8 and 10 rows, so a
// chunk of 9 or 64 is longer than the ring).
TEST_F(SwaGoldenTest, MatchesGoldenInEveryChunkingAndRingSize) {
  for (int32_t slack : {512, 3, 1}) {
    auto b = Load(slack);
    ASSERT_NE(b, nullptr);
    auto evaluated = EvalSequences(*b, tokens_, EvalMode{0});
    ASSERT_TRUE(evaluated.ok()) << evaluated.status();
    const std::vector<SequenceLogits>& batch = *evaluated;
    auto c = CompareAll(batch, golden_);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_LE(c->max_rel, kGoldenTolerance) << "slack " << slack;
    EXPECT_EQ(c->argmax_agree, c->rows) << "slack " << slack;
    RecordProperty("golden_max_rel_slack" + std::to_string(slack), std::to_string(c->max_rel));
    for (int32_t chunk : {1, 3, 8, 9, 64}) {
      for (size_t s = 0; s < tokens_.size(); ++s) {
        const std::string what =
            "slack " + std::to_string(slack) + " chunk " + std::to_string(chunk) + " seq " + std::to_string(s);
        auto l = EvalSequence(*b, tokens_[s], EvalMode{chunk});
        ASSERT_TRUE(l.ok()) << l.status();
        ExpectClose(*l, golden_[s], kGoldenTolerance, what + " vs golden");
        ExpectClose(*l, batch[s], kSelfTolerance, what + " vs one batch");
      }
    }
  }
}

TEST_F(SwaGoldenTest, RollbackWindowIsTheWholeSequenceUntilTheRingWraps) {
  auto b = Load(512);
  ASSERT_NE(b, nullptr);
  auto mem = b->NewSequence();
  ASSERT_TRUE(mem.ok());
  Feed(*b, mem->get(), long_, 0, 160);
  EXPECT_EQ((*mem)->caps().rollback_window, 160);
  ASSERT_TRUE((*mem)->Truncate(1).ok());
  auto fresh = EvalSequence(*b, long_, EvalMode{0});
  ASSERT_TRUE(fresh.ok());
  ExpectClose(Feed(*b, mem->get(), long_, 1, 160), Slice(*fresh, 1, 160), kSelfTolerance, "recomputed from 1");
}

// Slack 3: after any Forward the rings give back exactly 3 positions.
TEST_F(SwaGoldenTest, TruncateJustInsideTheRollbackWindowRecomputesExactlyJustOutsideFails) {
  auto b = Load(3);
  ASSERT_NE(b, nullptr);
  auto fresh = EvalSequence(*b, long_, EvalMode{0});
  ASSERT_TRUE(fresh.ok());
  for (size_t chunk : {size_t{1}, size_t{5}, size_t{64}}) {
    SCOPED_TRACE("fed in chunks of " + std::to_string(chunk));
    auto mem = *b->NewSequence();
    FeedChunks(*b, mem.get(), long_, 0, 100, chunk);
    ASSERT_EQ(mem->caps().rollback_window, 3);

    // Just outside: fails, changes nothing (continuing equals an untouched twin).
    absl::Status s = mem->Truncate(100 - 4);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_EQ(mem->next_pos(), 100);
    EXPECT_EQ(mem->caps().rollback_window, 3);
    auto twin = *b->NewSequence();
    FeedChunks(*b, twin.get(), long_, 0, 100, chunk);
    EXPECT_EQ(Feed(*b, mem.get(), long_, 100, 110).values, Feed(*b, twin.get(), long_, 100, 110).values);
    ASSERT_EQ(mem->caps().rollback_window, 3);

    // Just inside: the recomputed suffix equals a fresh computation.
    ASSERT_TRUE(mem->Truncate(110 - 3).ok());
    EXPECT_EQ(mem->caps().rollback_window, 0);
    EXPECT_EQ(mem->Truncate(106).code(), absl::StatusCode::kFailedPrecondition);
    ExpectClose(FeedChunks(*b, mem.get(), long_, 107, 160, chunk), Slice(*fresh, 107, 160), kSelfTolerance,
                "suffix after truncating inside the window");
  }
}

TEST_F(SwaGoldenTest, TruncatingInStepsShrinksTheWindowAndEachStepRecomputesExactly) {
  auto b = Load(6);
  ASSERT_NE(b, nullptr);
  auto fresh = EvalSequence(*b, long_, EvalMode{0});
  ASSERT_TRUE(fresh.ok());
  auto mem = *b->NewSequence();
  Feed(*b, mem.get(), long_, 0, 50);
  ASSERT_EQ(mem->caps().rollback_window, 6);
  ASSERT_TRUE(mem->Truncate(48).ok());
  EXPECT_EQ(mem->caps().rollback_window, 4);
  ASSERT_TRUE(mem->Truncate(45).ok());
  EXPECT_EQ(mem->caps().rollback_window, 1);
  EXPECT_EQ(mem->Truncate(43).code(), absl::StatusCode::kFailedPrecondition);
  ExpectClose(Feed(*b, mem.get(), long_, 45, 47), Slice(*fresh, 45, 47), kSelfTolerance, "45..47");
  EXPECT_EQ(mem->caps().rollback_window, 3);  // two new rows, still within the ring
  ExpectClose(Feed(*b, mem.get(), long_, 47, 160), Slice(*fresh, 47, 160), kSelfTolerance, "47..160");
}

// The checkpoint holds the rings alone; Restore cuts the global layers back
// from wherever the sequence went to the checkpoint's position.
TEST_F(SwaGoldenTest, CheckpointRestoreThenGlobalTruncationContinuesLikeAFreshComputation) {
  auto b = Load(3);
  ASSERT_NE(b, nullptr);
  auto fresh = EvalSequence(*b, long_, EvalMode{0});
  ASSERT_TRUE(fresh.ok());
  for (size_t at : {size_t{5}, size_t{30}, size_t{97}}) {
    SCOPED_TRACE("checkpoint at " + std::to_string(at));
    auto mem = *b->NewSequence();
    FeedChunks(*b, mem.get(), long_, 0, at, 7);
    auto cp = mem->Capture(SnapshotScope::kCheckpoint);
    ASSERT_TRUE(cp.ok()) << cp.status();
    EXPECT_EQ(cp->pos, static_cast<Pos>(at));
    EXPECT_EQ(cp->bytes(), mem->Bytes(SnapshotScope::kCheckpoint));
    const Pos window = mem->caps().rollback_window;
    SequenceLogits first = Feed(*b, mem.get(), long_, at, 160);
    // Diverge far beyond the ring's reach, then come back.
    std::vector<TokenId> other(long_.rbegin(), long_.rend());
    FeedChunks(*b, mem.get(), other, 0, 40, 9);
    ASSERT_EQ(mem->Truncate(static_cast<Pos>(at)).code(), absl::StatusCode::kFailedPrecondition);
    ASSERT_TRUE(mem->Restore(*cp).ok());
    EXPECT_EQ(mem->next_pos(), static_cast<Pos>(at));
    EXPECT_EQ(mem->caps().rollback_window, window);
    SequenceLogits second = Feed(*b, mem.get(), long_, at, 160);
    EXPECT_EQ(first.values, second.values) << "restore does not continue bit for bit";
    ExpectClose(second, Slice(*fresh, static_cast<int32_t>(at), 160), kSelfTolerance, "vs fresh");
  }
}

// A restored checkpoint keeps its rollback reach: a checkpoint taken a few
// positions after a divergence point serves it.
TEST_F(SwaGoldenTest, RestoredCheckpointCanStillRollBackWithinItsWindow) {
  auto b = Load(4);
  ASSERT_NE(b, nullptr);
  auto fresh = EvalSequence(*b, long_, EvalMode{0});
  ASSERT_TRUE(fresh.ok());
  auto mem = *b->NewSequence();
  Feed(*b, mem.get(), long_, 0, 60);
  auto cp = mem->Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(cp.ok());
  Feed(*b, mem.get(), long_, 60, 120);
  ASSERT_TRUE(mem->Restore(*cp).ok());
  ASSERT_EQ(mem->caps().rollback_window, 4);
  ASSERT_TRUE(mem->Truncate(56).ok());
  ExpectClose(Feed(*b, mem.get(), long_, 56, 160), Slice(*fresh, 56, 160), kSelfTolerance, "56..160");
}

TEST_F(SwaGoldenTest, CheckpointRestoreNeedsTheGlobalPrefix) {
  auto b = Load(3);
  ASSERT_NE(b, nullptr);
  auto mem = *b->NewSequence();
  Feed(*b, mem.get(), long_, 0, 40);
  auto cp = mem->Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(cp.ok());
  auto other = *b->NewSequence();
  Feed(*b, other.get(), long_, 0, 20);
  EXPECT_EQ(other->Restore(*cp).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(other->next_pos(), 20);
  // A full snapshot carries the global layers too: it restores anywhere.
  auto full = mem->Capture(SnapshotScope::kFull);
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(other->Restore(*full).ok());
  EXPECT_EQ(Feed(*b, other.get(), long_, 40, 50).values, Feed(*b, mem.get(), long_, 40, 50).values);
}

TEST_F(SwaGoldenTest, CheckpointBytesAreTheRingsAloneWhateverTheContext) {
  auto b = Load(512);
  ASSERT_NE(b, nullptr);
  // gemma3.gguf: 4 layers, 2 of them local; K and V rows of 2 heads x 16.
  const size_t row = 2 * (2 * 16) * sizeof(float);
  auto mem = *b->NewSequence();
  Feed(*b, mem.get(), long_, 0, 10);
  const size_t at10 = mem->Bytes(SnapshotScope::kCheckpoint);
  const size_t header = at10 - 2 * 10 * row;
  Feed(*b, mem.get(), long_, 10, 160);
  EXPECT_EQ(mem->Bytes(SnapshotScope::kCheckpoint), header + 2 * 160 * row);  // ring not full yet
  EXPECT_EQ(mem->Bytes(SnapshotScope::kFull), header + 2 * 160 * row + 2 * 160 * row);

  auto small = Load(3);  // rings of 8 - 1 + 3 = 10 rows
  ASSERT_NE(small, nullptr);
  auto m2 = *small->NewSequence();
  Feed(*small, m2.get(), long_, 0, 64);
  const size_t at64 = m2->Bytes(SnapshotScope::kCheckpoint);
  Feed(*small, m2.get(), long_, 64, 160);
  EXPECT_EQ(m2->Bytes(SnapshotScope::kCheckpoint), at64);
  EXPECT_EQ(at64, header + 2 * 10 * row);
  auto cp = m2->Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(cp.ok());
  EXPECT_EQ(cp->bytes(), at64);
}

TEST_F(SwaGoldenTest, SnapshotsOfAnotherRingSizeAreRefused) {
  auto a = Load(3), b = Load(4);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto ma = *a->NewSequence();
  Feed(*a, ma.get(), long_, 0, 20);
  auto full = ma->Capture(SnapshotScope::kFull);
  ASSERT_TRUE(full.ok());
  auto mb = *b->NewSequence();
  Feed(*b, mb.get(), long_, 0, 20);
  EXPECT_EQ(mb->Restore(*full).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(mb->next_pos(), 20);
}

// Several sequences at different positions in one Forward, rings wrapping.
TEST_F(SwaGoldenTest, SeveralSequencesInOneForwardWithWrappingRings) {
  auto b = Load(2);
  ASSERT_NE(b, nullptr);
  auto a0 = *b->NewSequence(), a1 = *b->NewSequence();
  Feed(*b, a0.get(), long_, 0, 37);
  SequenceLogits alone0 = Feed(*b, a0.get(), long_, 37, 60);
  SequenceLogits alone1 = Feed(*b, a1.get(), tokens_[2], 0, 64);

  auto b0 = *b->NewSequence(), b1 = *b->NewSequence();
  Feed(*b, b0.get(), long_, 0, 37);
  std::vector<int32_t> rows0(23), rows1(64);
  for (size_t i = 0; i < rows0.size(); ++i) rows0[i] = static_cast<int32_t>(i);
  for (size_t i = 0; i < rows1.size(); ++i) rows1[i] = static_cast<int32_t>(i);
  SequenceRun runs[2] = {
      SequenceRun{b0.get(), 37, std::span<const TokenId>(long_).subspan(37, 23), nullptr, rows0, {}},
      SequenceRun{b1.get(), 0, tokens_[2], nullptr, rows1, {}},
  };
  auto r = b->Forward(runs);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectClose(SequenceLogits{23, alone0.n_vocab, (*r)[0].values}, alone0, kSelfTolerance, "sequence 0");
  ExpectClose(SequenceLogits{64, alone1.n_vocab, (*r)[1].values}, alone1, kSelfTolerance, "sequence 1");
  EXPECT_EQ(b0->caps().rollback_window, 2);
  EXPECT_EQ(b1->caps().rollback_window, 2);
}

TEST(SwaBackendTest, RejectsOtherArchitecturesAndBadSlack) {
  CAIRN_REQUIRE_SHARED("golden/models/llama.gguf");
  auto llama = ModelFile::Open(testing::SharedPath("golden/models/llama.gguf"));
  ASSERT_TRUE(llama.ok());
  auto b = SwaFamily().create(std::shared_ptr<const ModelFile>(std::move(*llama)), BackendOptions{});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  CAIRN_REQUIRE_SHARED(kModel);
  auto gemma = ModelFile::Open(testing::SharedPath(kModel));
  ASSERT_TRUE(gemma.ok());
  SwaOptions bad;
  bad.rollback_slack = 0;
  auto c = SwaFamily(bad).create(std::shared_ptr<const ModelFile>(std::move(*gemma)), BackendOptions{});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
}

absl::StatusOr<std::unique_ptr<Backend>> CreateFrom(const std::vector<uint8_t>& bytes) {
  auto file = ModelFile::FromBuffer(bytes, "rewritten");
  if (!file.ok()) return file.status();
  return SwaFamily().create(std::shared_ptr<const ModelFile>(std::move(*file)), BackendOptions{});
}

// gpt-oss.gguf has no pattern key: the reference's period 2 makes layers 0
// and 2 local. The key, as a period or a per-layer array, moves them.
TEST(SwaBackendTest, GptOssLayersFollowTheSlidingWindowPattern) {
  CAIRN_REQUIRE_SHARED("golden/models/gpt-oss.gguf");
  auto orig = ModelFile::Open(testing::SharedPath("golden/models/gpt-oss.gguf"));
  ASSERT_TRUE(orig.ok());
  auto b = SwaFamily().create(std::shared_ptr<const ModelFile>(std::move(*orig)), BackendOptions{});
  ASSERT_TRUE(b.ok()) << b.status();
  orig = ModelFile::Open(testing::SharedPath("golden/models/gpt-oss.gguf"));
  ASSERT_TRUE(orig.ok());
  const std::string key = "gpt-oss.attention.sliding_window_pattern";
  auto period2 = CreateFrom(testing::RewriteGguf(**orig, {}, [&](GgufWriter& w) { w.SetUint32(key, 2); }));
  auto odd_local = CreateFrom(testing::RewriteGguf(**orig, {}, [&](GgufWriter& w) {
    w.SetInt32Array(key, {0, 1, 0, 1});
  }));
  ASSERT_TRUE(period2.ok() && odd_local.ok()) << period2.status() << odd_local.status();
  std::vector<TokenId> toks(40);  // 5 windows
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<TokenId>(1 + (i * 37) % 500);
  auto l = EvalSequence(**b, toks, EvalMode{});
  auto l2 = EvalSequence(**period2, toks, EvalMode{});
  auto lodd = EvalSequence(**odd_local, toks, EvalMode{});
  ASSERT_TRUE(l.ok() && l2.ok() && lodd.ok());
  EXPECT_EQ(l2->values, l->values);
  // The first 8 positions see the same keys either way (through other
  // kernels: a ring against a full cache).
  ExpectClose(Slice(*lodd, 0, 8), Slice(*l, 0, 8), kSelfTolerance, "within the first window");
  auto c = CompareLogits(Slice(*lodd, 8, 40), Slice(*l, 8, 40));
  ASSERT_TRUE(c.ok());
  EXPECT_GT(c->max_rel, 1e-2) << "beyond the window the local layers differ";
}

TEST(SwaBackendTest, GptOssNeedsItsSinksAndBiases) {
  CAIRN_REQUIRE_SHARED("golden/models/gpt-oss.gguf");
  auto orig = ModelFile::Open(testing::SharedPath("golden/models/gpt-oss.gguf"));
  ASSERT_TRUE(orig.ok());
  for (const std::string missing :
       {"blk.2.attn_sinks.weight", "blk.1.attn_output.bias", "blk.3.ffn_gate_inp.bias", "blk.0.ffn_down_exps.bias"}) {
    auto b = CreateFrom(testing::RewriteGguf(
        **orig, {}, nullptr, [&](const std::string& name) { return name == missing ? std::string() : name; }));
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << missing << ": " << b.status();
    EXPECT_NE(b.status().message().find(missing), std::string::npos) << b.status();
  }
}

// ---------------------------------------------------------------------------
// Synthetic models against a plain implementation written from the model
// definition (double precision, explicit masks, no ring, no kernels).

struct Synth {
  std::string arch = "gemma2";
  int E = 32, H = 4, HKV = 2, D = 8, L = 3, F = 48, V = 40, W = 4, P = 2;
  double base = 10000, base_swa = 10000, rope_factor = 0;  // 0: no scaling key
  double attn_cap = 0, final_cap = 0;                      // 0: key absent
  bool qk_norm = false;
  bool write_pattern = true;                    // false: the arch's default period applies
  std::map<std::string, std::vector<float>> t;  // the values Build wrote, by tensor name

  static bool EndsWith(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  }

  // The model (synthetic/) with norms away from 1 and matrices a little
  // larger than the default, so that each of them matters.
  std::shared_ptr<const ModelFile> Build() {
    synthetic::SyntheticModel m =
        synthetic::Gemma({.arch = arch,
                          .n_embd = E,
                          .n_ff = F,
                          .n_vocab = V,
                          .n_layer = L,
                          .n_head = H,
                          .n_head_kv = HKV,
                          .head_dim = D,
                          .window = W,
                          .pattern = write_pattern ? P : 0,
                          .n_ctx = 256,
                          .rope_base = static_cast<float>(base),
                          .rope_base_swa = arch == "gemma3" ? static_cast<float>(base_swa) : -1.0f,
                          .qk_norm = qk_norm});
    GgufWriter& w = m.metadata();
    if (rope_factor > 0) {
      w.SetString(m.Key("rope.scaling.type"), "linear");
      w.SetFloat32(m.Key("rope.scaling.factor"), static_cast<float>(rope_factor));
    }
    if (attn_cap > 0) w.SetFloat32(m.Key("attn_logit_softcapping"), static_cast<float>(attn_cap));
    if (final_cap > 0) w.SetFloat32(m.Key("final_logit_softcapping"), static_cast<float>(final_cap));
    const float s_in = 1.5f / std::sqrt(static_cast<float>(E));
    for (synthetic::SyntheticTensor& tensor : m.tensors()) {
      if (EndsWith(tensor.name, "norm.weight")) {
        tensor.init = synthetic::Init::Uniform(0.5f, 1.5f);
      } else if (tensor.weight && tensor.name != "token_embd.weight") {
        tensor.init = synthetic::Init::Symmetric(s_in);
      }
    }
    m.Materialize();
    for (const synthetic::SyntheticTensor& tensor : m.tensors()) t[tensor.name] = tensor.init.values;
    auto file = m.Open("synthetic-" + arch);
    EXPECT_TRUE(file.ok()) << file.status();
    return file.ok() ? *std::move(file) : nullptr;
  }

  // y = W x for a GGUF matrix of shape [n_in, n_out].
  std::vector<double> Mul(const std::string& name, const std::vector<double>& x) const {
    const std::vector<float>& w = t.at(name);
    const size_t n_in = x.size(), n_out = w.size() / n_in;
    std::vector<double> y(n_out, 0.0);
    for (size_t o = 0; o < n_out; ++o) {
      for (size_t i = 0; i < n_in; ++i) y[o] += static_cast<double>(w[o * n_in + i]) * x[i];
    }
    return y;
  }
  static void Norm(std::vector<double>& x, const std::vector<float>& w, size_t off, size_t n) {
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
    for (size_t i = 0; i < n; ++i) x[off + i] = x[off + i] * inv * w[i];
  }
  void Rope(std::vector<double>& x, int heads, int pos, bool local) const {
    const double b = local ? base_swa : base;
    const double scale = (rope_factor > 0 && !(local && arch == "gemma3")) ? 1.0 / rope_factor : 1.0;
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < D / 2; ++i) {
        const double theta = scale * pos * std::pow(b, -2.0 * i / D);
        double& a = x[h * D + i];
        double& c = x[h * D + i + D / 2];
        const double a0 = a, c0 = c;
        a = a0 * std::cos(theta) - c0 * std::sin(theta);
        c = a0 * std::sin(theta) + c0 * std::cos(theta);
      }
    }
  }

  // Logits of every position of `tokens` decoded from scratch.
  SequenceLogits Reference(const std::vector<TokenId>& tokens) const {
    const int n = static_cast<int>(tokens.size());
    std::vector<std::vector<double>> x(n, std::vector<double>(E));
    const std::vector<float>& embd = t.at("token_embd.weight");
    for (int i = 0; i < n; ++i) {
      for (int e = 0; e < E; ++e) x[i][e] = embd[static_cast<size_t>(tokens[i]) * E + e] * std::sqrt(double(E));
    }
    for (int l = 0; l < L; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const bool local = W > 0 && l % P < P - 1;
      std::vector<std::vector<double>> q(n), k(n), v(n);
      for (int i = 0; i < n; ++i) {
        std::vector<double> xn = x[i];
        Norm(xn, t.at(p + "attn_norm.weight"), 0, E);
        q[i] = Mul(p + "attn_q.weight", xn);
        k[i] = Mul(p + "attn_k.weight", xn);
        v[i] = Mul(p + "attn_v.weight", xn);
        if (qk_norm) {
          for (int h = 0; h < H; ++h) Norm(q[i], t.at(p + "attn_q_norm.weight"), h * D, D);
          for (int h = 0; h < HKV; ++h) Norm(k[i], t.at(p + "attn_k_norm.weight"), h * D, D);
        }
        Rope(q[i], H, i, local);
        Rope(k[i], HKV, i, local);
      }
      for (int i = 0; i < n; ++i) {
        std::vector<double> att(H * D, 0.0);
        for (int h = 0; h < H; ++h) {
          const int hk = h / (H / HKV);
          std::vector<double> s(n, -INFINITY);
          double mx = -INFINITY;
          for (int j = 0; j <= i; ++j) {
            if (local && i - j >= W) continue;  // a query at i sees i - W + 1 .. i
            double d = 0;
            for (int c = 0; c < D; ++c) d += q[i][h * D + c] * k[j][hk * D + c];
            d /= std::sqrt(double(D));
            if (attn_cap > 0) d = attn_cap * std::tanh(d / attn_cap);
            s[j] = d;
            mx = std::max(mx, d);
          }
          double sum = 0;
          for (int j = 0; j <= i; ++j) sum += std::isinf(s[j]) ? 0.0 : std::exp(s[j] - mx);
          for (int j = 0; j <= i; ++j) {
            if (std::isinf(s[j])) continue;
            const double pj = std::exp(s[j] - mx) / sum;
            for (int c = 0; c < D; ++c) att[h * D + c] += pj * v[j][hk * D + c];
          }
        }
        std::vector<double> o = Mul(p + "attn_output.weight", att);
        Norm(o, t.at(p + "post_attention_norm.weight"), 0, E);
        for (int e = 0; e < E; ++e) x[i][e] += o[e];
        std::vector<double> xn = x[i];
        Norm(xn, t.at(p + "ffn_norm.weight"), 0, E);
        std::vector<double> g = Mul(p + "ffn_gate.weight", xn), u = Mul(p + "ffn_up.weight", xn);
        for (int f = 0; f < F; ++f) {
          const double z = g[f];
          g[f] = 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z))) * u[f];
        }
        std::vector<double> d = Mul(p + "ffn_down.weight", g);
        Norm(d, t.at(p + "post_ffw_norm.weight"), 0, E);
        for (int e = 0; e < E; ++e) x[i][e] += d[e];
      }
    }
    SequenceLogits out{n, V, {}};
    for (int i = 0; i < n; ++i) {
      std::vector<double> xn = x[i];
      Norm(xn, t.at("output_norm.weight"), 0, E);
      std::vector<double> logits = Mul("token_embd.weight", xn);  // tied output
      for (double z : logits)
        out.values.push_back(static_cast<float>(final_cap > 0 ? final_cap * std::tanh(z / final_cap) : z));
    }
    return out;
  }
};

std::vector<TokenId> SynthTokens(int n, int vocab) {
  std::vector<TokenId> s(n);
  for (int i = 0; i < n; ++i) s[i] = static_cast<TokenId>((i * 17 + 3) % vocab);
  return s;
}

void ExpectMatchesReference(Synth& s, const std::string& what) {
  auto model = s.Build();
  ASSERT_NE(model, nullptr);
  SwaOptions swa;
  swa.rollback_slack = 2;  // rings of W + 1 rows: wrapping all the time
  auto b = SwaFamily(swa).create(model, BackendOptions{});
  ASSERT_TRUE(b.ok()) << b.status();
  const std::vector<TokenId> tokens = SynthTokens(29, s.V);
  const SequenceLogits ref = s.Reference(tokens);
  for (int32_t chunk : {0, 1, 3, 5}) {
    auto got = EvalSequence(**b, tokens, EvalMode{chunk});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectClose(*got, ref, 1e-4, what + " chunk " + std::to_string(chunk));
  }
}

TEST(SwaSyntheticTest, Gemma2WithBothSoftCapsMatchesAPlainImplementation) {
  Synth s;
  s.arch = "gemma2";
  s.attn_cap = 0.8;   // small enough that capping changes the scores
  s.final_cap = 1.5;  // and the logits
  ExpectMatchesReference(s, "gemma2");
}

TEST(SwaSyntheticTest, Gemma2DefaultsToCapsOf50And30) {
  Synth s;
  s.arch = "gemma2";
  s.attn_cap = 50;
  s.final_cap = 30;
  auto model_explicit = s.Build();
  Synth d;
  d.arch = "gemma2";  // no cap keys in the file
  auto model_default = d.Build();
  ASSERT_NE(model_explicit, nullptr);
  ASSERT_NE(model_default, nullptr);
  auto be = SwaFamily().create(model_explicit, BackendOptions{});
  auto bd = SwaFamily().create(model_default, BackendOptions{});
  ASSERT_TRUE(be.ok() && bd.ok());
  const std::vector<TokenId> tokens = SynthTokens(12, s.V);
  auto le = EvalSequence(**be, tokens, EvalMode{0});
  auto ld = EvalSequence(**bd, tokens, EvalMode{0});
  ASSERT_TRUE(le.ok() && ld.ok());
  EXPECT_EQ(le->values, ld->values);
}

TEST(SwaSyntheticTest, Gemma3WithRopeScalingTwoBasesAndFinalCapMatchesAPlainImplementation) {
  Synth s;
  s.arch = "gemma3";
  s.qk_norm = true;
  s.L = 5;
  s.P = 3;  // layers 0, 1, 3, 4 local; 2 global
  s.W = 3;
  s.base = 1e6;
  s.base_swa = 100;   // far from the global base: a swapped base shows
  s.rope_factor = 4;  // global layers only
  s.final_cap = 2.0;
  ExpectMatchesReference(s, "gemma3");
}

TEST(SwaSyntheticTest, Gemma3DefaultPatternIsFiveLocalLayersPerGlobalOne) {
  Synth s;
  s.arch = "gemma3";
  s.qk_norm = true;
  s.L = 7;  // layers 0-4 local, 5 global, 6 local
  s.P = 6;
  s.write_pattern = false;
  ExpectMatchesReference(s, "gemma3 default pattern");
}

// No sliding window: every layer global, and the memory is a plain
// truncatable cache with nothing that needs a checkpoint.
TEST(SwaSyntheticTest, Gemma3WithoutAWindowIsAllGlobalAndTruncatable) {
  Synth s;
  s.arch = "gemma3";
  s.qk_norm = true;
  s.W = 0;
  ExpectMatchesReference(s, "gemma3 without window");
  auto b = SwaFamily().create(s.Build(), BackendOptions{});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE((*b)->info().caps.truncatable);
  EXPECT_FALSE((*b)->info().caps.has_checkpoint_state);
  auto mem = *(*b)->NewSequence();
  const std::vector<TokenId> tokens = SynthTokens(20, s.V);
  Feed(**b, mem.get(), tokens, 0, 20);
  EXPECT_EQ(mem->caps().rollback_window, 20);
  EXPECT_TRUE(mem->Truncate(1).ok());
}

}  // namespace
}  // namespace cairn
