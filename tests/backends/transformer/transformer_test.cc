// The transformer family: golden logits of every transformer model (batch and
// step), stories260K greedy generation against llama.cpp, architecture
// semantics on synthetic models (qwen2 NEOX + biases, rope_freqs, linear
// scaling, tied output) and load errors.
#include "backends/transformer/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends/model/tokenizer.h"
#include "gtest/gtest.h"
#include "synthetic/architectures.h"
#include "tests/testing/shared_data.h"
#include "tools/eval_lib.h"

namespace cairn {
namespace {

std::unique_ptr<Backend> Load(const std::string& rel, BackendOptions options = {}) {
  auto model = ModelFile::Open(testing::SharedPath(rel));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  auto b = TransformerFamily().create(std::shared_ptr<const ModelFile>(std::move(*model)), options);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}

// ------------------------------------------------------------ golden logits

struct GoldenRow {
  const char* model;
  const char* logits;
};
const GoldenRow kGolden[] = {
    {"golden/models/llama.gguf", "golden/logits/llama.bin"},
    {"golden/models/llama-q8.gguf", "golden/logits/llama-q8.bin"},
    {"golden/models/qwen3.gguf", "golden/logits/qwen3.bin"},
    {"golden/models/llama256-Q4_K_M.gguf", "golden/logits/llama256-Q4_K_M.bin"},
    {"golden/models/llama256-Q5_K_M.gguf", "golden/logits/llama256-Q5_K_M.bin"},
    {"golden/models/llama256-Q6_K.gguf", "golden/logits/llama256-Q6_K.bin"},
    {"golden/models/llama256-Q4_0.gguf", "golden/logits/llama256-Q4_0.bin"},
    {"models/stories260K.gguf", "golden/logits/stories260K.bin"},
};

class GoldenTest : public ::testing::TestWithParam<GoldenRow> {};

BackendOptions ExactActivations() {
  BackendOptions o;
  o.exact_activations = true;
  return o;
}

// Quantized models are compared with the exact-dequantization logits: with
// exact_activations the kernels keep activations in F32, so 1e-4 x std holds
// for them too.
TEST_P(GoldenTest, BatchAndStepMatchLlamaCpp) {
  CAIRN_REQUIRE_SHARED(GetParam().model);
  CAIRN_REQUIRE_SHARED(GetParam().logits);
  auto backend = Load(GetParam().model, ExactActivations());
  ASSERT_NE(backend, nullptr);
  auto seqs = ReadTokenFile(testing::SharedPath("golden/tokens.txt"));
  auto ref = ReadLogitsFile(testing::SharedPath(GetParam().logits));
  ASSERT_TRUE(seqs.ok() && ref.ok());
  for (int32_t chunk : {0, 1}) {
    auto got = EvalSequences(*backend, *seqs, EvalMode{chunk});
    ASSERT_TRUE(got.ok()) << got.status();
    auto c = CompareAll(*got, *ref);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_LE(c->max_rel, 1e-4) << (chunk ? "step" : "batch") << ": max|diff| " << c->max_abs_diff;
    EXPECT_EQ(c->argmax_agree, c->rows) << (chunk ? "step" : "batch");
    RecordProperty(chunk ? "max_rel_step" : "max_rel_batch", std::to_string(c->max_rel));
  }
}

// A model path as a test name: its file name without the extension, other
// characters than letters and digits as '_'.
std::string ModelTestName(const std::string& path) {
  std::string s = path.substr(path.rfind('/') + 1);
  s = s.substr(0, s.rfind('.'));
  for (char& c : s) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenTest, ::testing::ValuesIn(kGolden),
                         [](const ::testing::TestParamInfo<GoldenRow>& i) { return ModelTestName(i.param.model); });

// ------------------------------------------------ golden logits, fast path

// The quantized models on the default path (8-bit activations where the
// weight type has an integer kernel), against the exact-math file: within
// 0.15 x std (the golden README's bound for 8-bit activations) at every
// position, and the same argmax at 95% of positions at least (llama.cpp's
// own quantized path agrees with the exact file on about 96%). Batch and
// step agree with each other to within kFastBatchVsStep x std (below). The
// deviation and agreement against llama.cpp's own quantized run
// (*.llamacpp.bin) are printed and recorded, not asserted.
struct FastGoldenRow {
  const char* model;
  const char* logits;    // exact math of the file
  const char* llamacpp;  // llama.cpp on the quantized file
};
const FastGoldenRow kFastGolden[] = {
    {"golden/models/llama-q8.gguf", "golden/logits/llama-q8.bin", "golden/logits/llama-q8.llamacpp.bin"},
    {"golden/models/llama256-Q4_0.gguf", "golden/logits/llama256-Q4_0.bin", "golden/logits/llama256-Q4_0.llamacpp.bin"},
    {"golden/models/llama256-Q4_K_M.gguf", "golden/logits/llama256-Q4_K_M.bin",
     "golden/logits/llama256-Q4_K_M.llamacpp.bin"},
    {"golden/models/llama256-Q5_K_M.gguf", "golden/logits/llama256-Q5_K_M.bin",
     "golden/logits/llama256-Q5_K_M.llamacpp.bin"},
    {"golden/models/llama256-Q6_K.gguf", "golden/logits/llama256-Q6_K.bin", "golden/logits/llama256-Q6_K.llamacpp.bin"},
};
constexpr double kFastTolerance = 0.15;
constexpr double kFastMinArgmaxAgreement = 0.95;
// Each activation row is quantized on its own, but a batch of 8 or more rows
// takes other kernels than one row (the integer prompt kernel, attention's
// sgemm), which round differently (about 1e-7 relative; QuantMatMulTest). Now and then such a difference moves an
// activation across an 8-bit rounding boundary; that one step moves the
// logits of its position, and of later ones through K/V, by up to about 2%
// of std (llama256-Q4_0: 0.0186 x std batch vs step, at 13 of 16 and 39 of
// 64 positions after the first flip; llama-q8: 2.3e-6, no flip). With the
// K-quant kernels (also bit for bit batch-independent, kquant_dot_test):
// llama256-Q4_K_M 0.073, Q6_K 0.033, Q5_K_M 1.2e-6 (no flip); Q4_0 0.038.
// The floor is the largest of these, with room.
constexpr double kFastBatchVsStep = 0.1;

class FastGoldenTest : public ::testing::TestWithParam<FastGoldenRow> {};

TEST_P(FastGoldenTest, WithinEightBitBoundOfExactAndCloseToLlamaCppQuantized) {
  const FastGoldenRow& row = GetParam();
  CAIRN_REQUIRE_SHARED(row.model);
  CAIRN_REQUIRE_SHARED(row.logits);
  auto backend = Load(row.model);  // default options: the fast path
  ASSERT_NE(backend, nullptr);
  auto seqs = ReadTokenFile(testing::SharedPath("golden/tokens.txt"));
  auto ref = ReadLogitsFile(testing::SharedPath(row.logits));
  ASSERT_TRUE(seqs.ok() && ref.ok());
  const bool have_llamacpp = std::filesystem::exists(testing::SharedPath(row.llamacpp));
  std::vector<SequenceLogits> batch;
  for (int32_t chunk : {0, 1}) {
    auto evaluated = EvalSequences(*backend, *seqs, EvalMode{chunk});
    ASSERT_TRUE(evaluated.ok()) << evaluated.status();
    std::vector<SequenceLogits>& got = *evaluated;
    const char* mode = chunk ? "step" : "batch";
    auto c = CompareAll(got, *ref);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_LE(c->max_rel, kFastTolerance) << mode << ": max|diff| " << c->max_abs_diff;
    EXPECT_GE(c->argmax_agree, kFastMinArgmaxAgreement * c->rows) << mode;
    std::printf("[ fast     ] %s %s vs exact: max %.4f x std, argmax %lld/%lld\n", row.model, mode, c->max_rel,
                static_cast<long long>(c->argmax_agree), static_cast<long long>(c->rows));
    RecordProperty(std::string("max_rel_vs_exact_") + mode, std::to_string(c->max_rel));
    if (have_llamacpp) {
      auto lc = ReadLogitsFile(testing::SharedPath(row.llamacpp));
      ASSERT_TRUE(lc.ok()) << lc.status();
      auto d = CompareAll(got, *lc);
      ASSERT_TRUE(d.ok()) << d.status();
      std::printf("[ fast     ] %s %s vs llama.cpp quantized: max %.4f x std, argmax %lld/%lld\n", row.model, mode,
                  d->max_rel, static_cast<long long>(d->argmax_agree), static_cast<long long>(d->rows));
      RecordProperty(std::string("max_rel_vs_llamacpp_") + mode, std::to_string(d->max_rel));
    }
    if (chunk == 0) {
      batch = std::move(got);
    } else {
      auto bs = CompareAll(got, batch);
      ASSERT_TRUE(bs.ok()) << bs.status();
      std::printf("[ fast     ] %s batch vs step: max %.3g x std\n", row.model, bs->max_rel);
      EXPECT_LE(bs->max_rel, kFastBatchVsStep);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, FastGoldenTest, ::testing::ValuesIn(kFastGolden),
                         [](const ::testing::TestParamInfo<FastGoldenRow>& i) { return ModelTestName(i.param.model); });

// ---------------------------------------------------------- greedy stories

// Extracts every {"prompt": "...", "tokens": [...]} pair of the greedy file
// (a fixed, simple layout: one string prompt and one integer array each).
std::vector<std::pair<std::string, std::vector<TokenId>>> ReadGreedy(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::pair<std::string, std::vector<TokenId>>> out;
  size_t at = 0;
  while ((at = text.find("\"prompt\"", at)) != std::string::npos) {
    size_t q0 = text.find('"', text.find(':', at) + 1);
    std::string prompt;
    size_t i = q0 + 1;
    for (; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) {
        ++i;
        prompt += text[i] == 'n' ? '\n' : text[i];
      } else {
        prompt += text[i];
      }
    }
    size_t t = text.find("\"tokens\"", i);
    size_t open = text.find('[', t), close = text.find(']', open);
    std::vector<TokenId> ids;
    std::stringstream list(text.substr(open + 1, close - open - 1));
    std::string item;
    while (std::getline(list, item, ',')) ids.push_back(std::stoi(item));
    out.emplace_back(prompt, ids);
    at = close;
  }
  return out;
}

TEST(GreedyTest, Stories260KReproducesLlamaCpp) {
  CAIRN_REQUIRE_SHARED("models/stories260K.gguf");
  CAIRN_REQUIRE_SHARED("models/stories260K_greedy.json");
  auto model = ModelFile::Open(testing::SharedPath("models/stories260K.gguf"));
  ASSERT_TRUE(model.ok());
  auto tok = Tokenizer::Create(**model);
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto backend = TransformerFamily().create(std::shared_ptr<const ModelFile>(std::move(*model)), {});
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto cases = ReadGreedy(testing::SharedPath("models/stories260K_greedy.json"));
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& [prompt, want] : cases) {
    const std::vector<TokenId> ids = (*tok)->Tokenize(prompt);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), 1) << "bos";
    auto got = GenerateGreedy(**backend, ids, static_cast<int32_t>(want.size()));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want) << "prompt: " << prompt;
  }
}

