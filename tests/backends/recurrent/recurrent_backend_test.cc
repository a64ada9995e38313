// The recurrent family against llama.cpp's golden logits, and its memory's
// contract: exact capture/restore, truncation rules, failures without damage.
#include "backends/recurrent/recurrent_backend.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "backends/memory/recurrent_memory.h"
#include "gtest/gtest.h"
#include "tests/testing/shared_data.h"

namespace cairn {
namespace {

using ::cairn::testing::SharedPath;

// The layout fingerprint a backend's snapshots carry.
uint64_t SnapshotLayout(Backend& b) { return (*(*b.NewSequence())->Capture(SnapshotScope::kCheckpoint)).layout; }

struct GoldenSeq {
  int32_t n_tokens = 0;
  int32_t n_vocab = 0;
  std::vector<float> logits;
};

std::vector<std::vector<TokenId>> ReadTokens(const std::string& path) {
  std::vector<std::vector<TokenId>> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::vector<TokenId> seq;
    TokenId id;
    while (ss >> id) seq.push_back(id);
    if (!seq.empty()) out.push_back(seq);
  }
  return out;
}

std::vector<GoldenSeq> ReadLogits(const std::string& path) {
  std::vector<GoldenSeq> out;
  std::ifstream in(path, std::ios::binary);
  GoldenSeq s;
  while (in.read(reinterpret_cast<char*>(&s.n_tokens), 4) && in.read(reinterpret_cast<char*>(&s.n_vocab), 4)) {
    s.logits.resize(static_cast<size_t>(s.n_tokens) * s.n_vocab);
    in.read(reinterpret_cast<char*>(s.logits.data()), static_cast<std::streamsize>(s.logits.size() * 4));
    out.push_back(s);
  }
  return out;
}

std::unique_ptr<Backend> Load(const std::string& name, int n_threads = 2) {
  absl::StatusOr<std::unique_ptr<ModelFile>> model = ModelFile::Open(SharedPath("golden/models/" + name + ".gguf"));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  BackendOptions options;
  options.n_threads = n_threads;
  absl::StatusOr<std::unique_ptr<Backend>> b =
      RecurrentFamily().create(std::shared_ptr<const ModelFile>(std::move(*model)), options);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}

// Runs `tokens` through `memory` in pieces of `chunk` tokens (0 = one
// piece), returning the logits of every token.
std::vector<float> RunTokens(Backend& b, SequenceMemory& memory, std::span<const TokenId> tokens, size_t chunk = 0) {
  std::vector<float> all;
  if (chunk == 0) chunk = tokens.size();
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    const size_t n = std::min(chunk, tokens.size() - i);
    std::vector<int32_t> rows(n);
    std::iota(rows.begin(), rows.end(), 0);
    SequenceRun run;
    run.memory = &memory;
    run.start_pos = memory.next_pos();
    run.tokens = tokens.subspan(i, n);
    run.logit_rows = rows;
    absl::StatusOr<std::vector<RunLogits>> out = b.Forward(std::span<const SequenceRun>(&run, 1));
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    all.insert(all.end(), (*out)[0].values.begin(), (*out)[0].values.end());
  }
  return all;
}

struct Deviation {
  double max_rel = 0;  // max |diff| / std(reference)
  int argmax_mismatches = 0;
};

