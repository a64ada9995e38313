// AttentionForward against attention written out in double precision: GQA
// heads over each sequence's own rows (several sequences in one pass, and a
// second pass reading the K/V rows the first stored), RoPE, biases, per-head
// q/k norms, gates, sinks, soft caps, and a sliding window over a ring.
#include "backends/layers/attention.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "backends/memory/kv_memory.h"
#include "backends/memory/swa_memory.h"
#include "gtest/gtest.h"
#include "tests/backends/layers/block_test_util.h"

namespace cairn {
namespace {

using testing::Vec;

constexpr int64_t kEmbd = 32;
constexpr int32_t kHeads = 4, kKvHeads = 2, kHeadDim = 8;

AttentionBlock Block(testing::Weights& w, bool gated) {
  AttentionBlock b;
  b.n_head = kHeads;
  b.n_head_kv = kKvHeads;
  b.head_dim_k = kHeadDim;
  b.head_dim_v = kHeadDim;
  b.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  b.gated = gated;
  b.wq = w.Matrix(kEmbd, b.q_dim() * (gated ? 2 : 1), 2.0f);
  b.wk = w.Matrix(kEmbd, b.k_dim(), 2.0f);
  b.wv = w.Matrix(kEmbd, b.v_dim());
  b.wo = w.Matrix(b.o_dim(), kEmbd);
  return b;
}

// NORMAL RoPE of each head of x at position p: pairs (2i, 2i+1) by
// p * base^(-2i / head_dim).
void RopeD(Vec& x, int32_t heads, int64_t p, double base) {
  for (int32_t h = 0; h < heads; ++h) {
    for (int32_t i = 0; i < kHeadDim / 2; ++i) {
      const double theta = static_cast<double>(p) * std::pow(base, -2.0 * i / kHeadDim);
      double& a = x[h * kHeadDim + 2 * i];
      double& c = x[h * kHeadDim + 2 * i + 1];
      const double a0 = a, c0 = c;
      a = a0 * std::cos(theta) - c0 * std::sin(theta);
      c = a0 * std::sin(theta) + c0 * std::cos(theta);
    }
  }
}

// The block on one sequence, row by row, keeping its keys and values.
class Reference {
 public:
  Reference(const AttentionBlock& b, double rope_base) : b_(b), rope_base_(rope_base) {}

  Vec Row(const Vec& x) {
    const int64_t p = static_cast<int64_t>(k_.size());
    const int64_t q_full = b_.q_dim() * (b_.gated ? 2 : 1);
    Vec qf = testing::Mul(b_.wq, x), k = testing::Mul(b_.wk, x), v = testing::Mul(b_.wv, x);
    for (int64_t i = 0; i < q_full && !b_.bq.empty(); ++i) qf[i] += b_.bq[i];
    for (int64_t i = 0; i < b_.k_dim() && !b_.bk.empty(); ++i) k[i] += b_.bk[i];
    Vec q(static_cast<size_t>(b_.q_dim())), gate(static_cast<size_t>(b_.q_dim()));
    for (int32_t h = 0; h < kHeads; ++h) {
      for (int32_t d = 0; d < kHeadDim; ++d) {
        q[h * kHeadDim + d] = b_.gated ? qf[2 * h * kHeadDim + d] : qf[h * kHeadDim + d];
        if (b_.gated) gate[h * kHeadDim + d] = qf[(2 * h + 1) * kHeadDim + d];
      }
    }
    if (!b_.q_norm.empty()) {
      for (int32_t h = 0; h < kHeads; ++h) testing::RmsNormD(q, h * kHeadDim, kHeadDim, b_.q_norm, b_.norm_eps);
      for (int32_t h = 0; h < kKvHeads; ++h) testing::RmsNormD(k, h * kHeadDim, kHeadDim, b_.k_norm, b_.norm_eps);
    }
    if (b_.rope != nullptr) {
      RopeD(q, kHeads, p, rope_base_);
      RopeD(k, kKvHeads, p, rope_base_);
    }
    k_.push_back(k);
    v_.push_back(v);
    Vec o(static_cast<size_t>(b_.o_dim()), 0.0);
    for (int32_t h = 0; h < kHeads; ++h) {
      const int32_t hk = h / (kHeads / kKvHeads);
      const int64_t first = b_.window > 0 ? std::max<int64_t>(0, p - b_.window + 1) : 0;
      std::vector<double> s;
      for (int64_t j = first; j <= p; ++j) {
        double d = 0;
        for (int32_t c = 0; c < kHeadDim; ++c) d += q[h * kHeadDim + c] * k_[j][hk * kHeadDim + c];
        d *= b_.scale;
        if (b_.softcap > 0) d = b_.softcap * std::tanh(d / b_.softcap);
        s.push_back(d);
      }
      double mx = *std::max_element(s.begin(), s.end());
      if (!b_.sinks.empty()) mx = std::max(mx, static_cast<double>(b_.sinks[h]));
      double sum = b_.sinks.empty() ? 0.0 : std::exp(b_.sinks[h] - mx);
      for (double x_s : s) sum += std::exp(x_s - mx);
      for (int64_t j = first; j <= p; ++j) {
        const double pj = std::exp(s[j - first] - mx) / sum;
        for (int32_t c = 0; c < kHeadDim; ++c) o[h * kHeadDim + c] += pj * v_[j][hk * kHeadDim + c];
      }
    }
    for (int64_t i = 0; i < b_.o_dim() && b_.gated; ++i) o[i] *= testing::SigmoidD(gate[i]);
    Vec out = testing::Mul(b_.wo, o);
    for (int64_t i = 0; i < kEmbd && !b_.bo.empty(); ++i) out[i] += b_.bo[i];
    return out;
  }

