// Kernels against straightforward double-precision references: thread pool
// partitioning, fused quantized dots and MatMul (both paths) on the golden
// quantized blocks, RMSNorm, RoPE (NORMAL/NEOX, scaling, factors), attention
// (GQA, causality, window, soft cap), SwiGLU and softmax.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "backends/kernels/activation.h"
#include "backends/kernels/attention.h"
#include "backends/kernels/matmul.h"
#include "backends/kernels/norm.h"
#include "backends/kernels/rope.h"
#include "backends/kernels/thread_pool.h"
#include "backends/kernels/vec.h"
#include "backends/model/dequant.h"
#include "backends/model/gguf.h"
#include "gtest/gtest.h"
#include "tests/backends/kernels/reference_dot.h"
#include "tests/testing/shared_data.h"

namespace cairn {
namespace {

std::vector<float> RandomVec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// ---------------------------------------------------------------- ThreadPool

// Up to chunks_per_thread x threads ranges, each at least `grain` long, with
// the same boundaries on every call (kernels rely on them for results that
// do not depend on which thread ran what).
TEST(ThreadPoolTest, RangesAreDisjointCoverEverythingAndRespectGrain) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int per_thread : {1, 4}) {
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{64}, int64_t{1000}, int64_t{100003}}) {
        for (int64_t grain : {int64_t{1}, int64_t{16}, int64_t{500}}) {
          std::vector<std::pair<int64_t, int64_t>> first;
          for (int call = 0; call < 2; ++call) {
            std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
            std::mutex mu;
            std::vector<std::pair<int64_t, int64_t>> ranges;
            pool.ParallelFor(
                n, grain,
                [&](int64_t b, int64_t e) {
                  for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
                  std::lock_guard<std::mutex> lock(mu);
                  ranges.emplace_back(b, e);
                },
                per_thread);
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << " i " << i;
            EXPECT_LE(static_cast<int>(ranges.size()), threads * per_thread);
            if (ranges.size() > 1) {
              for (auto [b, e] : ranges) EXPECT_GE(e - b, grain) << "n " << n << " grain " << grain;
            }
            if (n == 0) {
              EXPECT_TRUE(ranges.empty());
            }
            std::sort(ranges.begin(), ranges.end());
            if (call == 0) first = ranges;
            EXPECT_EQ(ranges, first) << "threads " << threads << " n " << n << " grain " << grain;
          }
        }
      }
    }
  }
}

TEST(ThreadPoolTest, ManyShortJobsInARow) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int rep = 0; rep < 20000; ++rep) {
    pool.ParallelFor(4, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  }
  EXPECT_EQ(total.load(), 80000);
}

// ------------------------------------------------------- quantized products

struct QuantFile {
  const char* file;
  GgmlType type;
};
const QuantFile kQuantFiles[] = {
    {"q4_0.gguf", GgmlType::kQ4_0}, {"q4_1.gguf", GgmlType::kQ4_1}, {"q5_0.gguf", GgmlType::kQ5_0},
    {"q5_1.gguf", GgmlType::kQ5_1}, {"q8_0.gguf", GgmlType::kQ8_0}, {"q4_k.gguf", GgmlType::kQ4_K},
    {"q5_k.gguf", GgmlType::kQ5_K}, {"q6_k.gguf", GgmlType::kQ6_K},
};

// Relative to the magnitude of the terms: sum |w| |x|.
double RelError(double got, double want, double magnitude) { return std::fabs(got - want) / (magnitude + 1e-30); }

class QuantTest : public ::testing::TestWithParam<QuantFile> {};