Deviation Compare(const std::vector<float>& got, const std::vector<float>& ref, int32_t n_vocab) {
  Deviation d;
  if (got.size() != ref.size()) {
    d.max_rel = INFINITY;
    return d;
  }
  double sum = 0, sum2 = 0;
  for (float v : ref) {
    sum += v;
    sum2 += static_cast<double>(v) * v;
  }
  const double mean = sum / ref.size();
  const double std = std::sqrt(sum2 / ref.size() - mean * mean);
  double max_abs = 0;
  for (size_t i = 0; i < ref.size(); ++i) max_abs = std::max(max_abs, std::fabs(static_cast<double>(got[i]) - ref[i]));
  d.max_rel = max_abs / std;
  for (size_t r = 0; r < ref.size() / n_vocab; ++r) {
    const float* g = got.data() + r * n_vocab;
    const float* f = ref.data() + r * n_vocab;
    if (std::max_element(g, g + n_vocab) - g != std::max_element(f, f + n_vocab) - f) ++d.argmax_mismatches;
  }
  return d;
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

// Every sequence of tokens.txt, in one batch, token by token and in chunks
// of 3 and 17, against llama.cpp's logits.
TEST_P(GoldenTest, MatchesReferenceLogits) {
  const std::string name = GetParam();
  CAIRN_REQUIRE_SHARED("golden/models/" + name + ".gguf");
  std::unique_ptr<Backend> b = Load(name);
  ASSERT_NE(b, nullptr);
  const auto tokens = ReadTokens(SharedPath("golden/tokens.txt"));
  const auto golden = ReadLogits(SharedPath("golden/logits/" + name + ".bin"));
  ASSERT_EQ(tokens.size(), golden.size());
  for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{17}}) {
    double worst = 0;
    for (size_t s = 0; s < tokens.size(); ++s) {
      ASSERT_EQ(golden[s].n_tokens, static_cast<int32_t>(tokens[s].size()));
      ASSERT_EQ(golden[s].n_vocab, b->info().n_vocab);
      auto memory = b->NewSequence();
      ASSERT_TRUE(memory.ok());
      const std::vector<float> got = RunTokens(*b, **memory, tokens[s], chunk);
      const Deviation d = Compare(got, golden[s].logits, golden[s].n_vocab);
      EXPECT_LE(d.max_rel, 1e-4) << name << " sequence " << s << " chunk " << chunk;
      EXPECT_EQ(d.argmax_mismatches, 0) << name << " sequence " << s << " chunk " << chunk;
      worst = std::max(worst, d.max_rel);
      EXPECT_EQ((*memory)->next_pos(), static_cast<Pos>(tokens[s].size()));
    }
    std::printf("[golden] %s chunk=%zu max|diff|/std = %.3g\n", name.c_str(), chunk, worst);
  }
}

// Capture after k tokens, continue, restore, continue again: the two
// continuations are bit-identical, and equal to a fresh computation.
TEST_P(GoldenTest, CaptureRestoreContinuesExactly) {
  const std::string name = GetParam();
  CAIRN_REQUIRE_SHARED("golden/models/" + name + ".gguf");
  std::unique_ptr<Backend> b = Load(name);
  ASSERT_NE(b, nullptr);
  const auto tokens = ReadTokens(SharedPath("golden/tokens.txt"));
  const std::vector<TokenId>& seq = tokens.back();
  const std::span<const TokenId> all(seq);
  for (SnapshotScope scope : {SnapshotScope::kCheckpoint, SnapshotScope::kFull}) {
    for (size_t k : {size_t{1}, size_t{37}, size_t{100}}) {
      auto memory = b->NewSequence();
      ASSERT_TRUE(memory.ok());
      SequenceMemory& m = **memory;
      RunTokens(*b, m, all.first(k));
      absl::StatusOr<Snapshot> snap = m.Capture(scope);
      ASSERT_TRUE(snap.ok()) << snap.status();
      EXPECT_EQ(snap->pos, static_cast<Pos>(k));
      EXPECT_EQ(snap->bytes(), m.Bytes(scope));
      const std::vector<float> first = RunTokens(*b, m, all.subspan(k));
      ASSERT_TRUE(m.Restore(*snap).ok());
      EXPECT_EQ(m.next_pos(), static_cast<Pos>(k));
      const std::vector<float> second = RunTokens(*b, m, all.subspan(k));
      ASSERT_EQ(first.size(), second.size());
      EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0)
          << "continuations after restore differ (k=" << k << ")";

      // Fresh, the same split: bit for bit.
      auto fresh = b->NewSequence();
      ASSERT_TRUE(fresh.ok());
      RunTokens(*b, **fresh, all.first(k));
      const std::vector<float> fresh_rest = RunTokens(*b, **fresh, all.subspan(k));
      EXPECT_EQ(std::memcmp(first.data(), fresh_rest.data(), first.size() * sizeof(float)), 0);

      // Fresh, the whole sequence in one batch: different GEMM shapes, so
      // equal within the golden tolerance; report how close.
      auto whole = b->NewSequence();
      ASSERT_TRUE(whole.ok());
      std::vector<float> full = RunTokens(*b, **whole, all);
      std::vector<float> tail(full.begin() + static_cast<int64_t>(k) * b->info().n_vocab, full.end());
      const Deviation d = Compare(second, tail, b->info().n_vocab);
      EXPECT_LE(d.max_rel, 1e-5);
      EXPECT_EQ(d.argmax_mismatches, 0);
      std::printf("[restore] %s scope=%s k=%zu restored-vs-whole max|diff|/std = %.3g (%s)\n", name.c_str(),
                  ScopeName(scope), k, d.max_rel,
                  std::memcmp(second.data(), tail.data(), tail.size() * 4) == 0 ? "bit-identical" : "not bitwise");
    }
  }
}

