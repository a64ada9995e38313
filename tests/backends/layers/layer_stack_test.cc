// LayerStack, the one forward pass: FinishLoad's slots and shape, Forward
// against the stack's formula in double precision (embedding scale, pre
// norms, post norms, residual scale, layers without a mixer half, the output
// head's logit scale and soft cap), and the last layer's wanted rows.
#include "backends/layers/layer_stack.h"

#include <cmath>
#include <memory>
#include <vector>

#include "backends/memory/kv_memory.h"
#include "backends/model/gguf_writer.h"
#include "gtest/gtest.h"
#include "tests/backends/layers/block_test_util.h"

namespace cairn {
namespace {

using testing::Vec;

constexpr int64_t kEmbd = 16, kVocab = 20, kFf = 24;

// A model file holding the token embedding (FinishLoad reads the vocabulary
// from it) for stacks whose blocks the test builds itself.
class EmbeddingFile {
 public:
  EmbeddingFile() {
    GgufWriter w;
    w.SetString("general.architecture", "test");
    testing::Weights weights(99);
    values_ = weights.Random(kEmbd * kVocab, -1.0f, 1.0f);
    w.AddF32Tensor("token_embd.weight", {kEmbd, kVocab}, values_);
    auto file = ModelFile::FromBuffer(*std::make_unique<std::vector<uint8_t>>(w.Serialize()), "stack");
    EXPECT_TRUE(file.ok()) << file.status();
    file_ = std::move(*file);
    loader_ = std::make_unique<ModelLoader>(*ModelLoader::For(*file_));
  }
  const TensorInfo* embedding() const { return file_->FindTensor("token_embd.weight"); }
  const ModelLoader& loader() const { return *loader_; }
  Vec Row(TokenId t) const { return Vec(values_.begin() + t * kEmbd, values_.begin() + (t + 1) * kEmbd); }