// ------------------------------------------------------- synthetic models

constexpr int64_t kEmbd = 64, kVocab = 40;
constexpr int32_t kLayers = 2, kHeads = 4, kKvHeads = 2;
constexpr int64_t kHeadDim = kEmbd / kHeads;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A tiny model of `arch` with llama's tensors (synthetic/), its values drawn:
// norms around 1 and q/k three times the default scale, so that every norm
// and the attention pattern matter. The same flags give the same values
// whatever the arch.
synthetic::SyntheticModel Tiny(const std::string& arch, bool qkv_bias, bool qk_norm, bool tied) {
  synthetic::SyntheticModel m = synthetic::Llama({.arch = arch,
                                                  .n_embd = kEmbd,
                                                  .n_ff = 96,
                                                  .n_vocab = kVocab,
                                                  .n_layer = kLayers,
                                                  .n_head = kHeads,
                                                  .n_head_kv = kKvHeads,
                                                  .n_ctx = 256,
                                                  .tied_output = tied,
                                                  .qkv_bias = qkv_bias,
                                                  .qk_norm = qk_norm});
  for (synthetic::SyntheticTensor& t : m.tensors()) {
    if (EndsWith(t.name, "norm.weight")) t.init = synthetic::Init::Uniform(0.8f, 1.2f);
    if (EndsWith(t.name, "attn_q.weight") || EndsWith(t.name, "attn_k.weight")) {
      t.init = synthetic::Init::Symmetric(3.0f / std::sqrt(static_cast<float>(kEmbd)));
    }
  }
  m.Materialize();
  return m;
}