TEST_P(QuantTest, FusedDotMatchesDequantizedReference) {
  const std::string rel = std::string("golden/quants/") + GetParam().file;
  CAIRN_REQUIRE_SHARED(rel);
  auto f = ModelFile::Open(testing::SharedPath(rel));
  ASSERT_TRUE(f.ok()) << f.status();
  auto q = (*f)->GetTensor("quantized");
  auto e = (*f)->GetTensor("expected");
  ASSERT_TRUE(q.ok() && e.ok());
  ASSERT_EQ((*q)->type, GetParam().type);
  const int64_t n = (*q)->row_size();
  const float* expected = reinterpret_cast<const float*>((*e)->data);
  std::vector<float> x = RandomVec(static_cast<size_t>(n), 7);
  for (int64_t r = 0; r < (*q)->n_rows(); ++r) {
    const ReferenceDot want = DotInDouble(expected + r * n, x.data(), n);
    const float got = DotRow(GetParam().type, (*q)->row(r), x.data(), n);
    EXPECT_LT(RelError(got, want.value, want.magnitude), 1e-6)
        << "row " << r << " got " << got << " want " << want.value;
  }
}

TEST_P(QuantTest, FastDequantizationIsBitExact) {
  const std::string rel = std::string("golden/quants/") + GetParam().file;
  CAIRN_REQUIRE_SHARED(rel);
  auto f = ModelFile::Open(testing::SharedPath(rel));
  ASSERT_TRUE(f.ok()) << f.status();
  const TensorInfo* q = *(*f)->GetTensor("quantized");
  const float* expected = reinterpret_cast<const float*>((*(*f)->GetTensor("expected"))->data);
  const int64_t n = q->row_size();
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t r = 0; r < q->n_rows(); ++r) {
    DequantizeRowFast(q->type, q->row(r), y.data(), n);
    ASSERT_EQ(std::memcmp(y.data(), expected + r * n, static_cast<size_t>(n) * sizeof(float)), 0) << "row " << r;
  }
}