// Several sequences in one Forward give the logits of each alone.
TEST_P(GoldenTest, BatchOfSequencesEqualsEachAlone) {
  const std::string name = GetParam();
  CAIRN_REQUIRE_SHARED("golden/models/" + name + ".gguf");
  std::unique_ptr<Backend> b = Load(name);
  ASSERT_NE(b, nullptr);
  const auto tokens = ReadTokens(SharedPath("golden/tokens.txt"));
  const int32_t n_vocab = b->info().n_vocab;
  std::vector<std::unique_ptr<SequenceMemory>> memories;
  std::vector<std::vector<int32_t>> rows(tokens.size());
  std::vector<SequenceRun> batch;
  for (size_t s = 0; s < tokens.size(); ++s) {
    memories.push_back(*b->NewSequence());
    rows[s].resize(tokens[s].size());
    std::iota(rows[s].begin(), rows[s].end(), 0);
  }
  for (size_t s = 0; s < tokens.size(); ++s) {
    SequenceRun run;
    run.memory = memories[s].get();
    run.start_pos = 0;
    run.tokens = tokens[s];
    run.logit_rows = rows[s];
    batch.push_back(run);
  }
  absl::StatusOr<std::vector<RunLogits>> out = b->Forward(batch);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), tokens.size());
  for (size_t s = 0; s < tokens.size(); ++s) {
    auto alone = b->NewSequence();
    const std::vector<float> ref = RunTokens(*b, **alone, tokens[s]);
    const Deviation d = Compare((*out)[s].values, ref, n_vocab);
    EXPECT_LE(d.max_rel, 1e-5) << "sequence " << s;
    EXPECT_EQ(d.argmax_mismatches, 0);
    // The states agree too: continuing both with one token gives the same.
    const TokenId next[] = {5};
    const std::vector<float> a = RunTokens(*b, *memories[s], next);
    const std::vector<float> c = RunTokens(*b, **alone, next);
    EXPECT_LE(Compare(a, c, n_vocab).max_rel, 1e-5);
  }
}

