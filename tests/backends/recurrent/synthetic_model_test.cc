// Synthetic recurrent models (synthetic/): the Mamba-1 path that
// no golden file exercises (dt_b_c_rms, as FalconMamba sets it) against a
// direct double-precision computation, and load errors that name what is
// wrong.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/model/gguf.h"
#include "backends/recurrent/recurrent_backend.h"
#include "gtest/gtest.h"
#include "synthetic/architectures.h"

namespace cairn {
namespace {

// The layout fingerprint a backend's snapshots carry.
uint64_t SnapshotLayout(Backend& b) { return (*(*b.NewSequence())->Capture(SnapshotScope::kCheckpoint)).layout; }

struct Dims {
  int64_t n_embd = 8, d_inner = 16, d_state = 4, dt_rank = 2, d_conv = 3, n_vocab = 10, n_layer = 2;
};

// A Mamba-1 model (synthetic/) and its weights in GGUF layout, kept for the
// reference.
struct Mamba1Weights {
  Dims d;
  bool dt_b_c_rms = false;
  synthetic::SyntheticModel model{"mamba"};
  std::vector<float> embd, out_norm, out;
  struct Layer {
    std::vector<float> norm, in, conv_w, conv_b, x, dt, dt_b, a, dd, o;
  };
  std::vector<Layer> layers;
};

Mamba1Weights MakeWeights(bool dt_b_c_rms, uint32_t seed) {
  Mamba1Weights w;
  w.dt_b_c_rms = dt_b_c_rms;
  const Dims& d = w.d;
  w.model = synthetic::Mamba({.n_embd = d.n_embd,
                              .n_vocab = d.n_vocab,
                              .d_inner = d.d_inner,
                              .d_state = d.d_state,
                              .dt_rank = d.dt_rank,
                              .d_conv = d.d_conv,
                              .n_layer = static_cast<int32_t>(d.n_layer),
                              .dt_b_c_rms = dt_b_c_rms});
  w.model.seed = seed;
  // Norms and D away from 1, so that the reference checks where they enter.
  w.model.Find("output_norm.weight")->init = synthetic::Init::Uniform(0.5f, 1.5f);
  for (int64_t l = 0; l < d.n_layer; ++l) {
    for (const char* name : {"attn_norm.weight", "ssm_d"}) {
      w.model.Find("blk." + std::to_string(l) + "." + name)->init = synthetic::Init::Uniform(0.5f, 1.5f);
    }
  }
  w.model.Materialize();
  synthetic::SyntheticModel& m = w.model;
  w.embd = m.Values("token_embd.weight");
  w.out_norm = m.Values("output_norm.weight");
  w.out = m.Values("output.weight");
  for (int64_t l = 0; l < d.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.layers.push_back({m.Values(p + "attn_norm.weight"), m.Values(p + "ssm_in.weight"),
                        m.Values(p + "ssm_conv1d.weight"), m.Values(p + "ssm_conv1d.bias"),
                        m.Values(p + "ssm_x.weight"), m.Values(p + "ssm_dt.weight"), m.Values(p + "ssm_dt.bias"),
                        m.Values(p + "ssm_a"), m.Values(p + "ssm_d"), m.Values(p + "ssm_out.weight")});
  }
  return w;
}

// Optional damage for the load-error tests.
struct Damage {
  std::string skip_tensor;       // omit this tensor
  std::string reshape_tensor;    // write this tensor with a wrong shape
  bool drop_state_size = false;  // omit mamba.ssm.state_size
};

std::shared_ptr<const ModelFile> Write(const Mamba1Weights& w, const Damage& damage = {}) {
  synthetic::SyntheticModel m = w.model;
  if (!damage.skip_tensor.empty()) {
    EXPECT_TRUE(m.Remove(damage.skip_tensor));
  }
  if (synthetic::SyntheticTensor* t = m.Find(damage.reshape_tensor)) t->shape = {t->n_elements()};
  if (damage.drop_state_size) {
    EXPECT_TRUE(m.metadata().Erase("mamba.ssm.state_size"));
  }
  auto model = m.Open("synthetic-mamba");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// y[o] = sum_i W[o][i] x[i] for a GGUF [n_in, n_out] matrix.
std::vector<double> Mul(const std::vector<float>& W, const std::vector<double>& x, int64_t n_out) {
  const int64_t n_in = static_cast<int64_t>(x.size());
  std::vector<double> y(static_cast<size_t>(n_out), 0.0);
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t i = 0; i < n_in; ++i) y[o] += double{W[o * n_in + i]} * x[i];
  }
  return y;
}

void RmsNormD(std::vector<double>& v, size_t begin, size_t n, const float* w) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += v[begin + i] * v[begin + i];
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-5);
  for (size_t i = 0; i < n; ++i) v[begin + i] *= scale * (w ? double{w[i]} : 1.0);
}

