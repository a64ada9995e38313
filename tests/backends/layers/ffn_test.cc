// The FFN block against its definition in double precision: GLU FFNs with
// each activation, the ungated MLP, and the same rows through FfnForward.
#include "backends/layers/ffn.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/memory/kv_memory.h"
#include "gtest/gtest.h"
#include "tests/backends/layers/block_test_util.h"

namespace cairn {
namespace {

using testing::Vec;

constexpr int64_t kEmbd = 24, kFf = 40, kRows = 9;

double Activation(FfnActivation a, double g) {
  switch (a) {
    case FfnActivation::kSilu:
      return testing::SiluD(g);
    case FfnActivation::kGelu:
      return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
    case FfnActivation::kReluSquared:
      return std::max(g, 0.0) * std::max(g, 0.0);
    case FfnActivation::kSwigluOai: {
      const double c = std::min(g, 7.0);
      return c * testing::SigmoidD(1.702 * c);
    }
  }
  return 0;
}

// down(act(gate x) * up x), or down(act(up x)) without a gate; SwiGLU-OAI
// clamps up to +-7 and adds 1 to it.
Vec FfnD(const FfnBlock& f, const Vec& x) {
  const Vec up = testing::Mul(f.up, x);
  Vec h(up.size());
  if (f.gate.n_out == 0) {
    for (size_t i = 0; i < up.size(); ++i) h[i] = Activation(f.activation, up[i]);
  } else {
    const Vec gate = testing::Mul(f.gate, x);
    for (size_t i = 0; i < up.size(); ++i) {
      const double u = f.activation == FfnActivation::kSwigluOai ? std::clamp(up[i], -7.0, 7.0) + 1.0 : up[i];
      h[i] = Activation(f.activation, gate[i]) * u;
    }
  }
  return testing::Mul(f.down, h);
}

FfnBlock Ffn(testing::Weights& w, FfnActivation activation, bool gated) {
  FfnBlock f;
  f.activation = activation;
  f.n_ff = kFf;
  if (gated) f.gate = w.Matrix(kEmbd, kFf, 3.0f);  // wide enough to reach the clamp and the tails
  f.up = w.Matrix(kEmbd, kFf, 3.0f);
  f.down = w.Matrix(kFf, kEmbd);
  return f;
}

TEST(FfnTest, EveryActivationGatedAndUngated) {
  const std::vector<float> xn = testing::RandomRows(kRows, kEmbd, 1);
  struct Case {
    const char* name;
    FfnActivation activation;
    bool gated;
  };
  for (const Case& c :
       {Case{"swiglu", FfnActivation::kSilu, true}, Case{"geglu", FfnActivation::kGelu, true},
        Case{"swiglu-oai", FfnActivation::kSwigluOai, true}, Case{"relu2 mlp", FfnActivation::kReluSquared, false},
        Case{"relu2 glu", FfnActivation::kReluSquared, true}}) {
    testing::Weights w(7);
    const FfnBlock f = Ffn(w, c.activation, c.gated);
    ThreadPool pool(2);
    WorkBuffers buffers;
    std::vector<float> out(kRows * kEmbd);
    FfnRows(f, pool, MatMulPrecision::kExact, buffers, xn.data(), kRows, out.data());
    std::vector<Vec> want;
    for (int64_t r = 0; r < kRows; ++r) want.push_back(FfnD(f, testing::Row(xn, r, kEmbd)));
    testing::ExpectRowsNear(out.data(), want, 1e-5, c.name);
  }
}

TEST(FfnTest, ForwardRunsThePassRows) {
  testing::Weights w(8);
  const FfnBlock f = Ffn(w, FfnActivation::kSilu, true);
  KvGeometry g;
  g.capacity = 64;
  KvMemory a(g, nullptr), b(g, nullptr);
  testing::Pass pass({&a, &b}, {3, 2}, kEmbd);
  const std::vector<float> xn = testing::RandomRows(5, kEmbd, 2);
  std::vector<float> out(5 * kEmbd);
  FfnForward(f, *pass, xn.data(), out.data());
  std::vector<Vec> want;
  for (int64_t r = 0; r < 5; ++r) want.push_back(FfnD(f, testing::Row(xn, r, kEmbd)));
  testing::ExpectRowsNear(out.data(), want, 1e-5, "forward");
}

}  // namespace
}  // namespace cairn
