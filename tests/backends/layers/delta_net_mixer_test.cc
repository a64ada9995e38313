// The Gated DeltaNet mixer against its definition, token by token in double
// precision, in both layouts: fused QKV through a causal conv with silu, q
// and k L2-normalized per head, beta = sigmoid, decay = exp(softplus(alpha +
// dt_bias) * a), the delta rule per value head (qwen35: key head h mod H_k;
// qwen3next: h / (H_v / H_k), beta and alpha from one ssm_ba), the output
// RMS-normalized per head, gated by silu(z) and out-projected.
#include "backends/layers/delta_net_mixer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/backends/layers/mixer_test_util.h"

namespace cairn {
namespace {

using testing::Vec;

constexpr float kEps = 1e-6f;

class DeltaNet {
 public:
  DeltaNet(DeltaNetVariant variant, uint64_t seed) : w_(seed) {
    g_.variant = variant;
    m_.qkv = w_.Matrix(g_.n_embd, g_.conv_channels(), 2.0f);
    m_.z = w_.Matrix(g_.n_embd, g_.value_dim());
    if (variant == DeltaNetVariant::kQwen35) {
      m_.beta = w_.Matrix(g_.n_embd, g_.n_head_v);
      m_.alpha = w_.Matrix(g_.n_embd, g_.n_head_v);
    } else {
      m_.ba = w_.Matrix(g_.n_embd, 2 * g_.n_head_v);
    }
    m_.out = w_.Matrix(g_.value_dim(), g_.n_embd);
    m_.conv_weight = w_.Random(g_.d_conv * g_.conv_channels(), -0.5f, 0.5f);  // tap-major
    m_.dt_bias = w_.Random(g_.n_head_v, -1.0f, 1.0f);
    m_.a = w_.Random(g_.n_head_v, -2.0f, -0.5f);
    m_.norm = w_.Random(g_.d_v, 0.5f, 1.5f);
  }
  int64_t n_embd() const { return g_.n_embd; }
  int64_t conv_floats() const { return g_.conv_state_floats(); }
  int64_t state_floats() const { return g_.state_floats(); }
  void Forward(ForwardPass& p, const float* xn, float* out) const {
    DeltaNetForward(g_, m_, kEps, p.RecurrentRuns(0), xn, p.n_rows(), out, p.pool(), p.precision(), p.buffers());
  }

  // One sequence, token by token; its state is [value head][d_v][d_k].
  struct Sequence : testing::SequenceState<DeltaNetGeometry, DeltaNetWeights> {
    explicit Sequence(const DeltaNet& m)
        : SequenceState(m.g_, m.m_, m.g_.conv_channels(), m.g_.n_head_v * m.g_.d_v * m.g_.d_k) {}
    Vec Row(const Vec& x);
    // beta and alpha of every value head (qwen3next: from one ssm_ba laid out
    // per key head as [betas of its value heads | their alphas]).
    void Gates(const Vec& x, Vec& beta, Vec& alpha) const;
  };

 private:
  DeltaNetGeometry g_{.n_embd = 16, .d_conv = 4, .n_head_k = 2, .n_head_v = 4, .d_k = 8, .d_v = 8};
  testing::Weights w_;
  DeltaNetWeights m_;
};

void DeltaNet::Sequence::Gates(const Vec& x, Vec& beta, Vec& alpha) const {
  if (g.variant == DeltaNetVariant::kQwen35) {
    beta = testing::Mul(w.beta, x);
    alpha = testing::Mul(w.alpha, x);
    return;
  }
  const int64_t ratio = g.n_head_v / g.n_head_k;
  const Vec ba = testing::Mul(w.ba, x);
  beta.resize(static_cast<size_t>(g.n_head_v));
  alpha.resize(static_cast<size_t>(g.n_head_v));
  for (int64_t h = 0; h < g.n_head_v; ++h) {
    beta[h] = ba[(h / ratio) * 2 * ratio + h % ratio];
    alpha[h] = ba[(h / ratio) * 2 * ratio + ratio + h % ratio];
  }
}

Vec DeltaNet::Sequence::Row(const Vec& x) {
  const int64_t Hk = g.n_head_k, Hv = g.n_head_v, dk = g.d_k, dv = g.d_v, ratio = Hv / Hk;
  Vec qkv = conv.Push(testing::Mul(w.qkv, x), w.conv_weight);
  for (double& c : qkv) c = testing::SiluD(c);
  for (int64_t h = 0; h < 2 * Hk; ++h) {  // q heads then k heads
    double ss = 0;
    for (int64_t i = 0; i < dk; ++i) ss += qkv[h * dk + i] * qkv[h * dk + i];
    const double inv = 1.0 / std::max(std::sqrt(ss), static_cast<double>(kEps));
    for (int64_t i = 0; i < dk; ++i) qkv[h * dk + i] *= inv;
  }
  Vec beta, alpha;
  Gates(x, beta, alpha);
  const Vec z = testing::Mul(w.z, x);
  Vec o(static_cast<size_t>(Hv * dv));
  for (int64_t h = 0; h < Hv; ++h) {
    const int64_t kh = g.variant == DeltaNetVariant::kQwen35 ? h % Hk : h / ratio;
    const double* q = &qkv[kh * dk];
    const double* k = &qkv[(Hk + kh) * dk];
    const double* v = &qkv[2 * Hk * dk + h * dv];
    const double b = testing::SigmoidD(beta[h]);
    const double decay = std::exp(testing::SoftplusD(alpha[h] + w.dt_bias[h]) * w.a[h]);
    double* S = &state[h * dv * dk];
    for (int64_t r = 0; r < dv; ++r) {
      double sk = 0;
      for (int64_t i = 0; i < dk; ++i) sk += (S[r * dk + i] *= decay) * k[i];
      const double delta = b * (v[r] - sk);
      double sq = 0;
      for (int64_t i = 0; i < dk; ++i) sq += (S[r * dk + i] += delta * k[i]) * q[i];
      o[h * dv + r] = sq / std::sqrt(static_cast<double>(dk));
    }
    testing::RmsNormD(o, h * dv, dv, w.norm, kEps);
    for (int64_t r = 0; r < dv; ++r) o[h * dv + r] *= testing::SiluD(z[h * dv + r]);
  }
  return testing::Mul(w.out, o);
}

TEST(DeltaNetMixerTest, Qwen35LayoutMatchesTheSequentialDefinition) {
  testing::ExpectMixerMatches(DeltaNet(DeltaNetVariant::kQwen35, 41), {{7, 2}, {1, 1}, {3, 1}}, "qwen35 layout");
}

TEST(DeltaNetMixerTest, Qwen3NextLayoutMatchesTheSequentialDefinition) {
  testing::ExpectMixerMatches(DeltaNet(DeltaNetVariant::kQwen3Next, 42), {{7, 2}, {1, 1}, {3, 1}}, "qwen3next layout");
}

}  // namespace
}  // namespace cairn