TEST_P(QuantTest, MatMulBothPathsMatchReference) {
  const std::string rel = std::string("golden/quants/") + GetParam().file;
  CAIRN_REQUIRE_SHARED(rel);
  auto f = ModelFile::Open(testing::SharedPath(rel));
  ASSERT_TRUE(f.ok()) << f.status();
  const TensorInfo* q = *(*f)->GetTensor("quantized");
  const float* expected = reinterpret_cast<const float*>((*(*f)->GetTensor("expected"))->data);
  const WeightMatrix w = WeightMatrix::FromTensor(*q);
  ThreadPool pool(2);
  for (int64_t tokens : {1, 2, 3, 4, 9, 16, 17, 33}) {
    std::vector<float> x = RandomVec(static_cast<size_t>(tokens * w.n_in), 11 + static_cast<uint32_t>(tokens));
    std::vector<float> y(static_cast<size_t>(tokens * w.n_out), std::numeric_limits<float>::quiet_NaN());
    MatMul(w, x.data(), tokens, y.data(), pool, MatMulPrecision::kExact);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t o = 0; o < w.n_out; ++o) {
        const ReferenceDot want = DotInDouble(expected + o * w.n_in, x.data() + t * w.n_in, w.n_in);
        EXPECT_LT(RelError(y[t * w.n_out + o], want.value, want.magnitude), 1e-6)
            << "tokens " << tokens << " t " << t << " o " << o;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(GoldenQuants, QuantTest, ::testing::ValuesIn(kQuantFiles),
                         [](const ::testing::TestParamInfo<QuantFile>& i) {
                           std::string s = i.param.file;
                           return s.substr(0, s.find('.'));
                         });

// F32, F16 and BF16 rows (no golden file needed) through every MatMul path
// (per-token dots, the row-streaming kernel with all tokens in one group and
// in several, the 4 x 4 blocked kernel, sgemm), with a wide matrix so that
// several threads, row blocks and sgemm tiles are involved, and rows of a
// width that is not a multiple of 16 (the small-batch kernels' scalar tail).
// Row widths: 100 (up to 16 tokens in one group), 700 (groups of 5), 1500
// (groups would hold 2 tokens: the blocked kernel).
class MatMulTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(MatMulTest, FloatTypesAllPaths) {
  const int64_t n_in = GetParam(), n_out = 301;
  std::vector<float> wf = RandomVec(static_cast<size_t>(n_in * n_out), 3);
  ThreadPool pool(3);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    std::vector<uint8_t> bytes(RowBytes(type, n_in) * n_out);
    std::vector<float> exact(wf.size());  // the values the row really holds
    for (size_t i = 0; i < wf.size(); ++i) {
      if (type == GgmlType::kF32) {
        std::memcpy(&bytes[i * 4], &wf[i], 4);
        exact[i] = wf[i];
      } else {
        const uint16_t h = type == GgmlType::kF16 ? Fp32ToFp16(wf[i]) : Fp32ToBf16(wf[i]);
        std::memcpy(&bytes[i * 2], &h, 2);
        exact[i] = type == GgmlType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
      }
    }
    WeightMatrix w{type, n_in, n_out, bytes.data()};
    for (int64_t tokens : {1, 3, 4, 5, 8, 13, 16, 17, 40}) {
      std::vector<float> x = RandomVec(static_cast<size_t>(tokens * n_in), 5);
      std::vector<float> y(static_cast<size_t>(tokens * n_out));
      MatMul(w, x.data(), tokens, y.data(), pool, MatMulPrecision::kExact);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t o = 0; o < n_out; ++o) {
          const ReferenceDot want = DotInDouble(&exact[o * n_in], &x[t * n_in], n_in);
          ASSERT_LT(RelError(y[t * n_out + o], want.value, want.magnitude), 1e-6)
              << TypeName(type) << " tokens " << tokens << " t " << t << " o " << o;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RowWidths, MatMulTest, ::testing::Values(100, 700, 1500));

TEST(VecTest, DotF32AllLengths) {
  for (int64_t n = 0; n < 150; ++n) {
    auto a = RandomVec(static_cast<size_t>(n), 1), b = RandomVec(static_cast<size_t>(n), 2);
    const ReferenceDot want = DotInDouble(a.data(), b.data(), n);
    EXPECT_LT(RelError(DotF32(a.data(), b.data(), n), want.value, want.magnitude), 1e-6) << n;
  }
}

// ------------------------------------------------------------------ RMSNorm

TEST(NormTest, RmsNormMatchesFormula) {
  const int64_t n = 77;
  auto x = RandomVec(n, 4, 3.0f), w = RandomVec(n, 5);
  std::vector<float> y(n);
  RmsNorm(x.data(), w.data(), n, 1e-5f, y.data());
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i] * scale * w[i], 1e-6 * (1 + std::fabs(y[i])));
  // In place, no weight, and per-row over a strided layout.
  std::vector<float> rows = RandomVec(3 * 20, 6);
  std::vector<float> copy = rows;
  RmsNormRows(rows.data(), nullptr, 3, 16, 20, 1e-6f, rows.data());
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int i = 0; i < 16; ++i) s += rows[r * 20 + i] * rows[r * 20 + i];
    EXPECT_NEAR(s / 16, 1.0, 1e-4);
    for (int i = 16; i < 20; ++i) EXPECT_EQ(rows[r * 20 + i], copy[r * 20 + i]) << "beyond n must stay";
  }
}

// --------------------------------------------------------------------- RoPE

// Direct formula in double: angle_i = pos * freq_scale / ff_i * base^(-2i/n_dims).
std::vector<float> RopeReference(const RopeParams& p, const std::vector<float>& x, int heads, int hd, double pos) {
  std::vector<float> y = x;
  const int half = p.n_dims / 2;
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < half; ++i) {
      const double ff = p.freq_factors.empty() ? 1.0 : p.freq_factors[i];
      const double theta = pos * p.freq_scale / ff * std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_dims);
      const double c = std::cos(theta) * p.attn_factor, s = std::sin(theta) * p.attn_factor;
      const int a = p.type == RopeType::kNormal ? 2 * i : i;
      const int b = p.type == RopeType::kNormal ? 2 * i + 1 : i + half;
      const double xa = x[h * hd + a], xb = x[h * hd + b];
      y[h * hd + a] = static_cast<float>(xa * c - xb * s);
      y[h * hd + b] = static_cast<float>(xa * s + xb * c);
    }
  }
  return y;
}

