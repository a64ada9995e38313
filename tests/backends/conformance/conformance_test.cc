// The conformance suite every backend family runs: one row per model file
// (with its golden logits and tolerance). A family joins by adding a row to
// kRows below and registering itself in RegisterBuiltinBackends.
//
// What it checks, for any SequenceMemory semantics (full KV, SWA ring,
// recurrent state, hybrids):
//  - golden logits, and batch == step == chunk:N (N = 1, 3, 17) within tolerance;
//  - Truncate(p) then recomputing equals a fresh computation; a Truncate the
//    memory cannot do fails with FAILED_PRECONDITION and changes nothing;
//  - Capture/Restore (kFull into a fresh memory, kCheckpoint on the same
//    memory after Truncate) continue bit for bit identically;
//  - several sequences in one Forward equal each alone;
//  - every invalid Forward fails with the right code and changes nothing.
#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends/backend.h"
#include "backends/kernels/quant_dot.h"
#include "backends/register_builtin.h"
#include "gtest/gtest.h"
#include "tests/testing/shared_data.h"
#include "tools/eval_lib.h"

namespace cairn {
namespace {

struct Row {
  const char* model;   // relative to ../shared, or to the source tree ("tests/data/...")
  const char* logits;  // golden logits, likewise
  double tolerance;    // max |diff| / std(reference logits)
  // The backend's default path (8-bit activations for quantized weights)
  // instead of exact_activations. Its golden check uses `tolerance` and
  // `min_argmax` (fraction of positions); its comparisons of the backend
  // with itself (batch, step, chunks, truncate, restore) use
  // kFastSelfTolerance and require every argmax to agree but near ties.
  bool fast = false;
  double min_argmax = 1.0;
  // The golden check also feeds one token per Forward (step mode), not only
  // the whole sequence at once.
  bool golden_step = false;
  // On the fast path every product of this file has an integer kernel (no
  // F32 or F16 matrix, no MoE router), so a sequence's numbers do not depend on how
  // its tokens are grouped into Forward calls: the comparisons of the
  // backend with itself must agree bit for bit (where the CPU's kernels are
  // batch-invariant: see BatchInvariantKernels).
  bool batch_invariant = false;
};

// The kernels behind the fast path compute a row the same way whatever the
// call's shape (QuantDotKernel::batch_invariant; attention always does).
bool BatchInvariantKernels() {
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    const QuantDotKernel* k = FindQuantDot(type);
    if (k == nullptr || !k->batch_invariant) return false;
  }
  return true;
}

// For the fast rows that are not batch_invariant (a MoE router, or an
// AVX-512 CPU whose Q8_0/Q4_0 prompt kernel rounds differently from its
// decode tiles): now and then a rounding difference between batch shapes
// moves an activation across an 8-bit rounding boundary; that one step moves
// the logits of its position, and of later ones through K/V, by up to about
// 2% of std (llama256-Q4_0 before the kernels were batch-invariant: 0.0186 x
// std batch vs step; llama256-Q4_K_M 0.0502 between chunkings, 0.073 batch vs
// step in FastGoldenTest). The floor is the largest, with room.
constexpr double kFastSelfTolerance = 0.1;

// One row per model; other families append theirs.
const Row kRows[] = {
    {"golden/models/llama.gguf", "golden/logits/llama.bin", 1e-4},
    {"golden/models/llama-q8.gguf", "golden/logits/llama-q8.bin", 1e-4},
    {"golden/models/qwen3.gguf", "golden/logits/qwen3.bin", 1e-4},
    {"golden/models/llama256-Q4_K_M.gguf", "golden/logits/llama256-Q4_K_M.bin", 1e-4},
    {"models/stories260K.gguf", "golden/logits/stories260K.bin", 1e-4},
    // gemma3: llama.cpp evaluates GELU through an fp16 table (golden README).
    {"golden/models/gemma3.gguf", "golden/logits/gemma3.bin", 5e-3},
    {"golden/models/mamba2.gguf", "golden/logits/mamba2.bin", 1e-4},
    {"golden/models/mamba.gguf", "golden/logits/mamba.bin", 1e-4},
    {"golden/models/granitehybrid.gguf", "golden/logits/granitehybrid.bin", 1e-4},
    {"golden/models/qwen35.gguf", "golden/logits/qwen35.bin", 1e-4},
    {"golden/models/falcon-h1.gguf", "golden/logits/falcon-h1.bin", 1e-4},
    // Mixtures of experts.
    {"golden/models/qwen35moe.gguf", "golden/logits/qwen35moe.bin", 1e-4},
    {"golden/models/qwen35moe-Q8_0.gguf", "golden/logits/qwen35moe-Q8_0.bin", 1e-4},
    {"golden/models/granitehybrid-moe.gguf", "golden/logits/granitehybrid-moe.bin", 1e-4},
    {"golden/models/jamba.gguf", "golden/logits/jamba.bin", 1e-4},
    {"golden/models/nemotron_h.gguf", "golden/logits/nemotron_h.bin", 1e-4},
    {"golden/models/nemotron_h_moe.gguf", "golden/logits/nemotron_h_moe.bin", 1e-4},
    {"golden/models/lfm2.gguf", "golden/logits/lfm2.bin", 1e-4},
    {"golden/models/qwen3next.gguf", "golden/logits/qwen3next.bin", 1e-4},
    {"golden/models/gpt-oss.gguf", "golden/logits/gpt-oss.bin", 1e-4},
    {"tests/data/qwen3moe.gguf", "tests/data/qwen3moe.bin", 1e-4},
    // Attention layers of different head counts (per-layer arrays), checked
    // in batch and step mode; their logits cover the 16- and 64-token
    // sequences (tests/data/README.md).
    {"tests/data/deci-kv.gguf", "tests/data/deci-kv.bin", 1e-4, false, 1.0, true},
    {"tests/data/granitehybrid-kv.gguf", "tests/data/granitehybrid-kv.bin", 1e-4, false, 1.0, true},
    // The fast path on the quantized files: the golden README's 0.15 x std
    // for 8-bit activations; for the MoE file, whose 8-bit rounding flips
    // some top-2 expert choices (as llama.cpp's own quantized run does), a
    // bound on the agreement and a looser maximum (measured: 1.17 x std,
    // argmax 232/241; llama.cpp's own run: 0.90 x std, 96.7%).
    // llama-q8's tied output is F16 (an F32-activation product): not batch_invariant.
    {"golden/models/llama-q8.gguf", "golden/logits/llama-q8.bin", 0.15, true, 0.95},
    {"golden/models/llama256-Q4_0.gguf", "golden/logits/llama256-Q4_0.bin", 0.15, true, 0.95, false, true},
    {"golden/models/llama256-Q4_K_M.gguf", "golden/logits/llama256-Q4_K_M.bin", 0.15, true, 0.95, false, true},
    // A dense hybrid (Gated DeltaNet + gated attention) in Q8_0, on the fast
    // path only (tests/data/README.md; llama.cpp's batch and step logits of
    // it are bit-identical). Random weights through 4 layers of recurrent
    // state amplify the two 8-bit paths' rounding differences (llama.cpp's
    // activation scales are fp16, cairn's F32): measured 0.25 x std, argmax
    // 233/241; exact activations measure 0.45 against it.
    {"tests/data/qwen35-Q8_0.gguf", "tests/data/qwen35-Q8_0.bin", 0.3, true, 0.95, true, true},
    {"golden/models/qwen35moe-Q8_0.gguf", "golden/logits/qwen35moe-Q8_0.bin", 1.5, true, 0.93},
};

void PrintTo(const Row& r, std::ostream* os) {
  *os << r.model << (r.fast ? " fast" : "") << " (tol " << r.tolerance << ")";
}

std::string RowName(const ::testing::TestParamInfo<Row>& info) {
  std::string s = info.param.model;
  s = s.substr(s.rfind('/') + 1);
  s = s.substr(0, s.rfind('.'));
  for (char& c : s) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return info.param.fast ? s + "_fast" : s;
}

class ConformanceTest : public ::testing::TestWithParam<Row> {
 protected:
  void SetUp() override {
    CAIRN_REQUIRE_SHARED("golden/tokens.txt");
    ASSERT_TRUE(RegisterBuiltinBackends(registry_).ok());
    backend_ = MakeBackend(Options());
    ASSERT_NE(backend_, nullptr);
    auto seqs = ReadTokenFile(testing::SharedPath("golden/tokens.txt"));
    ASSERT_TRUE(seqs.ok()) << seqs.status();
    tokens_ = *seqs;
    ASSERT_GE(tokens_.size(), 3u);
    long_ = tokens_[2];  // 64 tokens
    ASSERT_GE(long_.size(), 40u);
  }

