// The Mamba-2 mixer against its definition, token by token in double
// precision: in-projection to z | xBC | dt, causal conv of xBC with bias and
// silu, the multi-head selective scan with groups of B and C, the skip D,
// the silu(z) gate, the grouped RMSNorm and the out-projection. Several
// sequences per pass, each continuing from its own state.
#include "backends/layers/mamba_mixer.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/backends/layers/mixer_test_util.h"

namespace cairn {
namespace {

using testing::Vec;

class Mamba2 {
 public:
  explicit Mamba2(uint64_t seed) : w_(seed) {
    m_.in_proj = w_.Matrix(g_.n_embd, g_.in_proj_size(), 2.0f);
    m_.out_proj = w_.Matrix(g_.d_inner, g_.n_embd);
    m_.conv_weight = w_.Random(g_.d_conv * g_.conv_channels(), -0.5f, 0.5f);  // tap-major
    m_.conv_bias = w_.Random(g_.conv_channels(), -0.1f, 0.1f);
    m_.dt_bias = w_.Random(g_.n_head, -3.0f, -1.0f);
    m_.A = w_.Random(g_.n_head, -4.0f, -1.0f);
    m_.D = w_.Random(g_.n_head, 0.5f, 1.5f);
    m_.norm = w_.Random(g_.d_inner, 0.5f, 1.5f);
  }
  int64_t n_embd() const { return g_.n_embd; }
  int64_t conv_floats() const { return g_.conv_state_floats(); }
  int64_t state_floats() const { return g_.ssm_state_floats(); }
  void Forward(ForwardPass& p, const float* xn, float* out) const {
    MambaMixerForward(g_, m_, p.RecurrentRuns(0), xn, p.n_rows(), out, p.pool(), p.precision(), p.buffers());
  }

  // One sequence, token by token; its state is [head][state][head dim].
  struct Sequence : testing::SequenceState<MambaGeometry, MambaMixerWeights> {
    explicit Sequence(const Mamba2& m)
        : SequenceState(m.g_, m.m_, m.g_.conv_channels(), m.g_.n_head * m.g_.d_state * m.g_.head_dim) {}
    Vec Row(const Vec& x);
  };

 private:
  MambaGeometry g_{.version = MambaVersion::kMamba2,
                   .n_embd = 16,
                   .d_conv = 4,
                   .d_inner = 32,
                   .d_state = 8,
                   .n_head = 4,
                   .head_dim = 8,
                   .n_group = 2};
  testing::Weights w_;
  MambaMixerWeights m_;
};

Vec Mamba2::Sequence::Row(const Vec& x) {
  const Vec proj = testing::Mul(w.in_proj, x);
  const int64_t D = g.d_inner, N = g.d_state, P = g.head_dim, GN = g.n_group * N;
  Vec xbc = conv.Push(Vec(proj.begin() + D, proj.begin() + D + g.conv_channels()), w.conv_weight);
  for (size_t c = 0; c < xbc.size(); ++c) xbc[c] = testing::SiluD(xbc[c] + w.conv_bias[c]);
  Vec y(static_cast<size_t>(D));
  for (int64_t h = 0; h < g.n_head; ++h) {
    const int64_t grp = h / (g.n_head / g.n_group);
    const double dt = testing::SoftplusD(proj[D + g.conv_channels() + h] + w.dt_bias[h]);
    const double decay = std::exp(dt * w.A[h]);
    for (int64_t i = 0; i < P; ++i) {
      const double xi = xbc[h * P + i];
      double acc = 0;
      for (int64_t n = 0; n < N; ++n) {
        double& s = state[(h * N + n) * P + i];
        s = s * decay + xbc[D + grp * N + n] * xi * dt;
        acc += s * xbc[D + GN + grp * N + n];
      }
      y[h * P + i] = (acc + xi * w.D[h]) * testing::SiluD(proj[h * P + i]);
    }
  }
  const int64_t group = D / g.n_group;
  for (int64_t grp = 0; grp < g.n_group; ++grp) {
    const std::vector<float> weight(w.norm.begin() + grp * group, w.norm.begin() + (grp + 1) * group);
    testing::RmsNormD(y, grp * group, group, weight, g.rms_eps);
  }
  return testing::Mul(w.out_proj, y);
}

TEST(MambaMixerTest, Mamba2MatchesTheSequentialDefinition) {
  testing::ExpectMixerMatches(Mamba2(21), {{6, 1, 3}, {1, 1, 1}, {2, 5, 1}}, "mamba2");
}

}  // namespace
}  // namespace cairn