TEST(RopeTest, NormalAndNeoxMatchTheFormula) {
  const int heads = 3, hd = 16;
  for (RopeType type : {RopeType::kNormal, RopeType::kNeox}) {
    for (int n_dims : {16, 8}) {
      for (float scale : {1.0f, 0.25f}) {
        RopeParams p;
        p.type = type;
        p.n_dims = n_dims;
        p.freq_base = 10000.0f;
        p.freq_scale = scale;
        for (double pos : {0.0, 1.0, 17.0, 300.0}) {
          auto x = RandomVec(heads * hd, 9);
          std::vector<float> cache(n_dims);
          RopeCache(p, static_cast<float>(pos), cache.data());
          std::vector<float> y = x;
          RopeApply(p, cache.data(), y.data(), heads, hd);
          auto want = RopeReference(p, x, heads, hd, pos);
          for (int i = 0; i < heads * hd; ++i) {
            // F32 angles drift by a few ulps of pos per multiplication step.
            EXPECT_NEAR(y[i], want[i], 2e-5 * (1 + pos))
                << "type " << static_cast<int>(type) << " dims " << n_dims << " pos " << pos << " i " << i;
          }
          if (pos == 0.0) {
            EXPECT_EQ(y, x) << "position 0 must be the identity";
          }
        }
      }
    }
  }
}

TEST(RopeTest, FreqFactorsDivideTheFrequency) {
  RopeParams p;
  p.type = RopeType::kNormal;
  p.n_dims = 8;
  p.freq_factors = {1.0f, 2.0f, 4.0f, 8.0f};
  auto x = RandomVec(8, 12);
  std::vector<float> cache(8);
  RopeCache(p, 37.0f, cache.data());
  std::vector<float> y = x;
  RopeApply(p, cache.data(), y.data(), 1, 8);
  auto want = RopeReference(p, x, 1, 8, 37.0);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y[i], want[i], 1e-4);
  // Rotation preserves the norm of each pair.
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(std::hypot(y[2 * i], y[2 * i + 1]), std::hypot(x[2 * i], x[2 * i + 1]), 1e-5);
  }
}

// gpt-oss's YaRN: n_dims 24, base 150000, trained at 4096, factor 32.
TEST(RopeTest, YarnCorrDimsAreTheRoundedTurnCounts) {
  float dims[2];
  // 24 ln(4096 / (b 2 pi)) / (2 ln 150000) = 3.03 (b = 32) and 6.52 (b = 1).
  RopeYarnCorrDims(24, 4096, 150000.0f, 32.0f, 1.0f, dims);
  EXPECT_EQ(dims[0], 3.0f);
  EXPECT_EQ(dims[1], 7.0f);
  // Clamped to [0, n_dims - 1]: 8 ln(100 / (32 2 pi)) / (2 ln 10) < 0, and
  // 8 ln(2^30 / (2 pi)) / (2 ln 10) = 33.
  RopeYarnCorrDims(8, 100, 10.0f, 32.0f, 1.0f, dims);
  EXPECT_EQ(dims[0], 0.0f);
  EXPECT_EQ(dims[1], 5.0f);  // ceil(4.8)
  RopeYarnCorrDims(8, 1 << 30, 10.0f, 32.0f, 1.0f, dims);
  EXPECT_EQ(dims[1], 7.0f);
}

TEST(RopeTest, YarnBlendsInterpolatedAndExtrapolatedAnglesAndScalesTheMagnitude) {
  RopeParams p;
  p.type = RopeType::kNeox;
  p.n_dims = 24;
  p.freq_base = 150000.0f;
  p.freq_scale = 1.0f / 32.0f;
  p.ext_factor = 1.0f;
  p.yarn_orig_ctx = 4096;
  p.attn_factor = 0.9f;
  const double lo = 3, hi = 7;  // the test above
  for (double pos : {1.0, 5.0, 100.0, 4000.0}) {
    std::vector<float> cache(24);
    RopeCache(p, static_cast<float>(pos), cache.data());
    for (int i = 0; i < 12; ++i) {
      const double extrap = pos * std::pow(150000.0, -2.0 * i / 24);
      const double interp = extrap / 32;
      const double mix = 1 - std::clamp((i - lo) / (hi - lo), 0.0, 1.0);  // 1 below lo, 0 above hi
      const double theta = interp * (1 - mix) + extrap * mix;
      const double mscale = 0.9 * (1 + 0.1 * std::log(32.0));
      EXPECT_NEAR(cache[2 * i], std::cos(theta) * mscale, 2e-5 * (1 + pos / 100)) << "pos " << pos << " pair " << i;
      EXPECT_NEAR(cache[2 * i + 1], std::sin(theta) * mscale, 2e-5 * (1 + pos / 100)) << "pos " << pos << " pair " << i;
    }
  }
  // Without ext_factor the same parameters are plain linear scaling.
  p.ext_factor = 0.0f;
  std::vector<float> cache(24);
  RopeCache(p, 50.0f, cache.data());
  for (int i = 0; i < 12; ++i) {
    const double theta = 50.0 / 32 * std::pow(150000.0, -2.0 * i / 24);
    EXPECT_NEAR(cache[2 * i], std::cos(theta) * 0.9, 1e-5);
  }
}