  BackendOptions Options() const {
    BackendOptions o;
    o.exact_activations = !GetParam().fast;
    return o;
  }

  std::unique_ptr<Backend> MakeBackend(const BackendOptions& options) {
    auto model = ModelFile::Open(testing::TestDataPath(GetParam().model));
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return nullptr;
    auto b = registry_.Create(std::shared_ptr<const ModelFile>(std::move(*model)), options);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? std::move(*b) : nullptr;
  }

  std::unique_ptr<SequenceMemory> NewSeq() {
    auto m = backend_->NewSequence();
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(*m) : nullptr;
  }

  // Feeds tokens[begin, end) as one run and returns the logits of every row.
  SequenceLogits Feed(SequenceMemory* mem, const std::vector<TokenId>& tokens, size_t begin, size_t end) {
    std::vector<int32_t> rows(end - begin);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int32_t>(i);
    SequenceRun run;
    run.memory = mem;
    run.start_pos = mem->next_pos();
    run.tokens = std::span<const TokenId>(tokens).subspan(begin, end - begin);
    run.logit_rows = rows;
    auto r = backend_->Forward(std::span<const SequenceRun>(&run, 1));
    EXPECT_TRUE(r.ok()) << r.status();
    SequenceLogits out;
    out.n_tokens = static_cast<int32_t>(end - begin);
    out.n_vocab = backend_->info().n_vocab;
    if (r.ok()) out.values = (*r)[0].values;
    return out;
  }

