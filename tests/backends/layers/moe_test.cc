// The mixture-of-experts block against its definition in double precision,
// in the three router kinds of the architectures: softmax with renormalized
// weights and a gated shared expert (qwen), sigmoid with a selection bias, a
// scale and an ungated shared MLP (nemotron_h), softmax over the chosen
// logits with router and expert biases (gpt-oss).
#include "backends/layers/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "backends/memory/kv_memory.h"
#include "gtest/gtest.h"
#include "tests/backends/layers/block_test_util.h"

namespace cairn {
namespace {

using testing::Vec;

constexpr int64_t kEmbd = 16, kFf = 12, kExperts = 6, kUsed = 2, kRows = 11;

double Act(FfnActivation a, double g) {
  switch (a) {
    case FfnActivation::kSilu:
      return testing::SiluD(g);
    case FfnActivation::kReluSquared:
      return std::max(g, 0.0) * std::max(g, 0.0);
    case FfnActivation::kSwigluOai: {
      const double c = std::min(g, 7.0);
      return c * testing::SigmoidD(1.702 * c);
    }
    case FfnActivation::kGelu:
      break;
  }
  return 0;
}

// One expert slice of a stack, with its bias.
Vec Expert(const ExpertMatrices& m, int64_t e, const Vec& x) {
  Vec y(static_cast<size_t>(m.n_out), 0.0);
  const float* w = reinterpret_cast<const float*>(m.expert(e).data);
  for (int64_t o = 0; o < m.n_out; ++o) {
    for (int64_t i = 0; i < m.n_in; ++i) y[o] += static_cast<double>(w[o * m.n_in + i]) * x[i];
    if (!m.bias.empty()) y[o] += m.bias[e * m.n_out + o];
  }
  return y;
}

Vec ExpertFfn(const MoeBlock& m, int64_t e, const Vec& x) {
  const Vec up = Expert(m.up, e, x);
  Vec h(up.size());
  const bool gated = m.gate.data != nullptr;
  const Vec gate = gated ? Expert(m.gate, e, x) : Vec();
  for (size_t i = 0; i < up.size(); ++i) {
    if (!gated) {
      h[i] = Act(m.activation, up[i]);
    } else if (m.activation == FfnActivation::kSwigluOai) {
      h[i] = Act(m.activation, gate[i]) * (std::clamp(up[i], -7.0, 7.0) + 1.0);
    } else {
      h[i] = Act(m.activation, gate[i]) * up[i];
    }
  }
  return Expert(m.down, e, h);
}

// The block's contract (moe.h), one row.
Vec MoeD(const MoeBlock& m, const Vec& x) {
  Vec logits = testing::Mul(m.router, x);
  for (int64_t e = 0; e < kExperts && !m.router_bias.empty(); ++e) logits[e] += m.router_bias[e];
  Vec probs = logits;
  if (m.gating == RouterGating::kSoftmax) {
    const double mx = *std::max_element(probs.begin(), probs.end());
    double sum = 0;
    for (double& p : probs) sum += (p = std::exp(p - mx));
    for (double& p : probs) p /= sum;
  } else if (m.gating == RouterGating::kSigmoid) {
    for (double& p : probs) p = testing::SigmoidD(p);
  }
  Vec selection = probs;
  for (int64_t e = 0; e < kExperts && !m.selection_bias.empty(); ++e) selection[e] += m.selection_bias[e];
  std::vector<int64_t> order(kExperts);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return selection[a] > selection[b]; });
  Vec w(kUsed);
  for (int64_t k = 0; k < kUsed; ++k) w[k] = probs[order[k]];
  if (m.gating == RouterGating::kSoftmaxOfChosen) {
    const double mx = *std::max_element(w.begin(), w.end());
    double sum = 0;
    for (double& v : w) sum += (v = std::exp(v - mx));
    for (double& v : w) v /= sum;
  }
  if (m.normalize) {
    const double sum = std::accumulate(w.begin(), w.end(), 0.0);
    for (double& v : w) v /= sum;
  }
  if (m.scale != 0.0f) {
    for (double& v : w) v *= m.scale;
  }
  Vec out(static_cast<size_t>(kEmbd), 0.0);
  for (int64_t k = 0; k < kUsed; ++k) {
    const Vec y = ExpertFfn(m, order[k], x);
    for (int64_t i = 0; i < kEmbd; ++i) out[i] += w[k] * y[i];
  }
  if (m.shared.n_ff == 0) return out;
  const bool gated = m.shared.gate.n_out > 0;
  const Vec up = testing::Mul(m.shared.up, x), gate = gated ? testing::Mul(m.shared.gate, x) : Vec();
  Vec h(up.size());
  for (size_t i = 0; i < up.size(); ++i) h[i] = gated ? Act(m.activation, gate[i]) * up[i] : Act(m.activation, up[i]);
  const Vec sh = testing::Mul(m.shared.down, h);
  double s = 1.0;
  if (!m.shared_gate.empty()) {
    double d = 0;
    for (int64_t i = 0; i < kEmbd; ++i) d += m.shared_gate[i] * x[i];
    s = testing::SigmoidD(d);
  }
  for (int64_t i = 0; i < kEmbd; ++i) out[i] += s * sh[i];
  return out;
}

