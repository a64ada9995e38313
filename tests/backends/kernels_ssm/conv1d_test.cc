// Causal depthwise conv1d: the definition (zero history), carried state
// across runs of any length, and channel slicing.
#include "backends/kernels/conv1d.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace cairn {
namespace {

struct ConvCase {
  int64_t T = 13, Ch = 19;
  int K = 4;
  int64_t x_stride = 23;  // wider than Ch: a slice of a projection
  std::vector<float> x, w_gguf, w, bias;
  explicit ConvCase(uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    x.resize(T * x_stride);
    for (float& v : x) v = d(rng);
    w_gguf.resize(Ch * K);
    for (float& v : w_gguf) v = d(rng);
    bias.resize(Ch);
    for (float& v : bias) v = d(rng);
    w = TransposeConvWeight(w_gguf.data(), K, Ch);
  }
  void Conv(int64_t t0, int64_t t1, int64_t c0, int64_t c1, float* state, float* y, Conv1dActivation act) const {
    Conv1dArgs a;
    a.n_tokens = t1 - t0;
    a.n_channels = c1 - c0;
    a.d_conv = K;
    a.x = x.data() + t0 * x_stride + c0;
    a.x_stride = x_stride;
    a.y = y + t0 * Ch + c0;
    a.y_stride = Ch;
    a.state = state + c0;
    a.state_stride = Ch;
    a.weight = w.data() + c0;
    a.weight_stride = Ch;
    a.bias = bias.data() + c0;
    a.activation = act;
    CausalConv1d(a);
  }
};

TEST(CausalConv1dTest, MatchesDefinitionWithZeroHistory) {
  const ConvCase c(1);
  std::vector<float> state((c.K - 1) * c.Ch, 0.0f), y(c.T * c.Ch);
  c.Conv(0, c.T, 0, c.Ch, state.data(), y.data(), Conv1dActivation::kSilu);
  for (int64_t t = 0; t < c.T; ++t) {
    for (int64_t ch = 0; ch < c.Ch; ++ch) {
      double acc = c.bias[ch];
      for (int k = 0; k < c.K; ++k) {
        const int64_t j = t - (c.K - 1) + k;
        if (j >= 0) acc += double{c.x[j * c.x_stride + ch]} * c.w_gguf[ch * c.K + k];
      }
      const double expected = acc / (1.0 + std::exp(-acc));
      EXPECT_NEAR(y[t * c.Ch + ch], expected, 1e-5) << "t=" << t << " ch=" << ch;
    }
  }
  // The state holds the last K-1 inputs, oldest first.
  for (int r = 0; r < c.K - 1; ++r) {
    for (int64_t ch = 0; ch < c.Ch; ++ch) {
      EXPECT_EQ(state[r * c.Ch + ch], c.x[(c.T - (c.K - 1) + r) * c.x_stride + ch]);
    }
  }
}

TEST(CausalConv1dTest, RunsOfAnyLengthAndChannelSlicesAreBitIdentical) {
  const ConvCase c(2);
  std::vector<float> s1((c.K - 1) * c.Ch, 0.0f), y1(c.T * c.Ch);
  c.Conv(0, c.T, 0, c.Ch, s1.data(), y1.data(), Conv1dActivation::kNone);
  // Runs shorter than the history (1, 2) and longer (7), channels in two slices.
  std::vector<float> s2((c.K - 1) * c.Ch, 0.0f), y2(c.T * c.Ch);
  for (auto [t0, t1] : {std::pair<int64_t, int64_t>{0, 1}, {1, 3}, {3, 4}, {4, 11}, {11, 12}, {12, c.T}}) {
    c.Conv(t0, t1, 0, 8, s2.data(), y2.data(), Conv1dActivation::kNone);
    c.Conv(t0, t1, 8, c.Ch, s2.data(), y2.data(), Conv1dActivation::kNone);
  }
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0);
  EXPECT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * 4), 0);
}

TEST(CausalConv1dTest, KernelWidthOneHasNoState) {
  ConvCase c(3);
  c.K = 1;
  c.w = TransposeConvWeight(c.w_gguf.data(), 1, c.Ch);  // first Ch weights, one tap each
  std::vector<float> y(c.T * c.Ch);
  c.Conv(0, c.T, 0, c.Ch, nullptr, y.data(), Conv1dActivation::kNone);
  for (int64_t t = 0; t < c.T; ++t) {
    for (int64_t ch = 0; ch < c.Ch; ++ch) {
      EXPECT_NEAR(y[t * c.Ch + ch], double{c.x[t * c.x_stride + ch]} * c.w_gguf[ch] + c.bias[ch], 1e-6);
    }
  }
}

}  // namespace
}  // namespace cairn