 private:
  const AttentionBlock& b_;
  double rope_base_;
  std::vector<Vec> k_, v_;
};

KvGeometry Geometry() {
  KvGeometry g;
  g.layers = UniformKvWidths(1, kKvHeads * kHeadDim, kKvHeads * kHeadDim);
  g.capacity = 64;
  return g;
}

// Runs `block` over passes of rows[pass][seq] rows per sequence and checks
// every output row against the reference.
void ExpectMatchesReference(const AttentionBlock& block, std::vector<std::unique_ptr<LayerMemory>>& memories,
                            const std::vector<std::vector<int64_t>>& passes, double rope_base, const char* what) {
  std::vector<Reference> refs(memories.size(), Reference(block, rope_base));
  std::vector<LayerMemory*> mems;
  for (auto& m : memories) mems.push_back(m.get());
  uint64_t seed = 100;
  for (const std::vector<int64_t>& rows : passes) {
    testing::Pass pass(mems, rows, kEmbd);
    const std::vector<float> xn = testing::RandomRows(pass.n_rows(), kEmbd, seed++);
    std::vector<float> out(static_cast<size_t>(pass.n_rows() * kEmbd));
    AttentionForward(block, *pass, 0, xn.data(), out.data());
    for (size_t s = 0; s < rows.size(); ++s) {
      std::vector<Vec> want;
      for (int64_t i = 0; i < rows[s]; ++i) want.push_back(refs[s].Row(testing::Row(xn, pass.first_row(s) + i, kEmbd)));
      testing::ExpectRowsNear(&out[pass.first_row(s) * kEmbd], want, 1e-5, what);
    }
    pass.Commit();
  }
}

TEST(AttentionTest, GqaWithRopeOverEachSequencesOwnRows) {
  testing::Weights w;
  AttentionBlock b = Block(w, false);
  PositionEncoding rope;
  rope.params.type = RopeType::kNormal;
  rope.params.n_dims = kHeadDim;
  rope.params.freq_base = 100.0f;
  b.rope = &rope;
  b.bq = w.Random(b.q_dim(), -0.5f, 0.5f);
  b.bk = w.Random(b.k_dim(), -0.5f, 0.5f);
  std::vector<std::unique_ptr<LayerMemory>> memories;
  for (int i = 0; i < 3; ++i) memories.push_back(std::make_unique<KvMemory>(Geometry(), nullptr));
  // Three sequences of different lengths in one pass (9 rows: the batched
  // kernel), then one row each (decode), then a mixed pass.
  ExpectMatchesReference(b, memories, {{5, 1, 3}, {1, 1, 1}, {2, 9, 1}}, 100.0, "gqa+rope");
}

TEST(AttentionTest, GatesNormsSinksSoftcapAndOutputBias) {
  testing::Weights w(2);
  AttentionBlock b = Block(w, /*gated=*/true);
  b.q_norm = w.Random(kHeadDim, 0.5f, 1.5f);
  b.k_norm = w.Random(kHeadDim, 0.5f, 1.5f);
  b.sinks = w.Random(kHeads, -1.0f, 1.0f);
  b.softcap = 1.5f;
  b.bo = w.Random(kEmbd, -0.5f, 0.5f);
  std::vector<std::unique_ptr<LayerMemory>> memories;
  for (int i = 0; i < 2; ++i) memories.push_back(std::make_unique<KvMemory>(Geometry(), nullptr));
  ExpectMatchesReference(b, memories, {{10, 4}, {1, 1}}, 0.0, "gated+norms+sinks+softcap");
}

// A sliding-window layer (window 3) over a ring of 5 rows: runs shorter and
// longer than the ring's slack, the window visible in each.
TEST(AttentionTest, SlidingWindowOverARing) {
  testing::Weights w(3);
  AttentionBlock b = Block(w, false);
  b.window = 3;
  SwaGeometry g;
  g.local = UniformKvWidths(1, kKvHeads * kHeadDim, kKvHeads * kHeadDim);
  g.capacity = 64;
  g.window = 3;
  g.ring_rows = 5;
  std::vector<std::unique_ptr<LayerMemory>> memories;
  for (int i = 0; i < 2; ++i) memories.push_back(std::make_unique<SwaMemory>(g, nullptr));
  ExpectMatchesReference(b, memories, {{2, 7}, {1, 1}, {6, 2}, {1, 1}}, 0.0, "window");
}

// The last layer of a model may attend with the wanted rows only: the same
// values as those rows of a full call.
TEST(AttentionTest, WantedRowsEqualThoseRowsOfAFullCall) {
  testing::Weights w(4);
  const AttentionBlock b = Block(w, false);
  KvMemory full_memory(Geometry(), nullptr), wanted_memory(Geometry(), nullptr);
  testing::Pass full({&full_memory}, {6}, kEmbd), wanted({&wanted_memory}, {6}, kEmbd);
  const std::vector<float> xn = testing::RandomRows(6, kEmbd, 7);
  std::vector<float> all(6 * kEmbd), some(6 * kEmbd);
  AttentionForward(b, *full, 0, xn.data(), all.data());
  AttentionForward(b, *wanted, 0, xn.data(), some.data(), QueryRows::kWanted);
  // Every row is wanted in a testing::Pass.
  EXPECT_EQ(all, some);
}

}  // namespace
}  // namespace cairn