  void ExpectClose(const SequenceLogits& got, const SequenceLogits& ref, const std::string& what) {
    if (GetParam().batch_invariant && BatchInvariantKernels()) {
      ASSERT_EQ(got.n_tokens, ref.n_tokens) << what;
      EXPECT_TRUE(got.values == ref.values) << what << ": not bit for bit";
      return;
    }
    auto c = CompareLogits(got, ref);
    ASSERT_TRUE(c.ok()) << what << ": " << c.status();
    const double tolerance = GetParam().fast ? kFastSelfTolerance : GetParam().tolerance;
    EXPECT_LE(c->max_rel, tolerance) << what << ": max|diff| " << c->max_abs_diff << " std " << c->ref_std;
    // A near tie in the reference (the MoE file's expert choices flip under
    // 8-bit rounding) may go either way on another batch shape; on an AVX2
    // machine a restored continuation of qwen35moe-Q8_0 picks the other of two
    // tokens 0.0007 x std apart.
    EXPECT_EQ(c->argmax_agree + (GetParam().fast ? c->argmax_near_tie : 0), c->rows) << what;
  }

  static SequenceLogits Slice(const SequenceLogits& s, int32_t begin, int32_t end) {
    SequenceLogits out;
    out.n_tokens = end - begin;
    out.n_vocab = s.n_vocab;
    out.values.assign(s.values.begin() + static_cast<size_t>(begin) * s.n_vocab,
                      s.values.begin() + static_cast<size_t>(end) * s.n_vocab);
    return out;
  }