ExpertMatrices Experts(testing::Weights& w, int64_t n_in, int64_t n_out, bool bias) {
  ExpertMatrices m;
  const WeightMatrix all = w.Matrix(n_in, n_out * kExperts, 3.0f);
  m.n_in = n_in;
  m.n_out = n_out;
  m.data = all.data;
  if (bias) m.bias = w.Random(n_out * kExperts, -0.5f, 0.5f);
  return m;
}

// How a block routes (the biases drawn when asked for).
struct Routing {
  RouterGating gating = RouterGating::kSoftmax;
  bool normalize = false;
  float scale = 0.0f;
  bool router_bias = false;
  bool selection_bias = false;  // large enough to make the choice differ from the weights
};

MoeBlock Moe(testing::Weights& w, const Routing& routing, FfnActivation activation, bool gated, bool biases) {
  MoeBlock m;
  m.n_expert = kExperts;
  m.n_used = kUsed;
  m.gating = routing.gating;
  m.normalize = routing.normalize;
  m.scale = routing.scale;
  m.activation = activation;
  m.router = w.Matrix(kEmbd, kExperts, 4.0f);
  if (routing.router_bias) m.router_bias = w.Random(kExperts, -1.0f, 1.0f);
  if (routing.selection_bias) m.selection_bias = w.Random(kExperts, -0.5f, 0.5f);
  if (gated) m.gate = Experts(w, kEmbd, kFf, biases);
  m.up = Experts(w, kEmbd, kFf, biases);
  m.down = Experts(w, kFf, kEmbd, biases);
  return m;
}

FfnBlock SharedExpert(testing::Weights& w, FfnActivation activation, int64_t n_ff, bool gated) {
  FfnBlock f;
  f.activation = activation;
  f.n_ff = n_ff;
  if (gated) f.gate = w.Matrix(kEmbd, n_ff);
  f.up = w.Matrix(kEmbd, n_ff);
  f.down = w.Matrix(n_ff, kEmbd);
  return f;
}

void ExpectMatches(const MoeBlock& m, const char* what) {
  KvGeometry g;
  g.capacity = 64;
  KvMemory a(g, nullptr), b(g, nullptr);
  testing::Pass pass({&a, &b}, {kRows - 1, 1}, kEmbd);  // a prompt and a decode row
  const std::vector<float> xn = testing::RandomRows(kRows, kEmbd, 5);
  std::vector<float> out(kRows * kEmbd);
  MoeForward(m, *pass, xn.data(), out.data());
  std::vector<Vec> want;
  for (int64_t r = 0; r < kRows; ++r) want.push_back(MoeD(m, testing::Row(xn, r, kEmbd)));
  testing::ExpectRowsNear(out.data(), want, 1e-5, what);
}

TEST(MoeTest, SoftmaxRenormalizedWithAGatedSharedExpert) {
  testing::Weights w(11);
  MoeBlock m = Moe(w, {.gating = RouterGating::kSoftmax, .normalize = true}, FfnActivation::kSilu, true, false);
  m.shared = SharedExpert(w, FfnActivation::kSilu, 10, /*gated=*/true);
  m.shared_gate = w.Random(kEmbd, -1.0f, 1.0f);
  ExpectMatches(m, "softmax");
}

TEST(MoeTest, SigmoidWithSelectionBiasScaleAndAnUngatedSharedMlp) {
  testing::Weights w(12);
  MoeBlock m = Moe(w, {.gating = RouterGating::kSigmoid, .normalize = true, .scale = 2.5f, .selection_bias = true},
                   FfnActivation::kReluSquared, false, false);
  m.shared = SharedExpert(w, FfnActivation::kReluSquared, 8, /*gated=*/false);
  ExpectMatches(m, "sigmoid");
}

TEST(MoeTest, SoftmaxOfTheChosenWithRouterAndExpertBiases) {
  testing::Weights w(13);
  ExpectMatches(
      Moe(w, {.gating = RouterGating::kSoftmaxOfChosen, .router_bias = true}, FfnActivation::kSwigluOai, true, true),
      "softmax of chosen");
}

}  // namespace
}  // namespace cairn