absl::StatusOr<std::unique_ptr<Backend>> Build(const synthetic::SyntheticModel& m) {
  absl::StatusOr<std::shared_ptr<const ModelFile>> file = m.Open("synthetic-" + m.arch());
  if (!file.ok()) return file.status();
  return TransformerFamily().create(*std::move(file), BackendOptions{});
}

SequenceLogits RunAll(Backend& b, const std::vector<TokenId>& tokens) {
  auto l = EvalSequence(b, tokens, EvalMode{});
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *l : SequenceLogits{};
}

double MaxRel(const SequenceLogits& a, const SequenceLogits& b) {
  auto c = CompareLogits(a, b);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? c->max_rel : 1e30;
}

const std::vector<TokenId> kTokens = {1, 5, 9, 2, 33, 17, 17, 4, 38, 21, 0, 12, 7, 30, 3, 25, 11, 6, 19, 39};

// qwen2 = NEOX RoPE + QKV biases. NEOX rotates (i, i + d/2) where NORMAL
// rotates (2i, 2i + 1); permuting the rows of Wq, Wk (and their biases) per
// head maps one onto the other and leaves every q.k unchanged. So a qwen2
// model equals a llama model (which accepts optional biases) with permuted
// rows: this pins both the pairing and where the biases enter (before RoPE).
TEST(ArchTest, Qwen2EqualsLlamaWithPermutedQkRows) {
  synthetic::SyntheticModel q2 = Tiny("qwen2", /*qkv_bias=*/true, false, false);
  synthetic::SyntheticModel ll = Tiny("llama", /*qkv_bias=*/true, false, false);
  const int64_t hd = kHeadDim, half = hd / 2;
  auto permute_rows = [&](std::vector<float>& m, int64_t n_rows_total, int64_t row_len) {
    std::vector<float> out(m.size());
    for (int64_t r = 0; r < n_rows_total; ++r) {
      const int64_t head = r / hd, i = r % hd;
      // NORMAL row 2j <- NEOX row j; NORMAL row 2j+1 <- NEOX row j + half.
      const int64_t src = head * hd + (i % 2 == 0 ? i / 2 : i / 2 + half);
      std::copy_n(&m[src * row_len], row_len, &out[r * row_len]);
    }
    m = out;
  };
  for (int32_t l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    permute_rows(ll.Values(p + "attn_q.weight"), kEmbd, kEmbd);
    permute_rows(ll.Values(p + "attn_k.weight"), hd * kKvHeads, kEmbd);
    permute_rows(ll.Values(p + "attn_q.bias"), kEmbd, 1);
    permute_rows(ll.Values(p + "attn_k.bias"), hd * kKvHeads, 1);
  }
  auto bq = Build(q2);
  auto bl = Build(ll);
  ASSERT_TRUE(bq.ok()) << bq.status();
  ASSERT_TRUE(bl.ok()) << bl.status();
  const SequenceLogits lq = RunAll(**bq, kTokens), ll_logits = RunAll(**bl, kTokens);
  EXPECT_LT(MaxRel(lq, ll_logits), 1e-5);
  // Not vacuous: without the permutation the two differ.
  auto bu = Build(Tiny("llama", /*qkv_bias=*/true, false, false));
  ASSERT_TRUE(bu.ok());
  EXPECT_GT(MaxRel(RunAll(**bu, kTokens), lq), 1e-2);
}

