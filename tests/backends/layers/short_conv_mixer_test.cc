// LFM2's gated short convolution against its definition, token by token:
// [B | C | h] = in_proj(x), a causal depthwise conv of B * h (no bias, no
// activation), times C, out-projected; each sequence carrying its state.
#include "backends/layers/short_conv_mixer.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/backends/layers/mixer_test_util.h"

namespace cairn {
namespace {

using testing::Vec;

class ShortConv {
 public:
  explicit ShortConv(uint64_t seed) : w_(seed) {
    m_.in_proj = w_.Matrix(g_.n_embd, 3 * g_.n_embd, 2.0f);
    m_.out_proj = w_.Matrix(g_.n_embd, g_.n_embd);
    m_.conv_weight = w_.Random(g_.l_cache * g_.n_embd, -1.0f, 1.0f);  // tap-major
  }
  int64_t n_embd() const { return g_.n_embd; }
  int64_t conv_floats() const { return g_.conv_state_floats(); }
  int64_t state_floats() const { return 0; }  // a conv state alone
  void Forward(ForwardPass& p, const float* xn, float* out) const {
    ShortConvForward(g_, m_, p.RecurrentRuns(0), xn, p.n_rows(), out, p.pool(), p.precision(), p.buffers());
  }

  // One sequence, token by token.
  class Sequence {
   public:
    explicit Sequence(const ShortConv& m) : mixer_(m), conv_(m.g_.l_cache, m.g_.n_embd) {}
    Vec Row(const Vec& x) {
      const Vec bcx = testing::Mul(mixer_.m_.in_proj, x);
      const int64_t E = mixer_.g_.n_embd;
      Vec u(static_cast<size_t>(E));
      for (int64_t c = 0; c < E; ++c) u[c] = bcx[c] * bcx[2 * E + c];
      Vec v = conv_.Push(u, mixer_.m_.conv_weight);
      for (int64_t c = 0; c < E; ++c) v[c] *= bcx[E + c];
      return testing::Mul(mixer_.m_.out_proj, v);
    }

   private:
    const ShortConv& mixer_;
    testing::ConvWindow conv_;
  };

 private:
  ShortConvGeometry g_{.n_embd = 16, .l_cache = 3};
  testing::Weights w_;
  ShortConvWeights m_;
};

TEST(ShortConvMixerTest, MatchesTheSequentialDefinition) {
  testing::ExpectMixerMatches(ShortConv(31), {{5, 1}, {1, 1}, {1, 4}}, "short conv");
}

}  // namespace
}  // namespace cairn
