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
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends/model/gguf_writer.h"
#include "backends/model/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/shared_data.h"
#include "tools/eval_lib.h"

namespace cairn {
namespace {

std::unique_ptr<Backend> Load(const std::string& rel, BackendOptions options = {}) {
  auto model = ModelFile::Open(testing::SharedPath(rel));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  auto b = CreateTransformerBackend(std::shared_ptr<const ModelFile>(std::move(*model)), options);
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
  const char* logits;     // exact math of the file
  const char* llamacpp;   // llama.cpp on the quantized file
};
const FastGoldenRow kFastGolden[] = {
    {"golden/models/llama-q8.gguf", "golden/logits/llama-q8.bin", "golden/logits/llama-q8.llamacpp.bin"},
    {"golden/models/llama256-Q4_0.gguf", "golden/logits/llama256-Q4_0.bin",
     "golden/logits/llama256-Q4_0.llamacpp.bin"},
    {"golden/models/llama256-Q4_K_M.gguf", "golden/logits/llama256-Q4_K_M.bin",
     "golden/logits/llama256-Q4_K_M.llamacpp.bin"},
    {"golden/models/llama256-Q5_K_M.gguf", "golden/logits/llama256-Q5_K_M.bin",
     "golden/logits/llama256-Q5_K_M.llamacpp.bin"},
    {"golden/models/llama256-Q6_K.gguf", "golden/logits/llama256-Q6_K.bin",
     "golden/logits/llama256-Q6_K.llamacpp.bin"},
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
  auto backend = CreateTransformerBackend(std::shared_ptr<const ModelFile>(std::move(*model)), {});
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

// A tiny model as named F32 tensors plus metadata, turned into a GGUF image.
struct Synthetic {
  std::string arch = "llama";
  int64_t embd = 64, ff = 96, vocab = 40;
  int32_t layers = 2, heads = 4, kv_heads = 2;
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> tensors;
  std::map<std::string, float> f32_keys;
  std::map<std::string, std::string> str_keys;
  std::set<std::string> skip_keys;

  int64_t hd() const { return embd / heads; }

  void Add(const std::string& name, std::vector<int64_t> shape, uint32_t seed, float scale) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> dist(-scale, scale);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = dist(g);
    tensors[name] = {shape, v};
  }

  // Random weights; norms around 1. Seeds depend only on the name, so two
  // Synthetic models share every tensor they both have.
  void Fill(bool qkv_bias, bool qk_norm, bool tied) {
    uint32_t seed = 1;
    const float ws = 1.0f / std::sqrt(static_cast<float>(embd));
    Add("token_embd.weight", {embd, vocab}, seed++, 1.0f);
    Add("output_norm.weight", {embd}, seed++, 0.2f);
    for (float& x : tensors["output_norm.weight"].second) x += 1.0f;
    if (!tied) Add("output.weight", {embd, vocab}, seed++, ws);
    const int64_t kv = hd() * kv_heads;
    for (int32_t l = 0; l < layers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      seed = 100 * (l + 1);
      Add(p + "attn_norm.weight", {embd}, seed++, 0.2f);
      Add(p + "ffn_norm.weight", {embd}, seed++, 0.2f);
      for (auto* n : {&tensors[p + "attn_norm.weight"].second, &tensors[p + "ffn_norm.weight"].second})
        for (float& x : *n) x += 1.0f;
      Add(p + "attn_q.weight", {embd, embd}, seed++, ws * 3);
      Add(p + "attn_k.weight", {embd, kv}, seed++, ws * 3);
      Add(p + "attn_v.weight", {embd, kv}, seed++, ws);
      Add(p + "attn_output.weight", {embd, embd}, seed++, ws);
      Add(p + "ffn_gate.weight", {embd, ff}, seed++, ws);
      Add(p + "ffn_up.weight", {embd, ff}, seed++, ws);
      Add(p + "ffn_down.weight", {ff, embd}, seed++, 1.0f / std::sqrt(static_cast<float>(ff)));
      if (qkv_bias) {
        Add(p + "attn_q.bias", {embd}, seed++, 0.5f);
        Add(p + "attn_k.bias", {kv}, seed++, 0.5f);
        Add(p + "attn_v.bias", {kv}, seed++, 0.5f);
      }
      if (qk_norm) {
        Add(p + "attn_q_norm.weight", {hd()}, seed++, 0.2f);
        Add(p + "attn_k_norm.weight", {hd()}, seed++, 0.2f);
      }
    }
  }

  absl::StatusOr<std::unique_ptr<Backend>> Build() const {
    GgufWriter w;
    auto key = [&](const std::string& k) { return arch + "." + k; };
    w.SetString("general.architecture", arch);
    auto u32 = [&](const std::string& k, int64_t v) {
      if (!skip_keys.count(k)) w.SetUint32(key(k), static_cast<uint32_t>(v));
    };
    u32("context_length", 256);
    u32("embedding_length", embd);
    u32("block_count", layers);
    u32("feed_forward_length", ff);
    u32("attention.head_count", heads);
    u32("attention.head_count_kv", kv_heads);
    if (!skip_keys.count("attention.layer_norm_rms_epsilon")) {
      w.SetFloat32(key("attention.layer_norm_rms_epsilon"), 1e-5f);
    }
    for (const auto& [k, v] : f32_keys) w.SetFloat32(key(k), v);
    for (const auto& [k, v] : str_keys) w.SetString(key(k), v);
    for (const auto& [name, t] : tensors) w.AddF32Tensor(name, t.first, t.second);
    auto model = ModelFile::FromBuffer(w.Serialize(), "synthetic-" + arch);
    if (!model.ok()) return model.status();
    return CreateTransformerBackend(std::shared_ptr<const ModelFile>(std::move(*model)), BackendOptions{});
  }
};

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
  Synthetic q2;
  q2.arch = "qwen2";
  q2.Fill(/*qkv_bias=*/true, false, false);
  Synthetic ll = q2;
  ll.arch = "llama";
  const int64_t hd = q2.hd(), half = hd / 2, E = q2.embd;
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
  for (int32_t l = 0; l < q2.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    permute_rows(ll.tensors[p + "attn_q.weight"].second, E, E);
    permute_rows(ll.tensors[p + "attn_k.weight"].second, hd * q2.kv_heads, E);
    permute_rows(ll.tensors[p + "attn_q.bias"].second, E, 1);
    permute_rows(ll.tensors[p + "attn_k.bias"].second, hd * q2.kv_heads, 1);
  }
  auto bq = q2.Build();
  auto bl = ll.Build();
  ASSERT_TRUE(bq.ok()) << bq.status();
  ASSERT_TRUE(bl.ok()) << bl.status();
  const SequenceLogits lq = RunAll(**bq, kTokens), ll_logits = RunAll(**bl, kTokens);
  EXPECT_LT(MaxRel(lq, ll_logits), 1e-5);
  // Not vacuous: without the permutation the two differ.
  Synthetic unpermuted = q2;
  unpermuted.arch = "llama";
  auto bu = unpermuted.Build();
  ASSERT_TRUE(bu.ok());
  EXPECT_GT(MaxRel(RunAll(**bu, kTokens), lq), 1e-2);
}

TEST(ArchTest, Qwen2RequiresItsBiases) {
  Synthetic q2;
  q2.arch = "qwen2";
  q2.Fill(false, false, false);
  auto b = q2.Build();
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("attn_q.bias"), std::string::npos) << b.status();
}