// Runs longer than a micro-batch (512 rows) continue across micro-batches
// exactly: one 700-token run equals runs of 512 then 188, bit for bit, and a
// batch whose runs straddle the boundary equals each run alone.
TEST_P(GoldenTest, LongRunsSpanMicroBatches) {
  const std::string name = GetParam();
  CAIRN_REQUIRE_SHARED("golden/models/" + name + ".gguf");
  std::unique_ptr<Backend> b = Load(name);
  ASSERT_NE(b, nullptr);
  const int32_t n_vocab = b->info().n_vocab;
  std::vector<TokenId> long_seq(700);
  for (size_t i = 0; i < long_seq.size(); ++i) long_seq[i] = static_cast<TokenId>((i * 37 + 11) % n_vocab);
  const std::span<const TokenId> all(long_seq);

  auto whole = *b->NewSequence();
  const std::vector<float> one_run = RunTokens(*b, *whole, all);
  auto split = *b->NewSequence();
  std::vector<float> two_runs = RunTokens(*b, *split, all.first(512));
  const std::vector<float> rest = RunTokens(*b, *split, all.subspan(512));
  two_runs.insert(two_runs.end(), rest.begin(), rest.end());
  EXPECT_EQ(one_run, two_runs);
  EXPECT_EQ(whole->Capture(SnapshotScope::kFull)->data, split->Capture(SnapshotScope::kFull)->data);

  // Two runs in one call: 300 tokens, then 700 with sparse logit rows on
  // both sides of the boundary the first run pushes to row 212.
  auto m_a = *b->NewSequence();
  auto m_b = *b->NewSequence();
  const std::vector<int32_t> rows_a = {0, 299};
  const std::vector<int32_t> rows_b = {0, 211, 212, 213, 699};
  SequenceRun runs[2] = {{m_a.get(), 0, all.first(300), nullptr, rows_a, {}}, {m_b.get(), 0, all, nullptr, rows_b, {}}};
  auto out = b->Forward(runs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[1].n_rows, 5);
  auto alone_a = *b->NewSequence();
  const std::vector<float> ref_a = RunTokens(*b, *alone_a, all.first(300));
  for (size_t i = 0; i < rows_a.size(); ++i) {
    const std::vector<float> ref(ref_a.begin() + rows_a[i] * n_vocab, ref_a.begin() + (rows_a[i] + 1) * n_vocab);
    const auto got = (*out)[0].row(static_cast<int32_t>(i));
    EXPECT_LE(Compare(std::vector<float>(got.begin(), got.end()), ref, n_vocab).max_rel, 1e-5);
  }
  for (size_t i = 0; i < rows_b.size(); ++i) {
    const std::vector<float> ref(one_run.begin() + rows_b[i] * n_vocab, one_run.begin() + (rows_b[i] + 1) * n_vocab);
    const auto got = (*out)[1].row(static_cast<int32_t>(i));
    const Deviation d = Compare(std::vector<float>(got.begin(), got.end()), ref, n_vocab);
    EXPECT_LE(d.max_rel, 1e-5) << "row " << rows_b[i];
    EXPECT_EQ(d.argmax_mismatches, 0);
  }
  EXPECT_EQ(m_b->next_pos(), 700);
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenTest, ::testing::Values("mamba2", "mamba"));

class MemoryContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_REQUIRE_SHARED("golden/models/mamba2.gguf");
    backend_ = Load("mamba2");
    ASSERT_NE(backend_, nullptr);
  }
  std::unique_ptr<Backend> backend_;
};

TEST_F(MemoryContractTest, CapabilitiesAndBytesFollowTheArchitecture) {
  auto m = backend_->NewSequence();
  ASSERT_TRUE(m.ok());
  const MemoryCapabilities caps = (*m)->caps();
  EXPECT_FALSE(caps.truncatable);
  EXPECT_EQ(caps.rollback_window, 0);
  EXPECT_TRUE(caps.has_checkpoint_state);
  EXPECT_FALSE(backend_->info().caps.truncatable);
  EXPECT_TRUE(backend_->info().caps.has_checkpoint_state);
  EXPECT_EQ(backend_->info().family, "recurrent");
  EXPECT_EQ(backend_->info().arch, "mamba2");
  // mamba2.gguf: 3 layers, d_conv 4, d_inner 128, 2 groups of d_state 16:
  // per layer (4 - 1) * (128 + 2 * 2 * 16) conv floats + 16 * 128 SSM floats.
  const size_t expected = 3 * ((4 - 1) * (128 + 2 * 2 * 16) + 16 * 128) * sizeof(float);
  EXPECT_EQ((*m)->Bytes(SnapshotScope::kCheckpoint), expected);
  EXPECT_EQ((*m)->Bytes(SnapshotScope::kFull), expected);
}