 private:
  std::vector<float> values_;
  std::unique_ptr<ModelFile> file_;
  std::unique_ptr<ModelLoader> loader_;
};

TEST(LayerStackTest, FinishLoadNumbersFullThenWindowedSlotsAndRecurrentOnes) {
  EmbeddingFile file;
  LayerStack s;
  s.tok_embd = file.embedding();
  using Mixer = LayerStack::Mixer;
  const std::vector<std::pair<Mixer, int32_t>> layers = {
      {Mixer::kAttention, 4}, {Mixer::kMamba, 0},     {Mixer::kAttention, 0},         {Mixer::kNone, 0},
      {Mixer::kDeltaNet, 0},  {Mixer::kAttention, 4}, {Mixer::kAttentionAndMamba, 0}, {Mixer::kShortConv, 0}};
  for (const auto& [mixer, window] : layers) {
    LayerStack::Layer L;
    L.mixer = mixer;
    L.attn.window = window;
    // Layer il has il + 1 K/V heads of 4 key and 2 value floats.
    L.attn.n_head_kv = static_cast<int32_t>(s.layers.size()) + 1;
    L.attn.head_dim_k = 4;
    L.attn.head_dim_v = 2;
    s.layers.push_back(std::move(L));
  }
  s.FinishLoad(file.loader(), {.n_ctx_train = 77, .window = 4, .conv_floats = 3, .state_floats = 5});
  // Full slots: layers 2 and 6; then the rings: layers 0 and 5.
  const std::vector<int32_t> attn = {2, -1, 0, -1, -1, 3, 1, -1}, recurrent = {-1, 0, -1, -1, 1, -1, 2, 3};
  for (size_t il = 0; il < layers.size(); ++il) {
    EXPECT_EQ(s.layers[il].attn_slot, attn[il]) << il;
    EXPECT_EQ(s.layers[il].recurrent_slot, recurrent[il]) << il;
  }
  const ArchShape& shape = s.shape();
  EXPECT_EQ(shape.arch, "test");
  EXPECT_EQ(shape.n_vocab, kVocab);
  EXPECT_EQ(shape.n_embd, kEmbd);
  EXPECT_EQ(shape.n_ctx_train, 77);
  EXPECT_EQ(shape.n_full_slots, 2);
  EXPECT_EQ(shape.n_window_slots, 2);
  EXPECT_EQ(shape.window, 4);
  EXPECT_EQ(shape.n_recurrent_slots, 4);
  // Each slot of its layer's widths: slots 0..3 are layers 2, 6, 0, 5.
  const std::vector<int64_t> k = {12, 28, 4, 24};
  ASSERT_EQ(shape.kv_widths.size(), 4u);
  for (size_t slot = 0; slot < 4; ++slot) {
    EXPECT_EQ(shape.kv_widths[slot].k, k[slot]) << slot;
    EXPECT_EQ(shape.kv_widths[slot].v, k[slot] / 2) << slot;
  }
  EXPECT_EQ(shape.conv_floats, 3);
  EXPECT_EQ(shape.state_floats, 5);
}

FfnBlock Ffn(testing::Weights& w) {
  FfnBlock f;
  f.n_ff = kFf;
  f.gate = w.Matrix(kEmbd, kFf, 2.0f);
  f.up = w.Matrix(kEmbd, kFf, 2.0f);
  f.down = w.Matrix(kFf, kEmbd);
  return f;
}

Vec SwiGluD(const FfnBlock& f, const Vec& x) {
  const Vec g = testing::Mul(f.gate, x), u = testing::Mul(f.up, x);
  Vec h(g.size());
  for (size_t i = 0; i < g.size(); ++i) h[i] = testing::SiluD(g[i]) * u[i];
  return testing::Mul(f.down, h);
}

// Two FFN-only layers (no mixer half), the first with a post norm.
TEST(LayerStackTest, ForwardFollowsTheStacksFormula) {
  EmbeddingFile file;
  testing::Weights w(5);
  LayerStack s;
  s.eps = 1e-5f;
  s.embedding_scale = 2.0f;
  s.residual_scale = 0.5f;
  s.tok_embd = file.embedding();
  for (int il = 0; il < 2; ++il) {
    LayerStack::Layer L;
    L.mixer = LayerStack::Mixer::kNone;
    L.ffn_norm = w.Random(kEmbd, 0.5f, 1.5f);
    if (il == 0) L.post_ffn_norm = w.Random(kEmbd, 0.5f, 1.5f);
    L.ffn = Ffn(w);
    s.layers.push_back(std::move(L));
  }
  s.head.norm = w.Random(kEmbd, 0.5f, 1.5f);
  s.head.eps = 1e-5f;
  s.head.output = w.Matrix(kEmbd, kVocab, 4.0f);
  s.head.logit_scale = 2.0f;
  s.head.softcap = 3.0f;
  s.FinishLoad(file.loader(), {.n_ctx_train = 64});

  KvMemory memory(KvGeometry{.layers = {}, .capacity = 64}, nullptr);
  testing::Pass pass({&memory}, {4}, kEmbd);
  pass.SizeLogits(kVocab);
  s.Forward(*pass);  // the tokens of a testing::Pass are 0

  std::vector<Vec> want;
  for (int r = 0; r < 4; ++r) {
    Vec x = file.Row(0);
    for (double& v : x) v *= 2.0;
    for (const LayerStack::Layer& L : s.layers) {
      Vec n = x;
      testing::RmsNormD(n, 0, kEmbd, L.ffn_norm, s.eps);
      Vec y = SwiGluD(L.ffn, n);
      if (!L.post_ffn_norm.empty()) testing::RmsNormD(y, 0, kEmbd, L.post_ffn_norm, s.eps);
      for (int64_t i = 0; i < kEmbd; ++i) x[i] += 0.5 * y[i];
    }
    testing::RmsNormD(x, 0, kEmbd, s.head.norm, s.head.eps);
    Vec logits = testing::Mul(s.head.output, x);
    for (double& l : logits) l = 3.0 * std::tanh(l / 2.0 / 3.0);
    want.push_back(logits);
  }
  testing::ExpectRowsNear(pass.logits(0).values.data(), want, 1e-5, "ffn stack");
}

// wanted_rows_after_last_attention: the last layer past its attention works
// on the wanted rows alone, and gives them the logits a full last layer
// gives (to rounding: its products run on fewer rows).
TEST(LayerStackTest, TheLastLayerOnTheWantedRowsGivesTheirLogits) {
  EmbeddingFile file;
  std::vector<std::unique_ptr<LayerStack>> stacks;
  std::vector<std::unique_ptr<testing::Weights>> weights;  // the stacks point into them
  for (bool wanted_only : {false, true}) {
    weights.push_back(std::make_unique<testing::Weights>(6));
    testing::Weights& w = *weights.back();
    auto s = std::make_unique<LayerStack>();
    s->tok_embd = file.embedding();
    s->wanted_rows_after_last_attention = wanted_only;
    for (int il = 0; il < 2; ++il) {
      LayerStack::Layer L;
      L.mixer_norm = w.Random(kEmbd, 0.5f, 1.5f);
      L.ffn_norm = w.Random(kEmbd, 0.5f, 1.5f);
      L.attn.n_head = 2;
      L.attn.n_head_kv = 1;
      L.attn.head_dim_k = L.attn.head_dim_v = 8;
      L.attn.scale = 0.35f;
      L.attn.wq = w.Matrix(kEmbd, 16, 2.0f);
      L.attn.wk = w.Matrix(kEmbd, 8, 2.0f);
      L.attn.wv = w.Matrix(kEmbd, 8);
      L.attn.wo = w.Matrix(16, kEmbd);
      L.ffn = Ffn(w);
      s->layers.push_back(std::move(L));
    }
    s->head.norm = std::vector<float>(kEmbd, 1.0f);
    s->head.output = w.Matrix(kEmbd, kVocab);
    s->FinishLoad(file.loader(), {.n_ctx_train = 64});
    stacks.push_back(std::move(s));
  }
  std::vector<std::vector<float>> logits;
  for (const auto& s : stacks) {
    KvGeometry g{.layers = UniformKvWidths(2, 8, 8), .capacity = 64};
    KvMemory a(g, nullptr), b(g, nullptr);
    testing::Pass pass({&a, &b}, {5, 3}, kEmbd, 2, /*last_rows_only=*/true);
    pass.SizeLogits(kVocab);
    s->Forward(*pass);
    logits.push_back(pass.logits(0).values);
    logits.back().insert(logits.back().end(), pass.logits(1).values.begin(), pass.logits(1).values.end());
  }
  ASSERT_EQ(logits[0].size(), 2u * kVocab);
  std::vector<Vec> want = {Vec(logits[0].begin(), logits[0].begin() + kVocab),
                           Vec(logits[0].begin() + kVocab, logits[0].end())};
  testing::ExpectRowsNear(logits[1].data(), want, 1e-6, "wanted rows only");
}

}  // namespace
}  // namespace cairn