TEST(ArchTest, Qwen2RequiresItsBiases) {
  auto b = Build(Tiny("qwen2", false, false, false));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("attn_q.bias"), std::string::npos) << b.status();
}

// rope_freqs factors divide each pair's frequency; linear scaling by factor f
// multiplies every frequency by 1/f. Factors of 2 everywhere equal f = 2.
TEST(ArchTest, RopeFreqsFactorsAndLinearScaling) {
  const synthetic::SyntheticModel base = Tiny("llama", false, false, false);
  synthetic::SyntheticModel factors = base;
  factors.Add("rope_freqs.weight", {kHeadDim / 2}, synthetic::Init::Constant(2.0f));
  synthetic::SyntheticModel linear = base;
  linear.metadata().SetString("llama.rope.scaling.type", "linear");
  linear.metadata().SetFloat32("llama.rope.scaling.factor", 2.0f);
  auto b0 = Build(base), b1 = Build(factors), b2 = Build(linear);
  ASSERT_TRUE(b0.ok() && b1.ok() && b2.ok()) << b1.status() << b2.status();
  const SequenceLogits l0 = RunAll(**b0, kTokens), l1 = RunAll(**b1, kTokens), l2 = RunAll(**b2, kTokens);
  EXPECT_LT(MaxRel(l1, l2), 1e-5);
  EXPECT_GT(MaxRel(l0, l1), 1e-3) << "scaling had no effect";
  // A different base changes the result too (the key is read).
  synthetic::SyntheticModel other_base = base;
  other_base.metadata().SetFloat32("llama.rope.freq_base", 500.0f);
  auto b3 = Build(other_base);
  ASSERT_TRUE(b3.ok());
  EXPECT_GT(MaxRel(RunAll(**b3, kTokens), l0), 1e-3);
}