  BackendRegistry registry_;
  std::unique_ptr<Backend> backend_;
  std::vector<std::vector<TokenId>> tokens_;
  std::vector<TokenId> long_;
};

TEST_P(ConformanceTest, MatchesGoldenLogits) {
  CAIRN_REQUIRE_SHARED("golden/tokens.txt");
  auto ref = ReadLogitsFile(testing::TestDataPath(GetParam().logits));
  ASSERT_TRUE(ref.ok()) << ref.status();
  // The reference covers every sequence of tokens.txt or, for the small
  // files of tests/data, some of them: each matched by its length.
  std::vector<std::vector<TokenId>> seqs;
  for (const SequenceLogits& r : *ref) {
    auto it = std::find_if(tokens_.begin(), tokens_.end(), [&r](const std::vector<TokenId>& t) {
      return static_cast<int32_t>(t.size()) == r.n_tokens;
    });
    ASSERT_NE(it, tokens_.end()) << "no token sequence of " << r.n_tokens << " tokens";
    seqs.push_back(*it);
  }
  ASSERT_TRUE(ref->size() == tokens_.size() || std::string(GetParam().logits).starts_with("tests/data/"));
  for (const int32_t chunk : GetParam().golden_step ? std::vector<int32_t>{0, 1} : std::vector<int32_t>{0}) {
    auto got = EvalSequences(*backend_, seqs, EvalMode{chunk});
    ASSERT_TRUE(got.ok()) << got.status();
    auto c = CompareAll(*got, *ref);
    ASSERT_TRUE(c.ok()) << c.status();
    const char* mode = chunk == 0 ? "batch" : "step";
    EXPECT_LE(c->max_rel, GetParam().tolerance) << mode << ": max|diff| " << c->max_abs_diff << " std " << c->ref_std;
    EXPECT_GE(c->argmax_agree, GetParam().min_argmax * c->rows) << mode << ": " << c->argmax_agree << " of " << c->rows;
    RecordProperty(chunk == 0 ? "max_rel_vs_golden" : "max_rel_vs_golden_step", std::to_string(c->max_rel));
  }
}

TEST_P(ConformanceTest, BatchStepAndChunksAgree) {
  const std::vector<TokenId>& seq = tokens_[3].size() >= 100 ? tokens_[3] : long_;
  auto batch = EvalSequence(*backend_, seq, EvalMode{0});
  ASSERT_TRUE(batch.ok()) << batch.status();
  for (int32_t n : {1, 3, 17}) {
    auto chunked = EvalSequence(*backend_, seq, EvalMode{n});
    ASSERT_TRUE(chunked.ok()) << chunked.status();
    ExpectClose(*chunked, *batch, "chunk:" + std::to_string(n));
  }
}

TEST_P(ConformanceTest, TruncateThenRecomputeEqualsFresh) {
  const size_t n = long_.size();
  auto fresh = EvalSequence(*backend_, long_, EvalMode{0});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  for (Pos p : {Pos(0), Pos(1), Pos(n / 3), Pos(n - 5), Pos(n - 1), Pos(n)}) {
    SCOPED_TRACE("truncate to " + std::to_string(p));
    auto mem = NewSeq();
    ASSERT_NE(mem, nullptr);
    Feed(mem.get(), long_, 0, n);
    const MemoryCapabilities caps = mem->caps();
    const bool possible = p == 0 || caps.truncatable || static_cast<Pos>(n) - p <= caps.rollback_window;
    absl::Status s = mem->Truncate(p);
    if (!possible) {
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      EXPECT_EQ(mem->next_pos(), static_cast<Pos>(n)) << "a failed Truncate changed next_pos";
      continue;
    }
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(mem->next_pos(), p);
    if (p == static_cast<Pos>(n)) continue;
    SequenceLogits again = Feed(mem.get(), long_, p, n);
    ExpectClose(again, Slice(*fresh, p, n), "recomputed suffix");
  }
}

// The rollback window is exact for every memory: cutting back exactly
// caps().rollback_window positions succeeds and recomputes like a fresh
// sequence; one position more fails with FAILED_PRECONDITION and changes
// nothing. The sequence (golden sequences repeated to 640 positions) is long
// enough that SWA rings of the default size wrap.
TEST_P(ConformanceTest, TruncateJustInsideAndJustOutsideTheRollbackWindow) {
  const size_t n = std::min<size_t>(640, static_cast<size_t>(backend_->info().n_ctx_train));
  std::vector<TokenId> seq;
  while (seq.size() < n) {
    for (const auto& s : tokens_) {
      for (TokenId t : s) {
        if (seq.size() < n) seq.push_back(t);
      }
    }
  }
  auto fresh = EvalSequence(*backend_, seq, EvalMode{0});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  auto mem = NewSeq();
  ASSERT_NE(mem, nullptr);
  Feed(mem.get(), seq, 0, n - 10);  // a prompt, then a continuation
  Feed(mem.get(), seq, n - 10, n);
  const MemoryCapabilities caps = mem->caps();
  const Pos end = static_cast<Pos>(n);
  const Pos w = caps.rollback_window;
  ASSERT_GE(w, 0);
  ASSERT_LE(w, end);
  if (caps.truncatable) {
    EXPECT_EQ(w, end);
  }
  RecordProperty("rollback_window_after_640", std::to_string(w));
  if (w < end) {
    absl::Status s = mem->Truncate(end - w - 1);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_EQ(mem->next_pos(), end);
    EXPECT_EQ(mem->caps().rollback_window, w);
  }
  ASSERT_TRUE(mem->Truncate(end - w).ok());
  ASSERT_EQ(mem->next_pos(), end - w);
  if (w == 0) return;
  ExpectClose(Feed(mem.get(), seq, n - w, n), Slice(*fresh, end - w, end), "recomputed window");
}

TEST_P(ConformanceTest, TruncateRejectsPositionsOutsideTheSequence) {
  auto mem = NewSeq();
  Feed(mem.get(), long_, 0, 10);
  EXPECT_EQ(mem->Truncate(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(mem->Truncate(11).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(mem->next_pos(), 10);
  EXPECT_TRUE(mem->Truncate(10).ok());  // no-op
  EXPECT_EQ(mem->next_pos(), 10);
}

TEST_P(ConformanceTest, FullSnapshotRestoresIntoFreshMemoryBitForBit) {
  auto a = NewSeq();
  Feed(a.get(), long_, 0, 30);
  auto snap = a->Capture(SnapshotScope::kFull);
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->pos, 30);
  EXPECT_EQ(snap->bytes(), a->Bytes(SnapshotScope::kFull));
  SequenceLogits cont_a = Feed(a.get(), long_, 30, long_.size());

  auto b = NewSeq();
  Feed(b.get(), tokens_[1], 0, tokens_[1].size());  // unrelated content, replaced by Restore
  ASSERT_TRUE(b->Restore(*snap).ok());
  EXPECT_EQ(b->next_pos(), 30);
  SequenceLogits cont_b = Feed(b.get(), long_, 30, long_.size());
  EXPECT_EQ(cont_a.values, cont_b.values) << "restored memory does not continue bit for bit";
}

TEST_P(ConformanceTest, CheckpointRestoreAfterTruncateContinuesBitForBit) {
  auto mem = NewSeq();
  Feed(mem.get(), long_, 0, 25);
  auto cp = mem->Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_EQ(cp->pos, 25);
  EXPECT_EQ(cp->bytes(), mem->Bytes(SnapshotScope::kCheckpoint));
  SequenceLogits first = Feed(mem.get(), long_, 25, 40);
  // Diverge, then come back to the checkpoint.
  std::vector<TokenId> other(long_.rbegin(), long_.rend());
  Feed(mem.get(), other, 0, 10);
  ASSERT_TRUE(mem->Restore(*cp).ok());
  EXPECT_EQ(mem->next_pos(), 25);
  SequenceLogits second = Feed(mem.get(), long_, 25, 40);
  EXPECT_EQ(first.values, second.values) << "checkpoint restore does not continue bit for bit";
}

// What replaces truncate-anywhere for memories that cannot be cut back
// (recurrent state), and holds for every memory: Capture after k tokens,
// continue, Restore, continue again. The two continuations are bit for bit
// identical, and equal a fresh computation of the whole sequence within the
// golden tolerance (different batch shapes may round differently).
TEST_P(ConformanceTest, CaptureContinueRestoreContinueEqualsFresh) {
  const size_t n = long_.size();
  auto fresh = EvalSequence(*backend_, long_, EvalMode{0});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  for (size_t k : {size_t{1}, n / 3, n - 5}) {
    SCOPED_TRACE("capture at " + std::to_string(k));
    auto mem = NewSeq();
    ASSERT_NE(mem, nullptr);
    Feed(mem.get(), long_, 0, k);
    auto cp = mem->Capture(SnapshotScope::kCheckpoint);
    ASSERT_TRUE(cp.ok()) << cp.status();
    SequenceLogits first = Feed(mem.get(), long_, k, n);
    ASSERT_TRUE(mem->Restore(*cp).ok());
    ASSERT_EQ(mem->next_pos(), static_cast<Pos>(k));
    SequenceLogits second = Feed(mem.get(), long_, k, n);
    EXPECT_EQ(first.values, second.values) << "continuations before and after Restore differ";
    const SequenceLogits whole = Slice(*fresh, static_cast<int32_t>(k), static_cast<int32_t>(n));
    ExpectClose(second, whole, "restored continuation vs fresh whole sequence");
    auto c = CompareLogits(second, whole);
    if (c.ok()) {
      RecordProperty("max_rel_restore_vs_fresh_k" + std::to_string(k), std::to_string(c->max_rel));
    }
  }
}

TEST_P(ConformanceTest, RestoreRefusesForeignAndMalformedSnapshots) {
  auto mem = NewSeq();
  Feed(mem.get(), long_, 0, 12);
  auto full = mem->Capture(SnapshotScope::kFull);
  ASSERT_TRUE(full.ok());
  SequenceLogits expected;
  {
    auto ref = NewSeq();
    Feed(ref.get(), long_, 0, 12);
    expected = Feed(ref.get(), long_, 12, 20);
  }

  Snapshot foreign = *full;
  foreign.layout ^= 0x9e3779b97f4a7c15ULL;
  EXPECT_EQ(mem->Restore(foreign).code(), absl::StatusCode::kInvalidArgument);
  Snapshot truncated = *full;
  if (!truncated.data.empty()) {
    truncated.data.resize(truncated.data.size() / 2);
    EXPECT_EQ(mem->Restore(truncated).code(), absl::StatusCode::kInvalidArgument);
  }
  auto fresh = NewSeq();
  auto cp = mem->Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(cp.ok());
  absl::Status s = fresh->Restore(*cp);
  if (!fresh->caps().has_checkpoint_state) {
    // Nothing but the truncatable part: a checkpoint beyond what it holds fails.
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_EQ(fresh->next_pos(), 0);
  }
  // None of the failures changed `mem`.
  EXPECT_EQ(mem->next_pos(), 12);
  EXPECT_EQ(Feed(mem.get(), long_, 12, 20).values, expected.values);
}

TEST_P(ConformanceTest, SeveralSequencesInOneForwardEqualEachAlone) {
  const std::vector<TokenId>& s0 = long_;
  const std::vector<TokenId>& s1 = tokens_[1];
  std::vector<TokenId> s2(long_.begin() + 5, long_.begin() + 30);
  // Each alone: s0 in two pieces (prefill 20 then 20..40), s1 whole, s2 whole.
  auto a0 = NewSeq(), a1 = NewSeq(), a2 = NewSeq();
  Feed(a0.get(), s0, 0, 20);
  SequenceLogits alone0 = Feed(a0.get(), s0, 20, 40);
  SequenceLogits alone1 = Feed(a1.get(), s1, 0, s1.size());
  SequenceLogits alone2 = Feed(a2.get(), s2, 0, s2.size());

  auto b0 = NewSeq(), b1 = NewSeq(), b2 = NewSeq();
  Feed(b0.get(), s0, 0, 20);
  std::vector<int32_t> rows0(20), rows1(s1.size()), rows2(s2.size());
  for (size_t i = 0; i < rows0.size(); ++i) rows0[i] = static_cast<int32_t>(i);
  for (size_t i = 0; i < rows1.size(); ++i) rows1[i] = static_cast<int32_t>(i);
  for (size_t i = 0; i < rows2.size(); ++i) rows2[i] = static_cast<int32_t>(i);
  SequenceRun runs[3];
  runs[0] = SequenceRun{b0.get(), 20, std::span<const TokenId>(s0).subspan(20, 20), nullptr, rows0, {}};
  runs[1] = SequenceRun{b1.get(), 0, s1, nullptr, rows1, {}};
  runs[2] = SequenceRun{b2.get(), 0, s2, nullptr, rows2, {}};
  auto r = backend_->Forward(runs);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 3u);
  const SequenceLogits* alone[3] = {&alone0, &alone1, &alone2};
  for (int i = 0; i < 3; ++i) {
    SequenceLogits got;
    got.n_tokens = (*r)[i].n_rows;
    got.n_vocab = (*r)[i].n_vocab;
    got.values = (*r)[i].values;
    ExpectClose(got, *alone[i], "sequence " + std::to_string(i) + " in a batch of 3");
  }
  EXPECT_EQ(b0->next_pos(), 40);
  EXPECT_EQ(b1->next_pos(), static_cast<Pos>(s1.size()));
  EXPECT_EQ(b2->next_pos(), static_cast<Pos>(s2.size()));
}

TEST_P(ConformanceTest, LogitRowsSelectRows) {
  auto all_mem = NewSeq();
  SequenceLogits all = Feed(all_mem.get(), long_, 0, 16);
  auto mem = NewSeq();
  const int32_t rows[] = {0, 7, 15};
  SequenceRun run{mem.get(), 0, std::span<const TokenId>(long_).subspan(0, 16), nullptr, rows, {}};
  auto r = backend_->Forward(std::span<const SequenceRun>(&run, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ((*r)[0].n_rows, 3);
  for (int i = 0; i < 3; ++i) {
    auto got = (*r)[0].row(i);
    SequenceLogits g{1, all.n_vocab, std::vector<float>(got.begin(), got.end())};
    ExpectClose(g, Slice(all, rows[i], rows[i] + 1), "selected row " + std::to_string(rows[i]));
  }
  // No rows wanted is fine: the tokens are still absorbed.
  auto quiet = NewSeq();
  SequenceRun none{quiet.get(), 0, std::span<const TokenId>(long_).subspan(0, 5), nullptr, {}, {}};
  auto q = backend_->Forward(std::span<const SequenceRun>(&none, 1));
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ((*q)[0].n_rows, 0);
  EXPECT_EQ(quiet->next_pos(), 5);
}

TEST_P(ConformanceTest, InvalidForwardChangesNothing) {
  auto mem = NewSeq();
  auto other = NewSeq();
  Feed(mem.get(), long_, 0, 10);
  Feed(other.get(), long_, 0, 4);
  const int32_t n_vocab = backend_->info().n_vocab;
  const std::vector<TokenId> good = {long_[10], long_[11]};
  const std::vector<TokenId> bad_id = {long_[10], n_vocab};
  const std::vector<TokenId> negative = {-1};
  const int32_t rows01[] = {0, 1};
  const int32_t rows_oob[] = {2};
  const int32_t rows_desc[] = {1, 0};
  auto foreign_backend = MakeBackend(Options());
  ASSERT_NE(foreign_backend, nullptr);
  auto foreign_mem = foreign_backend->NewSequence();
  ASSERT_TRUE(foreign_mem.ok());
  std::vector<float> embd(static_cast<size_t>(backend_->info().n_embd) * 2, 0.5f);
  EmbeddingChunk chunk{embd.data(), 2, 1};

  struct Case {
    const char* what;
    std::vector<SequenceRun> runs;
    absl::StatusCode code;
  };
  const SequenceRun ok_other{other.get(), 4, good, nullptr, rows01, {}};
  std::vector<Case> cases = {
      {"token id == n_vocab",
       {ok_other, {mem.get(), 10, bad_id, nullptr, rows01, {}}},
       absl::StatusCode::kInvalidArgument},
      {"negative token id", {ok_other, {mem.get(), 10, negative, nullptr, {}, {}}}, absl::StatusCode::kInvalidArgument},
      {"start_pos behind", {ok_other, {mem.get(), 9, good, nullptr, rows01, {}}}, absl::StatusCode::kInvalidArgument},
      {"start_pos ahead", {ok_other, {mem.get(), 11, good, nullptr, rows01, {}}}, absl::StatusCode::kInvalidArgument},
      {"empty run", {ok_other, {mem.get(), 10, {}, nullptr, {}, {}}}, absl::StatusCode::kInvalidArgument},
      {"null memory", {ok_other, {nullptr, 0, good, nullptr, {}, {}}}, absl::StatusCode::kInvalidArgument},
      {"foreign memory",
       {ok_other, {foreign_mem->get(), 0, good, nullptr, {}, {}}},
       absl::StatusCode::kInvalidArgument},
      {"duplicate memory", {ok_other, {other.get(), 4, good, nullptr, {}, {}}}, absl::StatusCode::kInvalidArgument},
      {"logit row out of range",
       {ok_other, {mem.get(), 10, good, nullptr, rows_oob, {}}},
       absl::StatusCode::kInvalidArgument},
      {"logit rows descending",
       {ok_other, {mem.get(), 10, good, nullptr, rows_desc, {}}},
       absl::StatusCode::kInvalidArgument},
  };
  SequenceRun snap_oob{mem.get(), 10, good, nullptr, rows01, {}};
  snap_oob.snapshot_rows = rows_oob;
  SequenceRun snap_desc{mem.get(), 10, good, nullptr, rows01, {}};
  snap_desc.snapshot_rows = rows_desc;
  cases.push_back({"snapshot row out of range", {ok_other, snap_oob}, absl::StatusCode::kInvalidArgument});
  cases.push_back({"snapshot rows descending", {ok_other, snap_desc}, absl::StatusCode::kInvalidArgument});
  if (!backend_->info().snapshots_within_run) {
    SequenceRun snap{mem.get(), 10, good, nullptr, rows01, {}};
    snap.snapshot_rows = rows01;
    cases.push_back({"snapshot rows to a backend without them", {ok_other, snap}, absl::StatusCode::kInvalidArgument});
  }
  if (!backend_->info().accepts_embeddings) {
    cases.push_back({"chunk to a text-only backend",
                     {ok_other, {mem.get(), 10, {}, &chunk, {}, {}}},
                     absl::StatusCode::kInvalidArgument});
  }
  for (const Case& c : cases) {
    auto r = backend_->Forward(c.runs);
    EXPECT_EQ(r.status().code(), c.code) << c.what << ": " << r.status();
    EXPECT_EQ(mem->next_pos(), 10) << c.what;
    EXPECT_EQ(other->next_pos(), 4) << c.what;
  }
  // Both memories still continue exactly as never-failed ones do.
  auto ref_mem = NewSeq();
  auto ref_other = NewSeq();
  Feed(ref_mem.get(), long_, 0, 10);
  Feed(ref_other.get(), long_, 0, 4);
  std::vector<TokenId> cont(long_.begin(), long_.begin() + 20);
  EXPECT_EQ(Feed(mem.get(), cont, 10, 20).values, Feed(ref_mem.get(), cont, 10, 20).values);
  std::vector<TokenId> cont_other = {good[0], good[1], long_[3]};
  EXPECT_EQ(Feed(other.get(), cont_other, 0, 3).values, Feed(ref_other.get(), cont_other, 0, 3).values);
}

// Snapshots taken inside one run (SequenceRun::snapshot_rows) are the
// checkpoints a run ending at those rows would give. Taking them does not
// perturb the run (same logits and final state bit for bit, and a snapshot
// at the last row equals Capture after it); restoring one continues as a
// sequence that ran only up to that row, within the golden tolerance (runs
// of other lengths may round differently in the matrix products). The rows
// straddle the recurrent family's 512-row micro-batches.
TEST_P(ConformanceTest, SnapshotRowsEqualCapturesAfterShorterRuns) {
  if (!backend_->info().snapshots_within_run)
    GTEST_SKIP() << "no snapshots inside a run (checked in InvalidForwardChangesNothing)";
  const size_t n = std::min<size_t>(600, static_cast<size_t>(backend_->info().n_ctx_train) - 16);
  std::vector<TokenId> seq;
  while (seq.size() < n + 12) seq.insert(seq.end(), long_.begin(), long_.end());
  std::vector<int32_t> rows = {9, 31, 300, 511, 520, static_cast<int32_t>(n) - 1};
  rows.erase(std::remove_if(rows.begin(), rows.end(), [&](int32_t r) { return r >= static_cast<int32_t>(n) - 1; }),
             rows.end());
  rows.push_back(static_cast<int32_t>(n) - 1);
  const int32_t last_row[] = {static_cast<int32_t>(n) - 1};
  auto whole = NewSeq();
  SequenceRun run{whole.get(), 0, std::span<const TokenId>(seq).first(n), nullptr, last_row, rows};
  auto out = backend_->Forward(std::span<const SequenceRun>(&run, 1));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].snapshots.size(), rows.size());
  ASSERT_EQ(whole->next_pos(), static_cast<Pos>(n));

  auto plain = NewSeq();
  SequenceRun plain_run{plain.get(), 0, run.tokens, nullptr, last_row, {}};
  auto plain_out = backend_->Forward(std::span<const SequenceRun>(&plain_run, 1));
  ASSERT_TRUE(plain_out.ok()) << plain_out.status();
  EXPECT_EQ((*out)[0].values, (*plain_out)[0].values) << "snapshot rows changed the run's logits";
  auto end_cp = plain->Capture(SnapshotScope::kCheckpoint);
  ASSERT_TRUE(end_cp.ok()) << end_cp.status();
  EXPECT_TRUE((*out)[0].snapshots.back().data == end_cp->data) << "snapshot at the last row differs from Capture";
  EXPECT_EQ((*out)[0].snapshots.back().pos, static_cast<Pos>(n));

  // Newest first: after each continuation `whole` still holds the tokens of
  // every earlier snapshot's prefix (a hybrid's checkpoint needs them).
  for (size_t k = rows.size(); k-- > 0;) {
    const Pos p = rows[k] + 1;
    SCOPED_TRACE("snapshot after row " + std::to_string(rows[k]));
    const Snapshot& snap = (*out)[0].snapshots[k];
    auto shorter = NewSeq();
    Feed(shorter.get(), seq, 0, static_cast<size_t>(p));
    auto cp = shorter->Capture(SnapshotScope::kCheckpoint);
    ASSERT_TRUE(cp.ok()) << cp.status();
    EXPECT_EQ(snap.pos, p);
    EXPECT_EQ(snap.scope, SnapshotScope::kCheckpoint);
    EXPECT_EQ(snap.layout, cp->layout);
    EXPECT_EQ(snap.bytes(), cp->bytes());
    ASSERT_TRUE(whole->Restore(snap).ok());
    ASSERT_EQ(whole->next_pos(), p);
    ExpectClose(Feed(whole.get(), seq, p, p + 12), Feed(shorter.get(), seq, p, p + 12),
                "continuation from the in-run snapshot vs from a run ending there");
  }
}

TEST_P(ConformanceTest, BeyondContextIsResourceExhaustedAndChangesNothing) {
  BackendOptions small = Options();
  small.max_context = 16;
  auto b = MakeBackend(small);
  ASSERT_NE(b, nullptr);
  auto mem = b->NewSequence();
  ASSERT_TRUE(mem.ok());
  SequenceRun first{mem->get(), 0, std::span<const TokenId>(long_).subspan(0, 10), nullptr, {}, {}};
  ASSERT_TRUE(b->Forward(std::span<const SequenceRun>(&first, 1)).ok());
  SequenceRun over{mem->get(), 10, std::span<const TokenId>(long_).subspan(10, 7), nullptr, {}, {}};
  auto r = b->Forward(std::span<const SequenceRun>(&over, 1));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_EQ((*mem)->next_pos(), 10);
  SequenceRun fits{mem->get(), 10, std::span<const TokenId>(long_).subspan(10, 6), nullptr, {}, {}};
  EXPECT_TRUE(b->Forward(std::span<const SequenceRun>(&fits, 1)).ok());
  EXPECT_EQ((*mem)->next_pos(), 16);
}

TEST_P(ConformanceTest, ModelInfoDescribesTheModel) {
  const ModelInfo& info = backend_->info();
  auto arch = ModelFile::Open(testing::TestDataPath(GetParam().model));
  ASSERT_TRUE(arch.ok());
  EXPECT_EQ(info.arch, *(*arch)->Architecture());
  EXPECT_EQ(info.family, *registry_.FamilyForArch(info.arch));
  EXPECT_GT(info.n_vocab, 0);
  EXPECT_GT(info.n_embd, 0);
  EXPECT_GT(info.n_ctx_train, 0);
  EXPECT_GT(info.weight_bytes, 0u);
  auto mem = NewSeq();
  EXPECT_EQ(mem->next_pos(), 0);
  EXPECT_EQ(mem->caps().truncatable, info.caps.truncatable);
  EXPECT_EQ(mem->caps().has_checkpoint_state, info.caps.has_checkpoint_state);
}

INSTANTIATE_TEST_SUITE_P(Backends, ConformanceTest, ::testing::ValuesIn(kRows), RowName);

}  // namespace
}  // namespace cairn