// ---------------------------------------------------------------- Attention

struct AttnCase {
  int n_head, n_head_kv, hd;
  int window;
  float softcap;
  bool sinks = false;
};

TEST(AttentionTest, MatchesNaiveReference) {
  ThreadPool pool(2);
  const AttnCase cases[] = {{4, 2, 16, 0, 0.0f},     {4, 4, 8, 0, 0.0f},  {6, 2, 8, 5, 0.0f},
                            {2, 1, 32, 0, 30.0f},    {8, 1, 4, 3, 20.0f}, {4, 2, 24, 0, 0.0f, true},
                            {4, 2, 8, 4, 0.0f, true}};
  // 7, 40 and 300 queries: one and several query blocks, partial register
  // tiles; kv_begin on or off.
  for (const AttnCase& c : cases)
    for (int n_q : {7, 40, 300})
      for (bool with_begin : {false, true}) {
        SCOPED_TRACE("n_q " + std::to_string(n_q) + (with_begin ? " with kv_begin" : ""));
        const int n_kv = n_q + 16, start = n_kv - n_q;
        AttentionParams p;
        p.n_head = c.n_head;
        p.n_head_kv = c.n_head_kv;
        p.head_dim_k = c.hd;
        p.head_dim_v = c.hd;
        p.scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
        p.window = c.window;
        p.softcap = c.softcap;
        // Sink logits around the scores' scale, one far above them (that head
        // attends almost to nothing).
        std::vector<float> sinks = {0.5f, -1.0f, 2.0f, 8.0f};
        if (c.sinks) p.sinks = sinks.data();
        const int qd = c.n_head * c.hd, kd = c.n_head_kv * c.hd;
        auto q = RandomVec(n_q * qd, 21, 2.0f), k = RandomVec(n_kv * kd, 22, 2.0f), v = RandomVec(n_kv * kd, 23);
        std::vector<int32_t> kv_end(n_q), kv_begin(n_q), q_pos(n_q), kv_pos(n_kv);
        for (int i = 0; i < n_q; ++i) {
          kv_end[i] = start + i + 1;
          q_pos[i] = start + i;
          kv_begin[i] = with_begin ? std::max(0, start + i - 9) : 0;  // query i skips rows before kv_begin
        }
        for (int j = 0; j < n_kv; ++j) kv_pos[j] = j;
        std::vector<float> out(n_q * qd);
        AttentionArgs a;
        a.q = q.data();
        a.q_stride = qd;
        a.n_q = n_q;
        a.kv_end = kv_end.data();
        a.kv_begin = with_begin ? kv_begin.data() : nullptr;
        a.q_pos = q_pos.data();
        a.k = k.data();
        a.k_stride = kd;
        a.v = v.data();
        a.v_stride = kd;
        a.kv_pos = kv_pos.data();
        a.n_kv = n_kv;
        a.out = out.data();
        a.out_stride = qd;
        Attention(p, a, pool);
        for (int i = 0; i < n_q; ++i) {
          for (int h = 0; h < c.n_head; ++h) {
            const int hk = h / (c.n_head / c.n_head_kv);
            std::vector<double> s;
            std::vector<int> idx;
            for (int j = kv_begin[i]; j < kv_end[i]; ++j) {
              if (c.window > 0 && q_pos[i] - j >= c.window) continue;
              double d = 0;
              for (int t = 0; t < c.hd; ++t)
                d += static_cast<double>(q[i * qd + h * c.hd + t]) * k[j * kd + hk * c.hd + t];
              d *= p.scale;
              if (c.softcap > 0) d = c.softcap * std::tanh(d / c.softcap);
              s.push_back(d);
              idx.push_back(j);
            }
            const double mx = *std::max_element(s.begin(), s.end());
            double sum = 0;
            for (double& e : s) sum += (e = std::exp(e - mx));
            if (c.sinks) sum += std::exp(sinks[h] - mx);
            for (int t = 0; t < c.hd; ++t) {
              double want = 0;
              for (size_t m = 0; m < s.size(); ++m) want += s[m] / sum * v[idx[m] * kd + hk * c.hd + t];
              EXPECT_NEAR(out[i * qd + h * c.hd + t], want, 1e-5)
                  << "heads " << c.n_head << "/" << c.n_head_kv << " window " << c.window << " q " << i << " h " << h;
            }
          }
        }
      }
}