double SiluD(double x) { return x / (1.0 + std::exp(-x)); }

// The Mamba-1 model written out token by token in double precision.
std::vector<std::vector<double>> Reference(const Mamba1Weights& w, const std::vector<TokenId>& tokens) {
  const Dims& d = w.d;
  std::vector<std::vector<double>> conv(d.n_layer, std::vector<double>((d.d_conv - 1) * d.d_inner, 0.0));
  std::vector<std::vector<double>> ssm(d.n_layer, std::vector<double>(d.d_inner * d.d_state, 0.0));
  std::vector<std::vector<double>> logits;
  for (TokenId tok : tokens) {
    std::vector<double> x(w.embd.begin() + tok * d.n_embd, w.embd.begin() + (tok + 1) * d.n_embd);
    for (int64_t l = 0; l < d.n_layer; ++l) {
      const auto& L = w.layers[l];
      std::vector<double> h = x;
      RmsNormD(h, 0, h.size(), L.norm.data());
      const std::vector<double> xz = Mul(L.in, h, 2 * d.d_inner);
      std::vector<double> xc(d.d_inner);
      for (int64_t c = 0; c < d.d_inner; ++c) {
        double acc = L.conv_b[c];
        for (int64_t k = 0; k < d.d_conv; ++k) {
          const double in = k < d.d_conv - 1 ? conv[l][k * d.d_inner + c] : xz[c];
          acc += in * L.conv_w[c * d.d_conv + k];
        }
        xc[c] = SiluD(acc);
      }
      for (int64_t k = 0; k + 1 < d.d_conv - 1; ++k) {
        for (int64_t c = 0; c < d.d_inner; ++c) conv[l][k * d.d_inner + c] = conv[l][(k + 1) * d.d_inner + c];
      }
      for (int64_t c = 0; c < d.d_inner; ++c) conv[l][(d.d_conv - 2) * d.d_inner + c] = xz[c];
      std::vector<double> xdb = Mul(L.x, xc, d.dt_rank + 2 * d.d_state);
      if (w.dt_b_c_rms) {
        RmsNormD(xdb, 0, d.dt_rank, nullptr);
        RmsNormD(xdb, d.dt_rank, d.d_state, nullptr);
        RmsNormD(xdb, d.dt_rank + d.d_state, d.d_state, nullptr);
      }
      const std::vector<double> dt_low(xdb.begin(), xdb.begin() + d.dt_rank);
      std::vector<double> dt = Mul(L.dt, dt_low, d.d_inner);
      std::vector<double> y(d.d_inner);
      for (int64_t c = 0; c < d.d_inner; ++c) {
        const double dts = std::log1p(std::exp(dt[c] + L.dt_b[c]));
        double acc = 0;
        for (int64_t n = 0; n < d.d_state; ++n) {
          double& s = ssm[l][c * d.d_state + n];
          s = s * std::exp(dts * L.a[c * d.d_state + n]) + xdb[d.dt_rank + n] * xc[c] * dts;
          acc += s * xdb[d.dt_rank + d.d_state + n];
        }
        y[c] = (acc + xc[c] * L.dd[c]) * SiluD(xz[d.d_inner + c]);
      }
      const std::vector<double> out = Mul(L.o, y, d.n_embd);
      for (int64_t i = 0; i < d.n_embd; ++i) x[i] += out[i];
    }
    RmsNormD(x, 0, x.size(), w.out_norm.data());
    logits.push_back(Mul(w.out, x, d.n_vocab));
  }
  return logits;
}

class SyntheticMamba1Test : public ::testing::TestWithParam<bool> {};