TEST(ArchTest, TiedOutputIsTheTokenEmbedding) {
  synthetic::SyntheticModel tied = Tiny("llama", false, false, /*tied=*/true);
  synthetic::SyntheticModel untied = tied;
  untied.Add("output.weight", {kEmbd, kVocab}, synthetic::Init::Values(untied.Values("token_embd.weight")));
  auto bt = Build(tied), bu = Build(untied);
  ASSERT_TRUE(bt.ok() && bu.ok());
  EXPECT_EQ(RunAll(**bt, kTokens).values, RunAll(**bu, kTokens).values);
}

TEST(ArchTest, Qwen3NeedsPerHeadNorms) {
  const synthetic::SyntheticModel q3 = Tiny("qwen3", false, /*qk_norm=*/true, true);
  auto ok = Build(q3);
  ASSERT_TRUE(ok.ok()) << ok.status();
  synthetic::SyntheticModel missing = q3;
  ASSERT_TRUE(missing.Remove("blk.1.attn_k_norm.weight"));
  auto bad = Build(missing);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("blk.1.attn_k_norm.weight"), std::string::npos) << bad.status();
  // The norms matter: all-ones norms give other logits than random ones.
  synthetic::SyntheticModel ones = q3;
  for (synthetic::SyntheticTensor& t : ones.tensors()) {
    if (EndsWith(t.name, "attn_q_norm.weight") || EndsWith(t.name, "attn_k_norm.weight")) {
      t.init = synthetic::Init::Ones();
    }
  }
  auto bo = Build(ones);
  ASSERT_TRUE(bo.ok());
  EXPECT_GT(MaxRel(RunAll(**bo, kTokens), RunAll(**ok, kTokens)), 1e-3);
}

// ------------------------------------------------------------- load errors