// ------------------------------------------------------ activations/softmax

// Ulps between two finite floats of the same sign.
int64_t UlpDistance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<int64_t>(ia) - ib);
}

// SiLU's exp is a vector approximation in AVX2 builds: within a few ulp of
// a double-precision SiLU (2 ulp) over the whole float range, exact at the special
// values, and the same bits for an element wherever it sits.
TEST(ActivationTest, SiluIsCloseToDoubleEverywhereAndPositionIndependent) {
  std::vector<float> x;
  for (float v = -110.0f; v <= 110.0f; v += 1.0f / 64) x.push_back(v);
  for (float v :
       {1e-30f, -1e-30f, 1e-3f, -1e-3f, 86.9f, -86.9f, 87.1f, -87.1f, 88.7f, -88.7f, 88.73f, -88.73f, 3e38f, -3e38f})
    x.push_back(v);
  std::vector<float> y = x;
  SiluInPlace(y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = x[i] / (1.0 + std::exp(-static_cast<double>(x[i])));
    const float want_f = static_cast<float>(want);
    if (std::fabs(want) < 1e-30) {
      EXPECT_LE(std::fabs(y[i]), 1e-30f) << x[i];
    } else {
      EXPECT_LE(UlpDistance(y[i], want_f), 2) << "x " << x[i] << " got " << y[i] << " want " << want_f;
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> special = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), -200.0f};
  SiluInPlace(special.data(), static_cast<int64_t>(special.size()));
  EXPECT_EQ(special[0], 0.0f);
  EXPECT_EQ(special[1], 0.0f);
  EXPECT_EQ(special[2], inf);
  EXPECT_TRUE(std::isnan(special[3]));  // -inf / inf, as with libm
  EXPECT_TRUE(std::isnan(special[4]));
  EXPECT_EQ(special[5], 0.0f);
  // Element 3 of x alone, in a tail, and in the body of a longer call.
  for (int64_t n : {1, 5, 8, 13}) {
    for (int64_t at = 0; at < n; ++at) {
      std::vector<float> v(static_cast<size_t>(n), 0.5f);
      v[static_cast<size_t>(at)] = x[3];
      SiluInPlace(v.data(), n);
      EXPECT_EQ(v[static_cast<size_t>(at)], y[3]) << "n " << n << " at " << at;
    }
  }
}