TEST_P(SyntheticMamba1Test, MatchesDirectComputationInDouble) {
  const Mamba1Weights w = MakeWeights(/*dt_b_c_rms=*/GetParam(), 11);
  auto model = Write(w);
  ASSERT_NE(model, nullptr);
  BackendOptions options;
  options.n_threads = 2;
  auto b = RecurrentFamily().create(model, options);
  ASSERT_TRUE(b.ok()) << b.status();
  const std::vector<TokenId> tokens = {1, 4, 9, 0, 3, 3, 7, 2};
  const auto ref = Reference(w, tokens);
  // Once as a batch, once token by token.
  for (bool step : {false, true}) {
    auto m = *(*b)->NewSequence();
    std::vector<float> got;
    for (size_t i = 0; i < tokens.size();) {
      const size_t n = step ? 1 : tokens.size();
      std::vector<int32_t> rows(n);
      for (size_t r = 0; r < n; ++r) rows[r] = static_cast<int32_t>(r);
      SequenceRun run{m.get(), m->next_pos(), std::span<const TokenId>(tokens).subspan(i, n), nullptr, rows, {}};
      auto out = (*b)->Forward(std::span<const SequenceRun>(&run, 1));
      ASSERT_TRUE(out.ok()) << out.status();
      got.insert(got.end(), (*out)[0].values.begin(), (*out)[0].values.end());
      i += n;
    }
    double max_err = 0, max_ref = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
      for (int64_t v = 0; v < w.d.n_vocab; ++v) {
        max_err = std::max(max_err, std::fabs(got[t * w.d.n_vocab + v] - ref[t][v]));
        max_ref = std::max(max_ref, std::fabs(ref[t][v]));
      }
    }
    EXPECT_LT(max_err, 1e-4 * std::max(1.0, max_ref)) << (step ? "step" : "batch");
  }
}

INSTANTIATE_TEST_SUITE_P(DtBcRms, SyntheticMamba1Test, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "On" : "Off"; });

TEST(SyntheticMamba1Test, DtBcRmsChangesTheResult) {
  // The same weights with and without the flag: the flag must reach the model.
  Mamba1Weights on = MakeWeights(true, 12), off = MakeWeights(false, 12);
  auto b_on = RecurrentFamily().create(Write(on), BackendOptions{});
  auto b_off = RecurrentFamily().create(Write(off), BackendOptions{});
  ASSERT_TRUE(b_on.ok() && b_off.ok());
  const TokenId toks[] = {2, 5};
  const int32_t rows[] = {1};
  auto m1 = *(*b_on)->NewSequence();
  auto m2 = *(*b_off)->NewSequence();
  SequenceRun r1{m1.get(), 0, toks, nullptr, rows, {}}, r2{m2.get(), 0, toks, nullptr, rows, {}};
  auto o1 = (*b_on)->Forward(std::span<const SequenceRun>(&r1, 1));
  auto o2 = (*b_off)->Forward(std::span<const SequenceRun>(&r2, 1));
  ASSERT_TRUE(o1.ok() && o2.ok());
  EXPECT_NE((*o1)[0].values, (*o2)[0].values);
  EXPECT_NE(SnapshotLayout(**b_on), SnapshotLayout(**b_off));
}

TEST(SyntheticMamba1Test, StateBytesFollowTheFormula) {
  const Mamba1Weights w = MakeWeights(false, 14);
  auto b = RecurrentFamily().create(Write(w), BackendOptions{});
  ASSERT_TRUE(b.ok()) << b.status();
  auto m = *(*b)->NewSequence();
  // Per layer: (d_conv - 1) * d_inner conv inputs + d_state * d_inner SSM state.
  const Dims& d = w.d;
  const size_t expected = static_cast<size_t>(d.n_layer * ((d.d_conv - 1) * d.d_inner + d.d_state * d.d_inner)) * 4;
  EXPECT_EQ(m->Bytes(SnapshotScope::kCheckpoint), expected);
  EXPECT_EQ(m->Capture(SnapshotScope::kFull)->bytes(), expected);
}

TEST(SyntheticLoadErrors, NameWhatIsWrong) {
  const Mamba1Weights w = MakeWeights(false, 13);
  {
    Damage damage;
    damage.skip_tensor = "blk.1.ssm_x.weight";
    auto b = RecurrentFamily().create(Write(w, damage), BackendOptions{});
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(b.status().message().find("blk.1.ssm_x.weight"), std::string::npos) << b.status();
  }
  {
    Damage damage;
    damage.reshape_tensor = "blk.0.ssm_a";
    auto b = RecurrentFamily().create(Write(w, damage), BackendOptions{});
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(b.status().message().find("blk.0.ssm_a"), std::string::npos) << b.status();
  }
  {
    Damage damage;
    damage.drop_state_size = true;
    auto b = RecurrentFamily().create(Write(w, damage), BackendOptions{});
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(b.status().message().find("mamba.ssm.state_size"), std::string::npos) << b.status();
  }
}

}  // namespace
}  // namespace cairn