TEST(LoadTest, ErrorsNameTheProblem) {
  const synthetic::SyntheticModel good = Tiny("llama", false, false, false);
  ASSERT_TRUE(Build(good).ok());

  synthetic::SyntheticModel missing = good;
  ASSERT_TRUE(missing.Remove("blk.0.ffn_up.weight"));
  auto s = Build(missing).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("blk.0.ffn_up.weight"), std::string::npos) << s;

  synthetic::SyntheticModel shape = good;
  shape.Add("blk.1.attn_v.weight", {kEmbd, 8}, synthetic::Init::Symmetric(0.1f));
  s = Build(shape).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("blk.1.attn_v.weight"), std::string::npos) << s;

  // YaRN loads (the shared RoPE reads it, as for gpt-oss); other scaling
  // types are refused by name.
  synthetic::SyntheticModel yarn = good;
  yarn.metadata().SetString("llama.rope.scaling.type", "yarn");
  EXPECT_TRUE(Build(yarn).ok()) << Build(yarn).status();
  synthetic::SyntheticModel longrope = good;
  longrope.metadata().SetString("llama.rope.scaling.type", "longrope");
  s = Build(longrope).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("longrope"), std::string::npos) << s;

  synthetic::SyntheticModel no_eps = good;
  ASSERT_TRUE(no_eps.metadata().Erase("llama.attention.layer_norm_rms_epsilon"));
  s = Build(no_eps).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("layer_norm_rms_epsilon"), std::string::npos) << s;

  synthetic::SyntheticModel bad_kv = good;
  bad_kv.metadata().SetUint32("llama.attention.head_count_kv", 3);
  EXPECT_EQ(Build(bad_kv).status().code(), absl::StatusCode::kInvalidArgument);
  s = Build(Tiny("mamba2", false, false, false)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("mamba2"), std::string::npos) << s;
}

// `model` with the int32 array `key` set to `values` fails to load with
// `code`, its message containing `needle`.
void ExpectArrayRefused(const synthetic::SyntheticModel& model, const std::string& key,
                        const std::vector<int32_t>& values, absl::StatusCode code, const std::string& needle) {
  synthetic::SyntheticModel m = model;
  m.metadata().SetInt32Array(key, values);
  const absl::Status s = Build(m).status();
  EXPECT_EQ(s.code(), code) << key;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s;
}

// Head counts as per-layer arrays. llama takes one count (the reference
// sizes every llama layer by layer 0's); deci honours each layer's.
TEST(LoadTest, PerLayerHeadCounts) {
  static_assert(kLayers == 2 && kHeads == 4 && kKvHeads == 2);
  constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  const synthetic::SyntheticModel good = Tiny("llama", false, false, false);
  synthetic::SyntheticModel same = good;
  same.metadata().SetInt32Array("llama.attention.head_count_kv", {2, 2});
  same.metadata().SetInt32Array("llama.attention.head_count", {4, 4});
  EXPECT_TRUE(Build(same).ok()) << Build(same).status();

  ExpectArrayRefused(good, "llama.attention.head_count_kv", {2, 1}, kInvalid,
                     "llama.attention.head_count_kv of layer 1 is 1");
  ExpectArrayRefused(good, "llama.attention.head_count", {4, 2}, kInvalid,
                     "llama.attention.head_count of layer 1 is 2");
  ExpectArrayRefused(good, "llama.attention.head_count_kv", {2}, kInvalid, "llama.attention.head_count_kv");

  // Absent, head_count_kv is head_count (as the reference reads it): this
  // file's K rows of 2 heads are then of the wrong shape, and named.
  synthetic::SyntheticModel no_kv = good;
  ASSERT_TRUE(no_kv.metadata().Erase("llama.attention.head_count_kv"));
  const absl::Status s = Build(no_kv).status();
  EXPECT_EQ(s.code(), kInvalid);
  EXPECT_NE(s.message().find("attn_k.weight"), std::string::npos) << s;

  // deci: the llama tensors with its own keys load; a layer without K/V
  // heads (the reference's "linear attention") is not supported.
  const synthetic::SyntheticModel deci = Tiny("deci", false, false, false);
  auto b = Build(deci);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->info().family, "transformer");
  ExpectArrayRefused(deci, "deci.attention.head_count_kv", {2, 0}, absl::StatusCode::kUnimplemented, "deci layer 1");
  ExpectArrayRefused(deci, "deci.attention.head_count_kv", {2, 3}, kInvalid,
                     "deci.attention.head_count_kv of layer 1 is 3");
}