// Softmax's exp is vectorized in AVX2 builds: close to a double softmax,
// and masked (-inf) entries in front of a row change none of its bits
// (attention's rows of one query differ so between calls).
TEST(ActivationTest, SoftmaxIsCloseToDoubleAndLeadingMaskedEntriesChangeNoBit) {
  const std::vector<float> row = RandomVec(37, 41, 12.0f);
  std::vector<float> plain = row;
  SoftmaxInPlace(plain.data(), static_cast<int64_t>(plain.size()));
  // The reference shifts in float as the kernel does (that rounding alone
  // is up to 1e-6 relative on the small terms), then goes on in double.
  float mx = row[0];
  for (float v : row) mx = std::max(mx, v);
  double z = 0;
  for (float v : row) z += std::exp(static_cast<double>(v - mx));
  for (size_t i = 0; i < row.size(); ++i) {
    const double want = std::exp(static_cast<double>(row[i] - mx)) / z;
    EXPECT_NEAR(plain[i], want, 1e-6 * want + 1e-30) << i;
  }
  for (int masked : {1, 3, 8, 11}) {
    std::vector<float> padded(static_cast<size_t>(masked), -std::numeric_limits<float>::infinity());
    padded.insert(padded.end(), row.begin(), row.end());
    SoftmaxInPlace(padded.data(), static_cast<int64_t>(padded.size()));
    for (int i = 0; i < masked; ++i) EXPECT_EQ(padded[static_cast<size_t>(i)], 0.0f);
    for (size_t i = 0; i < row.size(); ++i) {
      EXPECT_EQ(padded[static_cast<size_t>(masked) + i], plain[i]) << "masked " << masked << " i " << i;
    }
  }
}

TEST(ActivationTest, SwiGluAndSoftmax) {
  auto g = RandomVec(50, 31, 6.0f), u = RandomVec(50, 32);
  std::vector<float> out(50);
  SwiGlu(g.data(), u.data(), 50, out.data());
  for (int i = 0; i < 50; ++i) {
    const double want = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
    EXPECT_NEAR(out[i], want, 1e-6 * (1 + std::fabs(want)));
  }
  std::vector<float> s = {1.0f, 2.0f, -std::numeric_limits<float>::infinity(), 3.0f};
  SoftmaxInPlace(s.data(), 4);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(s[0], std::exp(1.0) / z, 1e-7);
  EXPECT_NEAR(s[1], std::exp(2.0) / z, 1e-7);
  EXPECT_EQ(s[2], 0.0f);
  EXPECT_NEAR(s[3], std::exp(3.0) / z, 1e-7);
  std::vector<float> none(3, -std::numeric_limits<float>::infinity());
  SoftmaxInPlace(none.data(), 3);
  EXPECT_EQ(none, std::vector<float>(3, 0.0f));
}

TEST(ActivationTest, SoftmaxWithASinkLeavesItsShareOut) {
  for (float sink : {-3.0f, 0.0f, 2.5f, 40.0f}) {
    std::vector<float> s = {1.0f, 2.0f, -std::numeric_limits<float>::infinity(), 3.0f};
    SoftmaxInPlace(s.data(), 4, sink);
    const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(static_cast<double>(sink));
    EXPECT_NEAR(s[0], std::exp(1.0) / z, 1e-7) << sink;
    EXPECT_NEAR(s[3], std::exp(3.0) / z, 1e-7) << sink;
    EXPECT_EQ(s[2], 0.0f);
  }
  // Every score masked: zeros, whatever the sink.
  std::vector<float> none(3, -std::numeric_limits<float>::infinity());
  SoftmaxInPlace(none.data(), 3, 1.0f);
  EXPECT_EQ(none, std::vector<float>(3, 0.0f));
}

TEST(ActivationTest, SwiGluOaiClampsThenGates) {
  const std::vector<float> g = {-9.0f, -1.0f, 0.0f, 0.5f, 6.9f, 7.5f, 30.0f};
  const std::vector<float> u = {-8.0f, 0.3f, 2.0f, -7.2f, 1.0f, 9.0f, -0.5f};
  std::vector<float> out(g.size());
  SwiGluOai(g.data(), u.data(), static_cast<int64_t>(g.size()), 1.702f, 7.0f, out.data());
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = std::min(g[i], 7.0f);  // the gate only from above
    const double y = std::clamp(static_cast<double>(u[i]), -7.0, 7.0);
    const double want = x / (1 + std::exp(-1.702 * x)) * (y + 1);
    EXPECT_NEAR(out[i], want, 1e-6 * (1 + std::fabs(want))) << i;
  }
}

}  // namespace
}  // namespace cairn