// rope_freqs factors divide each pair's frequency; linear scaling by factor f
// multiplies every frequency by 1/f. Factors of 2 everywhere equal f = 2.
TEST(ArchTest, RopeFreqsFactorsAndLinearScaling) {
  Synthetic base;
  base.Fill(false, false, false);
  Synthetic factors = base;
  factors.tensors["rope_freqs.weight"] = {{base.hd() / 2}, std::vector<float>(base.hd() / 2, 2.0f)};
  Synthetic linear = base;
  linear.str_keys["rope.scaling.type"] = "linear";
  linear.f32_keys["rope.scaling.factor"] = 2.0f;
  auto b0 = base.Build(), b1 = factors.Build(), b2 = linear.Build();
  ASSERT_TRUE(b0.ok() && b1.ok() && b2.ok()) << b1.status() << b2.status();
  const SequenceLogits l0 = RunAll(**b0, kTokens), l1 = RunAll(**b1, kTokens), l2 = RunAll(**b2, kTokens);
  EXPECT_LT(MaxRel(l1, l2), 1e-5);
  EXPECT_GT(MaxRel(l0, l1), 1e-3) << "scaling had no effect";
  // A different base changes the result too (the key is read).
  Synthetic other_base = base;
  other_base.f32_keys["rope.freq_base"] = 500.0f;
  auto b3 = other_base.Build();
  ASSERT_TRUE(b3.ok());
  EXPECT_GT(MaxRel(RunAll(**b3, kTokens), l0), 1e-3);
}