// ------------------------------------------------ registry and snapshots

TEST(RegistryTest, FamilyServesItsArchsOnce) {
  BackendRegistry r;
  ASSERT_TRUE(r.Register(TransformerFamily()).ok());
  for (const char* arch : {"llama", "qwen2", "qwen3"}) EXPECT_EQ(*r.FamilyForArch(arch), "transformer");
  EXPECT_EQ(r.Register(TransformerFamily()).code(), absl::StatusCode::kAlreadyExists);
}

TEST(SnapshotTest, LayoutTellsModelsApartButNotReplicas) {
  CAIRN_REQUIRE_SHARED("golden/models/qwen3.gguf");
  auto llama = Load("golden/models/llama.gguf");
  auto replica = Load("golden/models/llama.gguf");
  auto qwen = Load("golden/models/qwen3.gguf");
  ASSERT_TRUE(llama && replica && qwen);
  auto m = *llama->NewSequence();
  std::vector<TokenId> toks = {1, 40, 50, 60, 70};
  SequenceRun run{m.get(), 0, toks, nullptr, {}, {}};
  ASSERT_TRUE(llama->Forward(std::span<const SequenceRun>(&run, 1)).ok());
  auto snap = m->Capture(SnapshotScope::kFull);
  ASSERT_TRUE(snap.ok());
  auto on_qwen = *qwen->NewSequence();
  EXPECT_EQ(on_qwen->Restore(*snap).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(on_qwen->next_pos(), 0);
  // Another backend over the same file (a replica) accepts it and continues identically.
  auto on_replica = *replica->NewSequence();
  ASSERT_TRUE(on_replica->Restore(*snap).ok());
  const std::vector<TokenId> next = {80, 90};
  const int32_t rows[] = {0, 1};
  SequenceRun a{m.get(), 5, next, nullptr, rows, {}};
  SequenceRun b{on_replica.get(), 5, next, nullptr, rows, {}};
  auto la = llama->Forward(std::span<const SequenceRun>(&a, 1));
  auto lb = replica->Forward(std::span<const SequenceRun>(&b, 1));
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_EQ((*la)[0].values, (*lb)[0].values);
}

TEST(InfoTest, DescribesLlamaGguf) {
  CAIRN_REQUIRE_SHARED("golden/models/llama.gguf");
  auto b = Load("golden/models/llama.gguf", BackendOptions{"my-llama", 1, 64});
  ASSERT_NE(b, nullptr);
  const ModelInfo& i = b->info();
  EXPECT_EQ(i.name, "my-llama");
  EXPECT_EQ(i.arch, "llama");
  EXPECT_EQ(i.family, "transformer");
  EXPECT_EQ(i.n_vocab, 512);
  EXPECT_TRUE(i.caps.truncatable);
  EXPECT_FALSE(i.caps.has_checkpoint_state);
  EXPECT_FALSE(i.accepts_embeddings);
  // Every matrix of the file is read per token: all tensors but the token
  // embedding and the 1-D norms.
  auto f = ModelFile::Open(testing::SharedPath("golden/models/llama.gguf"));
  size_t matrices = 0;
  for (const TensorInfo* t : (*f)->tensors()) {
    if (t->name != "token_embd.weight" && t->n_rows() > 1) matrices += t->n_bytes;
  }
  EXPECT_EQ(i.weight_bytes, matrices);
  // max_context caps the memory.
  auto mem = *b->NewSequence();
  std::vector<TokenId> toks(65, 1);
  SequenceRun run{mem.get(), 0, toks, nullptr, {}, {}};
  EXPECT_EQ(b->Forward(std::span<const SequenceRun>(&run, 1)).status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace cairn
