// The gated delta rule kernel against a double-precision reference of the
// recurrence, its run-splitting exactness, and the IMROPE cache.
#include "backends/kernels/delta_net.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/kernels/rope.h"
#include "gtest/gtest.h"

namespace cairn {
namespace {

struct Inputs {
  int64_t T, Hk, Hv, dk, dv;
  std::vector<float> q, k, v, g, beta;
};

Inputs MakeInputs(int64_t T, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Inputs in{T, Hk, Hv, dk, dv, {}, {}, {}, {}, {}};
  in.q.resize(T * Hk * dk);
  in.k.resize(T * Hk * dk);
  in.v.resize(T * Hv * dv);
  in.g.resize(T * Hv);
  in.beta.resize(T * Hv);
  for (float& x : in.q) x = u(rng);
  for (float& x : in.k) x = u(rng);
  for (float& x : in.v) x = u(rng);
  for (float& x : in.g) x = -0.5f * (u(rng) + 1.0f);  // log decay in [-1, 0]
  for (float& x : in.beta) x = 0.5f * (u(rng) + 1.0f);
  for (int64_t t = 0; t < T * Hk; ++t) {
    L2Normalize(&in.q[t * dk], dk, 1e-6f, &in.q[t * dk]);
    L2Normalize(&in.k[t * dk], dk, 1e-6f, &in.k[t * dk]);
  }
  return in;
}

// Runs tokens [t0, t1) for heads [h0, h1) on `state`, writing `out` rows t0.. .
void RunRule(const Inputs& in, int64_t t0, int64_t t1, int64_t h0, int64_t h1, float* state, float* out,
             bool key_head_blocks = false) {
  GatedDeltaRuleArgs a;
  a.key_head_blocks = key_head_blocks;
  a.n_tokens = t1 - t0;
  a.n_head_k = in.Hk;
  a.n_head_v = in.Hv;
  a.d_k = in.dk;
  a.d_v = in.dv;
  a.head_begin = h0;
  a.head_end = h1;
  a.q = in.q.data() + t0 * in.Hk * in.dk;
  a.k = in.k.data() + t0 * in.Hk * in.dk;
  a.qk_stride = in.Hk * in.dk;
  a.v = in.v.data() + t0 * in.Hv * in.dv;
  a.v_stride = in.Hv * in.dv;
  a.g = in.g.data() + t0 * in.Hv;
  a.beta = in.beta.data() + t0 * in.Hv;
  a.gb_stride = in.Hv;
  a.scale = 1.0f / std::sqrt(static_cast<float>(in.dk));
  a.state = state;
  a.out = out + t0 * in.Hv * in.dv;
  a.out_stride = in.Hv * in.dv;
  GatedDeltaRule(a);
}

// The recurrence written as matrix algebra in double, value head h reading
// key head h mod Hk (or h / (Hv / Hk) with key_head_blocks).
std::vector<double> Reference(const Inputs& in, bool key_head_blocks = false) {
  std::vector<double> out(in.T * in.Hv * in.dv);
  for (int64_t h = 0; h < in.Hv; ++h) {
    const int64_t hk = key_head_blocks ? h / (in.Hv / in.Hk) : h % in.Hk;
    std::vector<double> S(in.dv * in.dk, 0.0);
    for (int64_t t = 0; t < in.T; ++t) {
      const float* q = &in.q[(t * in.Hk + hk) * in.dk];
      const float* k = &in.k[(t * in.Hk + hk) * in.dk];
      const float* v = &in.v[(t * in.Hv + h) * in.dv];
      const double decay = std::exp(static_cast<double>(in.g[t * in.Hv + h]));
      const double beta = in.beta[t * in.Hv + h];
      for (double& s : S) s *= decay;
      std::vector<double> Sk(in.dv, 0.0);
      for (int64_t j = 0; j < in.dv; ++j) {
        for (int64_t i = 0; i < in.dk; ++i) Sk[j] += S[j * in.dk + i] * k[i];
      }
      for (int64_t j = 0; j < in.dv; ++j) {
        const double delta = beta * (v[j] - Sk[j]);
        for (int64_t i = 0; i < in.dk; ++i) S[j * in.dk + i] += delta * k[i];
      }
      for (int64_t j = 0; j < in.dv; ++j) {
        double o = 0;
        for (int64_t i = 0; i < in.dk; ++i) o += S[j * in.dk + i] * q[i];
        out[(t * in.Hv + h) * in.dv + j] = o / std::sqrt(static_cast<double>(in.dk));
      }
    }
  }
  return out;
}

TEST(GatedDeltaRuleTest, MatchesTheRecurrenceInDouble) {
  // Key widths of the vectorized paths (AVX-512: 16, 32, 64, 128; AVX2:
  // multiples of 32) and of the portable one (24; 16 on AVX2).
  for (int64_t dk : {16, 32, 64, 128, 24})
    for (bool blocks : {false, true}) {
      SCOPED_TRACE("d_k " + std::to_string(dk) + (blocks ? " key head blocks" : ""));
      const Inputs in = MakeInputs(40, 2, 4, dk, 16, 7);
      std::vector<float> state(in.Hv * in.dv * in.dk, 0.0f), out(in.T * in.Hv * in.dv);
      RunRule(in, 0, in.T, 0, in.Hv, state.data(), out.data(), blocks);
      const std::vector<double> ref = Reference(in, blocks);
      double max_diff = 0, max_ref = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        max_diff = std::max(max_diff, std::abs(out[i] - ref[i]));
        max_ref = std::max(max_ref, std::abs(ref[i]));
      }
      EXPECT_GT(max_ref, 0.005);  // outputs shrink as 1 / sqrt(d_k); still far from zero
      EXPECT_LT(max_diff, 2e-5 * max_ref);
    }
}

TEST(GatedDeltaRuleTest, ValueHeadsReadKeyHeadsModuloTheKeyHeadCount) {
  // With 4 value heads over 2 key heads, heads 0 and 2 share key head 0:
  // given the same values, gates and betas they must produce the same output.
  Inputs in = MakeInputs(10, 2, 4, 8, 8, 11);
  for (int64_t t = 0; t < in.T; ++t) {
    for (int64_t j = 0; j < in.dv; ++j) in.v[(t * 4 + 2) * in.dv + j] = in.v[(t * 4 + 0) * in.dv + j];
    in.g[t * 4 + 2] = in.g[t * 4 + 0];
    in.beta[t * 4 + 2] = in.beta[t * 4 + 0];
    for (int64_t j = 0; j < in.dv; ++j) in.v[(t * 4 + 1) * in.dv + j] = in.v[(t * 4 + 0) * in.dv + j];
    in.g[t * 4 + 1] = in.g[t * 4 + 0];
    in.beta[t * 4 + 1] = in.beta[t * 4 + 0];
  }
  std::vector<float> state(4 * in.dv * in.dk, 0.0f), out(in.T * 4 * in.dv);
  RunRule(in, 0, in.T, 0, 4, state.data(), out.data());
  bool head1_differs = false;
  for (int64_t t = 0; t < in.T; ++t) {
    for (int64_t j = 0; j < in.dv; ++j) {
      EXPECT_EQ(out[(t * 4 + 2) * in.dv + j], out[(t * 4 + 0) * in.dv + j]);
      head1_differs |= out[(t * 4 + 1) * in.dv + j] != out[(t * 4 + 0) * in.dv + j];
    }
  }
  EXPECT_TRUE(head1_differs) << "head 1 reads key head 1, not key head 0";
}

TEST(GatedDeltaRuleTest, WithKeyHeadBlocksConsecutiveValueHeadsShareAKeyHead) {
  // Qwen3-Next: 4 value heads over 2 key heads, heads 0 and 1 read key head
  // 0, heads 2 and 3 key head 1.
  Inputs in = MakeInputs(10, 2, 4, 16, 8, 13);
  for (int64_t t = 0; t < in.T; ++t) {
    for (int64_t h : {1, 2}) {
      for (int64_t j = 0; j < in.dv; ++j) in.v[(t * 4 + h) * in.dv + j] = in.v[(t * 4 + 0) * in.dv + j];
      in.g[t * 4 + h] = in.g[t * 4 + 0];
      in.beta[t * 4 + h] = in.beta[t * 4 + 0];
    }
  }
  std::vector<float> state(4 * in.dv * in.dk, 0.0f), out(in.T * 4 * in.dv);
  RunRule(in, 0, in.T, 0, 4, state.data(), out.data(), true);
  bool head2_differs = false;
  for (int64_t t = 0; t < in.T; ++t) {
    for (int64_t j = 0; j < in.dv; ++j) {
      EXPECT_EQ(out[(t * 4 + 1) * in.dv + j], out[(t * 4 + 0) * in.dv + j]);
      head2_differs |= out[(t * 4 + 2) * in.dv + j] != out[(t * 4 + 0) * in.dv + j];
    }
  }
  EXPECT_TRUE(head2_differs) << "head 2 reads key head 1, not key head 0";
}

TEST(GatedDeltaRuleTest, SplitRunsAndHeadSlicesAreBitIdentical) {
  const Inputs in = MakeInputs(33, 2, 4, 128, 8, 3);
  std::vector<float> s_whole(in.Hv * in.dv * in.dk, 0.0f), o_whole(in.T * in.Hv * in.dv);
  RunRule(in, 0, in.T, 0, in.Hv, s_whole.data(), o_whole.data());
  std::vector<float> s_split(s_whole.size(), 0.0f), o_split(o_whole.size());
  // Token by token for heads [0, 3), then runs of 5 for head 3.
  for (int64_t t = 0; t < in.T; ++t) RunRule(in, t, t + 1, 0, 3, s_split.data(), o_split.data());
  for (int64_t t = 0; t < in.T; t += 5) RunRule(in, t, std::min(in.T, t + 5), 3, 4, s_split.data(), o_split.data());
  EXPECT_EQ(s_split, s_whole);
  EXPECT_EQ(o_split, o_whole);
}

TEST(L2NormalizeTest, UnitLengthAndFloor) {
  std::vector<float> x = {3.0f, 4.0f};
  L2Normalize(x.data(), 2, 1e-6f, x.data());
  EXPECT_FLOAT_EQ(x[0], 0.6f);
  EXPECT_FLOAT_EQ(x[1], 0.8f);
  // Below eps the divisor is eps, not the tiny norm.
  std::vector<float> tiny = {1e-9f, 0.0f};
  L2Normalize(tiny.data(), 2, 1e-6f, tiny.data());
  EXPECT_FLOAT_EQ(tiny[0], 1e-3f);
}

TEST(RopeImropeTest, TextPositionsRotateLikePlainRope) {
  RopeParams p;
  p.type = RopeType::kNeox;
  p.n_dims = 8;
  p.freq_base = 1e7f;
  const int32_t sections[4] = {2, 1, 1, 0};
  for (float pos : {0.0f, 1.0f, 17.0f, 4095.0f}) {
    std::vector<float> plain(8), multi(8);
    RopeCache(p, pos, plain.data());
    const float four[4] = {pos, pos, pos, 0.0f};
    RopeCacheImrope(p, sections, four, multi.data());
    EXPECT_EQ(plain, multi) << "position " << pos;
  }
}

TEST(RopeImropeTest, SectorsTakeInterleavedComponents) {
  RopeParams p;
  p.type = RopeType::kNeox;
  p.n_dims = 16;
  p.freq_base = 100.0f;
  // 8 pairs over sections [2, 2, 1, 3]: sectors 0..7 read
  // t h w t h e e e  (s%3==0 && s<6 -> t, s%3==1 && s<6 -> h, s%3==2 && s<3 -> w).
  const int32_t sections[4] = {2, 2, 1, 3};
  const float pos[4] = {3.0f, 5.0f, 7.0f, 11.0f};
  const int comp[8] = {0, 1, 2, 0, 1, 3, 3, 3};
  std::vector<float> cache(16);
  RopeCacheImrope(p, sections, pos, cache.data());
  for (int i = 0; i < 8; ++i) {
    const double theta = pos[comp[i]] * std::pow(100.0, -2.0 * i / 16.0);
    EXPECT_NEAR(cache[2 * i], std::cos(theta), 1e-5) << "pair " << i;
    EXPECT_NEAR(cache[2 * i + 1], std::sin(theta), 1e-5) << "pair " << i;
  }
}

}  // namespace
}  // namespace cairn