TEST(ArchTest, TiedOutputIsTheTokenEmbedding) {
  Synthetic tied;
  tied.Fill(false, false, /*tied=*/true);
  Synthetic untied = tied;
  untied.tensors["output.weight"] = untied.tensors["token_embd.weight"];
  auto bt = tied.Build(), bu = untied.Build();
  ASSERT_TRUE(bt.ok() && bu.ok());
  EXPECT_EQ(RunAll(**bt, kTokens).values, RunAll(**bu, kTokens).values);
}

TEST(ArchTest, Qwen3NeedsPerHeadNorms) {
  Synthetic q3;
  q3.arch = "qwen3";
  q3.Fill(false, /*qk_norm=*/true, true);
  auto ok = q3.Build();
  ASSERT_TRUE(ok.ok()) << ok.status();
  Synthetic missing = q3;
  missing.tensors.erase("blk.1.attn_k_norm.weight");
  auto bad = missing.Build();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("blk.1.attn_k_norm.weight"), std::string::npos) << bad.status();
  // The norms matter: all-ones norms give other logits than random ones.
  Synthetic ones = q3;
  for (auto& [name, t] : ones.tensors) {
    if (name.find("_norm.weight") != std::string::npos && name.find("attn_") != std::string::npos) {
      std::fill(t.second.begin(), t.second.end(), 1.0f);
    }
  }
  auto bo = ones.Build();
  ASSERT_TRUE(bo.ok());
  EXPECT_GT(MaxRel(RunAll(**bo, kTokens), RunAll(**ok, kTokens)), 1e-3);
}

// ------------------------------------------------------------- load errors

TEST(LoadTest, ErrorsNameTheProblem) {
  Synthetic good;
  good.Fill(false, false, false);
  ASSERT_TRUE(good.Build().ok());

  Synthetic missing = good;
  missing.tensors.erase("blk.0.ffn_up.weight");
  auto s = missing.Build().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("blk.0.ffn_up.weight"), std::string::npos) << s;

  Synthetic shape = good;
  shape.Add("blk.1.attn_v.weight", {good.embd, 8}, 5, 0.1f);
  s = shape.Build().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("blk.1.attn_v.weight"), std::string::npos) << s;

  // YaRN loads (the shared RoPE reads it, as for gpt-oss); other scaling
  // types are refused by name.
  Synthetic yarn = good;
  yarn.str_keys["rope.scaling.type"] = "yarn";
  EXPECT_TRUE(yarn.Build().ok()) << yarn.Build().status();
  Synthetic longrope = good;
  longrope.str_keys["rope.scaling.type"] = "longrope";
  s = longrope.Build().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("longrope"), std::string::npos) << s;

  Synthetic no_eps = good;
  no_eps.skip_keys.insert("attention.layer_norm_rms_epsilon");
  s = no_eps.Build().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("layer_norm_rms_epsilon"), std::string::npos) << s;

  Synthetic bad_kv = good;
  bad_kv.kv_heads = 3;
  EXPECT_EQ(bad_kv.Build().status().code(), absl::StatusCode::kInvalidArgument);

  Synthetic other_arch = good;
  other_arch.arch = "mamba2";
  s = other_arch.Build().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("mamba2"), std::string::npos) << s;
}

// ------------------------------------------------ registry and snapshots

TEST(RegistryTest, FamilyServesItsArchsOnce) {
  BackendRegistry r;
  ASSERT_TRUE(RegisterTransformerFamily(r).ok());
  for (const char* arch : {"llama", "qwen2", "qwen3"}) EXPECT_EQ(*r.FamilyForArch(arch), "transformer");
  EXPECT_EQ(RegisterTransformerFamily(r).code(), absl::StatusCode::kAlreadyExists);
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
  EXPECT_EQ(b->Forward(std::span<const SequenceRun>(&run, 1)).status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace cairn
