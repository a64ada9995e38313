// The Mamba scans against their closed (quadratic, attention-like) form
// computed in double, and the property the memory relies on: splitting a
// sequence into runs, or the heads/channels between threads, changes no bit.
#include "backends/kernels/ssm.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace cairn {
namespace {

std::vector<float> Random(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Mamba2Case {
  int64_t T = 23, H = 6, P = 5, G = 3, N = 7;
  std::vector<float> x, dt, bc, dt_bias, A, D;
  int64_t bc_stride() const { return 2 * G * N + 3; }  // padded: strides must be honoured
  int64_t x_stride() const { return H * P + 2; }

  // Default dims take the generic path; `tiled` picks head_dim and d_state
  // multiples of 16, the register-tiled path.
  explicit Mamba2Case(uint32_t seed, bool tiled = false) {
    if (tiled) {
      T = 19, H = 4, P = 32, G = 2, N = 32;
    }
    std::mt19937 rng(seed);
    x = Random(T * x_stride(), rng);
    dt = Random(T * H, rng, -3.0f, 1.0f);
    bc = Random(T * bc_stride(), rng);
    dt_bias = Random(H, rng, -1.0f, 1.0f);
    A = Random(H, rng, -2.0f, -0.1f);
    D = Random(H, rng);
  }

  // Runs tokens [t0, t1) and heads [h0, h1) on `state`, writing y rows.
  void Scan(int64_t t0, int64_t t1, int64_t h0, int64_t h1, float* state, float* y) const {
    Mamba2ScanArgs a;
    a.n_tokens = t1 - t0;
    a.n_head = H;
    a.head_dim = P;
    a.n_group = G;
    a.d_state = N;
    a.head_begin = h0;
    a.head_end = h1;
    a.x = x.data() + t0 * x_stride();
    a.x_stride = x_stride();
    a.dt = dt.data() + t0 * H;
    a.dt_stride = H;
    a.B = bc.data() + t0 * bc_stride();
    a.C = a.B + G * N;
    a.bc_stride = bc_stride();
    a.dt_bias = dt_bias.data();
    a.A = A.data();
    a.D = D.data();
    a.state = state;
    a.y = y + t0 * H * P;
    a.y_stride = H * P;
    Mamba2Scan(a);
  }
};

// y_t = sum_{s <= t} (C_t . B_s) exp(sum_{s < r <= t} dt_r A) dt_s x_s + D x_t,
// in double, with no state at all: an independent formulation.
class Mamba2ScanTest : public ::testing::TestWithParam<bool> {};

TEST_P(Mamba2ScanTest, MatchesQuadraticFormInDouble) {
  const Mamba2Case c(1, GetParam());
  std::vector<float> state(c.H * c.N * c.P, 0.0f);
  std::vector<float> y(c.T * c.H * c.P);
  c.Scan(0, c.T, 0, c.H, state.data(), y.data());

  double max_err = 0;
  for (int64_t h = 0; h < c.H; ++h) {
    const int64_t g = h / (c.H / c.G);
    std::vector<double> dts(c.T);
    for (int64_t t = 0; t < c.T; ++t) dts[t] = std::log1p(std::exp(double{c.dt[t * c.H + h]} + c.dt_bias[h]));
    for (int64_t t = 0; t < c.T; ++t) {
      for (int64_t i = 0; i < c.P; ++i) {
        double acc = 0;
        double log_decay = 0;  // sum_{s < r <= t} dt_r A
        for (int64_t s = t; s >= 0; --s) {
          double cb = 0;
          for (int64_t n = 0; n < c.N; ++n) {
            cb += double{c.bc[t * c.bc_stride() + c.G * c.N + g * c.N + n]} * c.bc[s * c.bc_stride() + g * c.N + n];
          }
          acc += cb * std::exp(log_decay) * dts[s] * c.x[s * c.x_stride() + h * c.P + i];
          log_decay += dts[s] * c.A[h];
        }
        acc += double{c.D[h]} * c.x[t * c.x_stride() + h * c.P + i];
        max_err = std::max(max_err, std::fabs(acc - y[t * c.H * c.P + h * c.P + i]));
      }
    }
  }
  EXPECT_LT(max_err, 2e-5);
}

TEST_P(Mamba2ScanTest, RunsAndHeadSplitsAreBitIdentical) {
  const Mamba2Case c(2, GetParam());
  std::vector<float> s_whole(c.H * c.N * c.P, 0.0f), y_whole(c.T * c.H * c.P);
  c.Scan(0, c.T, 0, c.H, s_whole.data(), y_whole.data());

  // Runs of 1, 4 and the rest; heads in two slices (as two threads would).
  std::vector<float> s_split(c.H * c.N * c.P, 0.0f), y_split(c.T * c.H * c.P);
  for (auto [t0, t1] : {std::pair<int64_t, int64_t>{0, 1}, {1, 5}, {5, c.T}}) {
    c.Scan(t0, t1, 0, 2, s_split.data(), y_split.data());
    c.Scan(t0, t1, 2, c.H, s_split.data(), y_split.data());
  }
  EXPECT_EQ(std::memcmp(s_whole.data(), s_split.data(), s_whole.size() * 4), 0);
  EXPECT_EQ(std::memcmp(y_whole.data(), y_split.data(), y_whole.size() * 4), 0);
}

TEST_P(Mamba2ScanTest, ContinuesFromAGivenState) {
  // A state captured midway and restored into a new buffer continues exactly.
  const Mamba2Case c(3, GetParam());
  std::vector<float> s(c.H * c.N * c.P, 0.0f), y(c.T * c.H * c.P);
  c.Scan(0, 9, 0, c.H, s.data(), y.data());
  std::vector<float> copy = s;
  std::vector<float> y2 = y;
  c.Scan(9, c.T, 0, c.H, s.data(), y.data());
  c.Scan(9, c.T, 0, c.H, copy.data(), y2.data());
  EXPECT_EQ(s, copy);
  EXPECT_EQ(y, y2);
}

INSTANTIATE_TEST_SUITE_P(GenericAndTiled, Mamba2ScanTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Tiled" : "Generic"; });

// The register-tiled path (head_dim and d_state multiples of 16) reorders
// the loops but not the arithmetic: it equals the token-by-token reference
// form, written out here, bit for bit.
TEST(Mamba2ScanTiledTest, EqualsTheTokenByTokenFormulaBitForBit) {
  const Mamba2Case c(7, /*tiled=*/true);
  std::vector<float> state(c.H * c.N * c.P, 0.0f), y(c.T * c.H * c.P);
  c.Scan(0, c.T, 0, c.H, state.data(), y.data());
  // The reference form, written out: per token, per state n ascending.
  std::vector<float> ref_state(c.H * c.N * c.P, 0.0f), ref_y(c.T * c.H * c.P);
  for (int64_t h = 0; h < c.H; ++h) {
    const int64_t g = h / (c.H / c.G);
    for (int64_t t = 0; t < c.T; ++t) {
      const float dt = Softplus(c.dt[t * c.H + h] + c.dt_bias[h]);
      const float dA = std::exp(dt * c.A[h]);
      for (int64_t i = 0; i < c.P; ++i) {
        const float xdt = c.x[t * c.x_stride() + h * c.P + i] * dt;
        float acc = 0.0f;
        for (int64_t n = 0; n < c.N; ++n) {
          float& st = ref_state[(h * c.N + n) * c.P + i];
          const float b = c.bc[t * c.bc_stride() + g * c.N + n];
          const float cc = c.bc[t * c.bc_stride() + c.G * c.N + g * c.N + n];
          const float v = st * dA + b * xdt;
          st = v;
          acc += v * cc;
        }
        ref_y[t * c.H * c.P + h * c.P + i] = acc + c.x[t * c.x_stride() + h * c.P + i] * c.D[h];
      }
    }
  }
  EXPECT_EQ(std::memcmp(state.data(), ref_state.data(), state.size() * 4), 0);
  EXPECT_EQ(std::memcmp(y.data(), ref_y.data(), y.size() * 4), 0);
}

TEST(SoftplusTest, MatchesDefinitionAndThreshold) {
  for (float v : {-30.0f, -2.0f, 0.0f, 0.5f, 10.0f, 19.9f}) {
    EXPECT_NEAR(Softplus(v), std::log1p(std::exp(double{v})), 1e-6 * std::max(1.0f, std::fabs(v)));
  }
  EXPECT_EQ(Softplus(20.5f), 20.5f);
  EXPECT_EQ(Softplus(1e30f), 1e30f);  // no overflow to inf
}

struct Mamba1Case {
  int64_t T = 17, Di = 37, N = 6;
  std::vector<float> x, dt, bc, A, D;
  int64_t bc_stride() const { return 2 * N + 4; }
  explicit Mamba1Case(uint32_t seed) {
    std::mt19937 rng(seed);
    x = Random(T * Di, rng);
    dt = Random(T * Di, rng, -3.0f, 1.0f);
    bc = Random(T * bc_stride(), rng);
    A = Random(Di * N, rng, -3.0f, -0.1f);  // GGUF layout [Di][N]
    D = Random(Di, rng);
  }
  void Scan(int64_t t0, int64_t t1, int64_t c0, int64_t c1, const std::vector<float>& A_t, float* state,
            float* y) const {
    Mamba1ScanArgs a;
    a.n_tokens = t1 - t0;
    a.d_inner = Di;
    a.d_state = N;
    a.channel_begin = c0;
    a.channel_end = c1;
    a.x = x.data() + t0 * Di;
    a.x_stride = Di;
    a.dt = dt.data() + t0 * Di;
    a.dt_stride = Di;
    a.B = bc.data() + t0 * bc_stride();
    a.C = a.B + N;
    a.bc_stride = bc_stride();
    a.A_t = A_t.data();
    a.D = D.data();
    a.state = state;
    a.y = y + t0 * Di;
    a.y_stride = Di;
    Mamba1Scan(a);
  }
};

TEST(Mamba1ScanTest, MatchesQuadraticFormInDouble) {
  const Mamba1Case c(4);
  const std::vector<float> A_t = TransposeMamba1A(c.A.data(), c.Di, c.N);
  std::vector<float> state(c.N * c.Di, 0.0f), y(c.T * c.Di);
  c.Scan(0, c.T, 0, c.Di, A_t, state.data(), y.data());
  double max_err = 0;
  for (int64_t ch = 0; ch < c.Di; ++ch) {
    for (int64_t t = 0; t < c.T; ++t) {
      double acc = 0;
      for (int64_t n = 0; n < c.N; ++n) {
        double log_decay = 0;
        for (int64_t s = t; s >= 0; --s) {
          const double dts = std::log1p(std::exp(double{c.dt[s * c.Di + ch]}));
          acc += double{c.bc[t * c.bc_stride() + c.N + n]} * c.bc[s * c.bc_stride() + n] * std::exp(log_decay) * dts *
                 c.x[s * c.Di + ch];
          log_decay += dts * c.A[ch * c.N + n];
        }
      }
      acc += double{c.D[ch]} * c.x[t * c.Di + ch];
      max_err = std::max(max_err, std::fabs(acc - y[t * c.Di + ch]));
    }
  }
  EXPECT_LT(max_err, 2e-5);
}

TEST(Mamba1ScanTest, RunsAndChannelSplitsAreBitIdentical) {
  const Mamba1Case c(5);
  const std::vector<float> A_t = TransposeMamba1A(c.A.data(), c.Di, c.N);
  std::vector<float> s1(c.N * c.Di, 0.0f), y1(c.T * c.Di);
  c.Scan(0, c.T, 0, c.Di, A_t, s1.data(), y1.data());
  std::vector<float> s2(c.N * c.Di, 0.0f), y2(c.T * c.Di);
  for (int64_t t = 0; t < c.T; ++t) {
    c.Scan(t, t + 1, 0, 11, A_t, s2.data(), y2.data());
    c.Scan(t, t + 1, 11, c.Di, A_t, s2.data(), y2.data());
  }
  EXPECT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0);
}

TEST(GroupRmsNormTest, EachGroupUsesItsOwnStatisticsAndWeights) {
  std::mt19937 rng(6);
  const int64_t groups = 3, size = 8;
  std::vector<float> x = Random(groups * size, rng), w = Random(groups * size, rng);
  for (int64_t i = 0; i < size; ++i) x[2 * size + i] *= 100.0f;  // one loud group
  std::vector<float> out(x.size());
  GroupRmsNorm(x.data(), groups, size, w.data(), 1e-5f, out.data());
  for (int64_t g = 0; g < groups; ++g) {
    double ss = 0;
    for (int64_t i = 0; i < size; ++i) ss += double{x[g * size + i]} * x[g * size + i];
    const double scale = 1.0 / std::sqrt(ss / size + 1e-5);
    for (int64_t i = 0; i < size; ++i) {
      const int64_t k = g * size + i;
      EXPECT_NEAR(out[k], x[k] * scale * w[k], 1e-5) << "group " << g;
    }
  }
  // In place gives the same.
  std::vector<float> inplace = x;
  GroupRmsNorm(inplace.data(), groups, size, w.data(), 1e-5f, inplace.data());
  EXPECT_EQ(inplace, out);
}

}  // namespace
}  // namespace cairn