TEST_F(MemoryContractTest, TruncateRules) {
  auto m = *backend_->NewSequence();
  const TokenId toks[] = {1, 100, 200, 300, 400};
  RunTokens(*backend_, *m, toks);
  const Snapshot before = *m->Capture(SnapshotScope::kFull);
  EXPECT_TRUE(m->Truncate(5).ok());  // no-op
  EXPECT_EQ(m->next_pos(), 5);
  EXPECT_EQ(m->Truncate(3).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m->Truncate(6).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->Truncate(-1).code(), absl::StatusCode::kInvalidArgument);
  const Snapshot after = *m->Capture(SnapshotScope::kFull);
  EXPECT_EQ(after.pos, 5);
  EXPECT_EQ(after.data, before.data) << "a failed truncate changed the state";
  ASSERT_TRUE(m->Truncate(0).ok());
  EXPECT_EQ(m->next_pos(), 0);
  // After a reset the sequence computes as a fresh one.
  auto fresh = *backend_->NewSequence();
  EXPECT_EQ(m->Capture(SnapshotScope::kFull)->data, fresh->Capture(SnapshotScope::kFull)->data);
  const std::vector<float> a = RunTokens(*backend_, *m, toks);
  const std::vector<float> b = RunTokens(*backend_, *fresh, toks);
  EXPECT_EQ(a, b);
}

TEST_F(MemoryContractTest, RestoreRefusesForeignAndMalformedSnapshots) {
  auto m = *backend_->NewSequence();
  const TokenId toks[] = {1, 7, 9};
  RunTokens(*backend_, *m, toks);
  const Snapshot good = *m->Capture(SnapshotScope::kCheckpoint);

  Snapshot foreign = good;
  foreign.layout ^= 1;
  EXPECT_EQ(m->Restore(foreign).code(), absl::StatusCode::kInvalidArgument);
  Snapshot short_data = good;
  short_data.data.pop_back();
  EXPECT_EQ(m->Restore(short_data).code(), absl::StatusCode::kInvalidArgument);
  Snapshot negative = good;
  negative.pos = -2;
  EXPECT_EQ(m->Restore(negative).code(), absl::StatusCode::kInvalidArgument);

  // A snapshot of the other recurrent model has another layout.
  std::unique_ptr<Backend> other = Load("mamba");
  ASSERT_NE(other, nullptr);
  auto om = *other->NewSequence();
  RunTokens(*other, *om, toks);
  EXPECT_NE(SnapshotLayout(*other), SnapshotLayout(*backend_));
  EXPECT_EQ(m->Restore(*om->Capture(SnapshotScope::kFull)).code(), absl::StatusCode::kInvalidArgument);

  // None of the failures changed the memory.
  EXPECT_EQ(m->next_pos(), 3);
  EXPECT_EQ(m->Capture(SnapshotScope::kCheckpoint)->data, good.data);
}

TEST_F(MemoryContractTest, LayoutIsStableAcrossLoads) {
  std::unique_ptr<Backend> again = Load("mamba2", 1);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(SnapshotLayout(*again), SnapshotLayout(*backend_));
  // A snapshot moves between two backends of the same model (another replica).
  auto m = *backend_->NewSequence();
  const TokenId toks[] = {1, 42, 43, 44};
  const std::vector<float> ref = RunTokens(*backend_, *m, toks);
  auto m2 = *again->NewSequence();
  ASSERT_TRUE(m2->Restore(*m->Capture(SnapshotScope::kFull)).ok());
  const TokenId next[] = {45};
  EXPECT_EQ(RunTokens(*backend_, *m, next), RunTokens(*again, *m2, next));
}

TEST_F(MemoryContractTest, InvalidForwardChangesNothing) {
  auto m = *backend_->NewSequence();
  auto other = *backend_->NewSequence();
  const TokenId toks[] = {1, 2, 3};
  RunTokens(*backend_, *m, toks);
  const Snapshot before = *m->Capture(SnapshotScope::kFull);
  const int32_t row0[] = {0};
  const TokenId good[] = {4};
  const TokenId bad_id[] = {4, 512};
  const int32_t bad_rows[] = {0, 0};
  const int32_t out_of_range[] = {1};
  auto expect_fail = [&](std::vector<SequenceRun> batch, absl::StatusCode code, const char* what) {
    absl::StatusOr<std::vector<RunLogits>> out = backend_->Forward(batch);
    EXPECT_EQ(out.status().code(), code) << what << ": " << out.status();
    EXPECT_EQ(m->next_pos(), 3) << what;
    EXPECT_EQ(m->Capture(SnapshotScope::kFull)->data, before.data) << what;
    EXPECT_EQ(other->next_pos(), 0) << what;
  };
  // Each batch pairs a valid run on `other` (first) with a faulty run on `m`,
  // so validation must finish before the valid run is absorbed.
  SequenceRun ok_run{other.get(), 0, good, nullptr, row0, {}};
  expect_fail({ok_run, SequenceRun{m.get(), 2, good, nullptr, row0, {}}}, absl::StatusCode::kInvalidArgument,
              "wrong start_pos");
  expect_fail({ok_run, SequenceRun{m.get(), 3, bad_id, nullptr, row0, {}}}, absl::StatusCode::kInvalidArgument,
              "token out of range");
  expect_fail({ok_run, SequenceRun{m.get(), 3, {}, nullptr, {}, {}}}, absl::StatusCode::kInvalidArgument, "empty run");
  expect_fail({ok_run, SequenceRun{m.get(), 3, good, nullptr, bad_rows, {}}}, absl::StatusCode::kInvalidArgument,
              "rows not ascending");
  expect_fail({ok_run, SequenceRun{m.get(), 3, good, nullptr, out_of_range, {}}}, absl::StatusCode::kInvalidArgument,
              "row out of range");
  expect_fail(
      {ok_run, SequenceRun{m.get(), 3, good, nullptr, row0, {}}, SequenceRun{m.get(), 3, good, nullptr, row0, {}}},
      absl::StatusCode::kInvalidArgument, "memory twice");
  const float embd[64] = {};
  EmbeddingChunk chunk{embd, 1, 1};
  expect_fail({ok_run, SequenceRun{m.get(), 3, {}, &chunk, row0, {}}}, absl::StatusCode::kInvalidArgument,
              "embedding chunk");
  expect_fail({ok_run, SequenceRun{nullptr, 0, good, nullptr, row0, {}}}, absl::StatusCode::kInvalidArgument,
              "null memory");
  // A memory of another backend instance is foreign, even of the same model.
  std::unique_ptr<Backend> again = Load("mamba2", 1);
  auto alien = *again->NewSequence();
  expect_fail({ok_run, SequenceRun{alien.get(), 0, good, nullptr, row0, {}}}, absl::StatusCode::kInvalidArgument,
              "foreign memory");
  EXPECT_EQ(alien->next_pos(), 0);
}

TEST(RecurrentBackendLimits, ContextLimitIsResourceExhausted) {
  CAIRN_REQUIRE_SHARED("golden/models/mamba2.gguf");
  auto model = ModelFile::Open(SharedPath("golden/models/mamba2.gguf"));
  ASSERT_TRUE(model.ok());
  BackendOptions options;
  options.n_threads = 1;
  options.max_context = 4;
  auto b = RecurrentFamily().create(std::shared_ptr<const ModelFile>(std::move(*model)), options);
  ASSERT_TRUE(b.ok()) << b.status();
  auto m = *(*b)->NewSequence();
  const TokenId four[] = {1, 2, 3, 4};
  RunTokens(**b, *m, four);
  const TokenId one[] = {5};
  SequenceRun run{m.get(), 4, one, nullptr, {}, {}};
  EXPECT_EQ((*b)->Forward(std::span<const SequenceRun>(&run, 1)).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m->next_pos(), 4);
}

TEST(RecurrentBackendLoad, RejectsOtherArchitectures) {
  CAIRN_REQUIRE_SHARED("golden/models/llama.gguf");
  auto model = ModelFile::Open(SharedPath("golden/models/llama.gguf"));
  ASSERT_TRUE(model.ok());
  auto b = RecurrentFamily().create(std::shared_ptr<const ModelFile>(std::move(*model)), BackendOptions{});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RecurrentRegistry, ServesBothArchs) {
  BackendRegistry registry;
  ASSERT_TRUE(registry.Register(RecurrentFamily()).ok());
  EXPECT_EQ(*registry.FamilyForArch("mamba2"), "recurrent");
  EXPECT_EQ(*registry.FamilyForArch("mamba"), "recurrent");
  EXPECT_EQ(registry.Register(RecurrentFamily()).code(), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace cairn
