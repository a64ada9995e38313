// The integer (8-bit activation) dot products: every ISA kernel this CPU
// runs against the portable one (same integer sums, float rounding apart)
// and against the exact F32 product of the dequantized weights, with a bound
// derived from the 8-bit rounding of the activations; odd shapes and strides.
#include "backends/kernels/quant_dot.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/kernels/matmul.h"
#include "backends/kernels/thread_pool.h"
#include "backends/model/dequant.h"
#include "gtest/gtest.h"
#include "tests/backends/kernels/quant_dot_reference.h"

namespace cairn {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0};

// `rows` weight rows of n elements with random quants and scales; rows are
// `stride` bytes apart (stride >= row bytes: padding between rows).
std::vector<uint8_t> RandomWeights(GgmlType type, int64_t rows, int64_t n, size_t stride, uint32_t seed) {
  const GgmlTypeTraits& t = Traits(type);
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  std::vector<uint8_t> w(static_cast<size_t>(rows) * stride);
  for (uint8_t& b : w) b = static_cast<uint8_t>(byte(g));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < n / t.block_size; ++b) {
      uint8_t* blk = w.data() + r * stride + b * t.block_bytes;
      float s = scale(g) * (byte(g) < 32 ? -1.0f : 1.0f);
      if (byte(g) < 8) s = 0.0f;
      const uint16_t h = Fp32ToFp16(s);
      std::memcpy(blk, &h, 2);
    }
  }
  return w;
}

std::vector<float> RandomActivations(int64_t rows, int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * n));
  for (float& v : x) v = d(g);
  // Some blocks all zero (scale 0), some with one outlier (coarse scale).
  for (int64_t i = 0; i + 32 <= rows * n; i += 7 * 32) std::fill(x.begin() + i, x.begin() + i + 32, 0.0f);
  for (int64_t i = 96; i < rows * n; i += 5 * 32 + 3) x[i] = 40.0f;
  return x;
}

struct Case {
  GgmlType type;
  int64_t n_rows, n_tokens, n;
};

// Runs every kernel on one shape and checks them against the portable one and
// against the exact product.
void CheckShape(const Case& c, uint32_t seed) {
  const std::vector<const QuantDotKernel*> kernels = QuantDotKernelsFor(c.type);
  ASSERT_FALSE(kernels.empty());
  ASSERT_EQ(kernels.back()->isa, "portable");
  const QuantDotKernel& portable = *kernels.back();
  const size_t rb = RowBytes(c.type, c.n);
  const size_t w_stride = rb + (c.n_rows % 2) * 5;  // odd shapes get unaligned rows
  const std::vector<uint8_t> w = RandomWeights(c.type, c.n_rows, c.n, w_stride, seed);
  const std::vector<float> x = RandomActivations(c.n_tokens, c.n, seed + 1);
  const size_t qx_stride = portable.activation_row_bytes(c.n);
  std::vector<uint8_t> qx(qx_stride * static_cast<size_t>(c.n_tokens));
  for (int64_t t = 0; t < c.n_tokens; ++t) portable.quantize(x.data() + t * c.n, c.n, qx.data() + t * qx_stride);

  // The exact product and the 8-bit rounding bound, in double.
  const int64_t ldy = c.n_rows + 3;
  std::vector<double> exact(static_cast<size_t>(c.n_tokens * ldy)), bound(exact.size()), mag(exact.size());
  std::vector<float> wrow(static_cast<size_t>(c.n));
  for (int64_t r = 0; r < c.n_rows; ++r) {
    DequantizeRow(c.type, w.data() + r * w_stride, wrow.data(), c.n);
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      const float* xt = x.data() + t * c.n;
      double e = 0, b = 0, m = 0;
      for (int64_t blk = 0; blk < c.n / 32; ++blk) {
        double amax = 0, wabs = 0;
        for (int64_t i = blk * 32; i < blk * 32 + 32; ++i) {
          e += static_cast<double>(wrow[i]) * xt[i];
          m += std::fabs(static_cast<double>(wrow[i]) * xt[i]);
          amax = std::max(amax, std::fabs(static_cast<double>(xt[i])));
          wabs += std::fabs(static_cast<double>(wrow[i]));
        }
        b += wabs * (amax / 127.0) * 0.5;  // each activation rounds by at most half a step
      }
      exact[t * ldy + r] = e;
      bound[t * ldy + r] = b;
      mag[t * ldy + r] = m;
    }
  }

  // The portable kernel first: the others are compared with its output.
  std::vector<const QuantDotKernel*> order(kernels.rbegin(), kernels.rend());
  std::vector<float> y_portable;
  for (const QuantDotKernel* k : order) {
    SCOPED_TRACE(std::string(TypeName(c.type)) + " " + std::string(k->isa) + " rows " + std::to_string(c.n_rows) +
                 " tokens " + std::to_string(c.n_tokens) + " n " + std::to_string(c.n));
    ASSERT_EQ(k->weight_type, c.type);
    ASSERT_EQ(k->block_elems, 32);
    ASSERT_EQ(k->activation_row_bytes(c.n), qx_stride);
    // The same activation bytes from every kernel's quantizer.
    std::vector<uint8_t> mine(qx.size());
    for (int64_t t = 0; t < c.n_tokens; ++t) k->quantize(x.data() + t * c.n, c.n, mine.data() + t * qx_stride);
    ASSERT_EQ(mine, qx);

    const float sentinel = -12345.0f;
    std::vector<float> y(exact.size(), sentinel);
    k->dot(w.data(), w_stride, c.n_rows, qx.data(), qx_stride, c.n_tokens, c.n, y.data(), ldy);
    if (k == &portable) y_portable = y;
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      for (int64_t r = 0; r < ldy; ++r) {
        const size_t i = static_cast<size_t>(t * ldy + r);
        if (r >= c.n_rows) {
          ASSERT_EQ(y[i], sentinel) << "wrote outside its rows at t " << t << " r " << r;
          continue;
        }
        // Float rounding of the scaled block sums: a few ulps of the magnitude.
        const double float_slack = 1e-5 * mag[i] + 1e-30;
        EXPECT_NEAR(y[i], exact[i], bound[i] * 1.0001 + float_slack) << "t " << t << " r " << r;
        if (!y_portable.empty() && k != &portable) {
          if (k->batch_invariant) {
            ASSERT_EQ(y[i], y_portable[i]) << "t " << t << " r " << r;
          } else {
            EXPECT_NEAR(y[i], y_portable[i], float_slack) << "t " << t << " r " << r;
          }
        }
      }
    }
  }
}

TEST(QuantDotTest, EveryKernelMatchesPortableAndExactOnOddShapes) {
  uint32_t seed = 1;
  for (GgmlType type : kTypes) {
    for (int64_t n : {32, 64, 96, 160, 1024}) {
      for (int64_t rows = 1; rows <= 9; ++rows) {
        for (int64_t tokens = 1; tokens <= 20; ++tokens) {
          // Every shape at small n; a sparser grid at the wide one.
          if (n == 1024 && (rows % 4 != 1 || tokens % 3 != 1)) continue;
          CheckShape({type, rows, tokens, n}, seed++);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(QuantDotTest, WideRowsAndManyTokens) {
  CheckShape({GgmlType::kQ8_0, 13, 37, 4096}, 7);
  CheckShape({GgmlType::kQ4_0, 13, 37, 4096}, 8);
  CheckShape({GgmlType::kQ4_0, 64, 5, 2048 + 32}, 9);  // odd block count: the AVX-512 half pair
  // The AVX-512 prompt path (16 rows packed, 8 or more tokens), with row
  // and token tails.
  for (GgmlType type : kTypes) {
    CheckShape({type, 16, 8, 64}, 10);
    CheckShape({type, 37, 19, 4096}, 11);
    CheckShape({type, 35, 9, 2048 + 32}, 12);
    CheckShape({type, 48, 30, 96}, 13);
  }
}

// Weights and activations at their extremes with the signs of a row's and a
// token's products all alike: the largest integer sums the kernels hold
// (vpmaddubsw pairs of 128 x 127, the lanes of the prompt panels), on the
// decode tiles (few tokens) and the prompt panels (16 rows x 16 tokens).
TEST(QuantDotTest, ExtremeQuantsDoNotSaturate) {
  for (GgmlType type : kTypes) {
    const int64_t n = 512, rows = 17;
    const size_t rb = RowBytes(type, n);
    const size_t block_bytes = Traits(type).block_bytes;
    std::vector<uint8_t> w(rb * rows);
    std::vector<double> value(rows);  // every weight of row r
    for (int64_t r = 0; r < rows; ++r) {
      const bool high = r % 2 == 1;
      // Q8_0: -128 or 127; Q4_0: nibbles 0 or 15, that is -8 or 7.
      const uint8_t fill = type == GgmlType::kQ8_0 ? (high ? 0x7F : 0x80) : (high ? 0xFF : 0x00);
      value[r] = type == GgmlType::kQ8_0 ? (high ? 127 : -128) : (high ? 7 : -8);
      for (int64_t b = 0; b < n / 32; ++b) {
        uint8_t* blk = w.data() + r * rb + b * block_bytes;
        const uint16_t one = Fp32ToFp16(1.0f);
        std::memcpy(blk, &one, 2);
        std::memset(blk + 2, fill, block_bytes - 2);
      }
    }
    for (const QuantDotKernel* k : QuantDotKernelsFor(type)) {
      for (int64_t tokens : {1, 2, 3, 16}) {
        std::vector<float> x(static_cast<size_t>(tokens * n));
        for (int64_t t = 0; t < tokens; ++t) std::fill_n(x.begin() + t * n, n, t % 2 == 0 ? 1.0f : -1.0f);
        const size_t qs = k->activation_row_bytes(n);
        std::vector<uint8_t> qx(qs * static_cast<size_t>(tokens));
        for (int64_t t = 0; t < tokens; ++t) k->quantize(x.data() + t * n, n, qx.data() + t * qs);
        std::vector<float> y(static_cast<size_t>(tokens * rows));
        k->dot(w.data(), rb, rows, qx.data(), qs, tokens, n, y.data(), rows);
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            // Each activation quantizes to +-127 at the scale 1/127.
            const double want =
                static_cast<double>(n) * value[r] * (t % 2 == 0 ? 1 : -1) * 127.0 * static_cast<double>(1.0f / 127.0f);
            ASSERT_NEAR(y[t * rows + r], want, 1e-5 * std::fabs(want))
                << TypeName(type) << " " << k->isa << " tokens " << tokens << " t " << t << " r " << r;
          }
        }
      }
    }
  }
}

TEST(QuantDotTest, QuantizeIsRoundToNearestOfAmaxOver127) {
  const QuantDotKernel* k = FindQuantDot(GgmlType::kQ8_0);
  ASSERT_NE(k, nullptr);
  const int64_t n = 256;
  std::vector<float> x = RandomActivations(1, n, 3);
  std::vector<uint8_t> qx(k->activation_row_bytes(n), 0xAB);
  k->quantize(x.data(), n, qx.data());
  const float* d = reinterpret_cast<const float*>(qx.data());
  const int32_t* sum = reinterpret_cast<const int32_t*>(qx.data() + 4 * (n / 32));
  const int8_t* q = reinterpret_cast<const int8_t*>(qx.data() + 8 * (n / 32));
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    int32_t s = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    EXPECT_EQ(d[b], amax / 127.0f) << "block " << b;
    for (int i = 0; i < 32; ++i) {
      const float v = x[b * 32 + i];
      const int8_t qi = q[b * 32 + i];
      s += qi;
      EXPECT_LE(std::abs(qi), 127);
      if (d[b] == 0) {
        EXPECT_EQ(qi, 0);
      } else {
        EXPECT_LE(std::fabs(v - qi * d[b]), 0.5f * d[b] * 1.0001f) << "block " << b << " i " << i;
      }
    }
    EXPECT_EQ(sum[b], s) << "block " << b;
  }
}

// The quantizer is vectorized where the build has AVX2; every kernel shares
// it, so its bytes must be those of the scalar definition (fmax over |x|,
// x * (1 / scale) rounded by nearbyint, 0 past +-127.5) for every input,
// special values included.
TEST(QuantDotTest, QuantizeEqualsTheScalarDefinitionBitForBit) {
  const QuantDotKernel* k = FindQuantDot(GgmlType::kQ8_0);
  ASSERT_NE(k, nullptr);
  const int64_t n = 32 * 12;
  std::vector<float> x = RandomActivations(1, n, 7);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (int i = 0; i < 32; ++i) x[i] = 0.0f;                                     // all zero
  for (int i = 0; i < 32; ++i) x[32 + i] = (i % 2 ? -1 : 1) * tiny * i;         // denormals
  for (int i = 0; i < 32; ++i) x[64 + i] = (i % 3 ? 1e30f : -3e38f) / (i + 1);  // huge
  x[96 + 5] = nan;
  x[96 + 29] = nan;  // in the last vector of the block: a NaN maximum would survive
  x[128 + 9] = inf;
  x[160 + 1] = -inf;
  x[192 + 3] = -0.0f;
  for (int i = 0; i < 32; ++i) x[224 + i] = 0.5f * static_cast<float>(i - 16);  // ties of x / scale
  x[224] = 127.0f;
  std::vector<uint8_t> got(k->activation_row_bytes(n), 0xAB);
  k->quantize(x.data(), n, got.data());
  std::vector<uint8_t> want(got.size(), 0);
  float* d = reinterpret_cast<float*>(want.data());
  int32_t* sum = reinterpret_cast<int32_t*>(want.data() + 4 * (n / 32));
  int8_t* q = reinterpret_cast<int8_t*>(want.data() + 8 * (n / 32));
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[b * 32 + i]));
    d[b] = amax / 127.0f;
    const float inv = d[b] != 0.0f ? 1.0f / d[b] : 0.0f;
    for (int i = 0; i < 32; ++i) {
      const float v = x[b * 32 + i] * inv;
      const int32_t qi = std::fabs(v) <= 127.5f ? static_cast<int32_t>(std::nearbyint(v)) : 0;
      q[b * 32 + i] = static_cast<int8_t>(qi);
      sum[b] += qi;
    }
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "byte " << i;
}

TEST(QuantDotTest, FindReturnsTheFastestRunnableKernelOrNull) {
  EXPECT_EQ(FindQuantDot(GgmlType::kF32), nullptr);
  EXPECT_EQ(FindQuantDot(GgmlType::kF16), nullptr);
  EXPECT_TRUE(QuantDotKernelsFor(GgmlType::kF32).empty());
  for (GgmlType type : kTypes) {
    const QuantDotKernel* k = FindQuantDot(type);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->weight_type, type);
    const std::vector<const QuantDotKernel*> all = QuantDotKernelsFor(type);
    const char* cap = std::getenv("CAIRN_ISA");
    if (cap == nullptr || *cap == '\0') {
      EXPECT_EQ(k, all.front());
    } else {
      // ctest runs this test again under CAIRN_ISA=avx2 and =portable: the
      // cap's kernel (when the CPU runs it) or the fastest one below it.
      bool seen_cap = false;
      for (const QuantDotKernel* c : all) {
        if (c->isa == cap) seen_cap = true;
      }
      if (seen_cap) {
        EXPECT_EQ(k->isa, cap);
      }
    }
  }
}

// MatMul(kInt8Activations) is the chosen kernel's dot over quantized rows,
// split over threads, row blocks and token groups: equal to one dot() call
// over everything, bit for bit (whatever the thread count). A token's
// result does not depend on the other tokens of the call: bit for bit the
// same alone and among any others with the AVX2 and portable kernels (so a
// server's batching of a sequence's tokens cannot change its replies); with
// the AVX-512 kernel, bit for bit among calls of fewer than 8 tokens and
// among calls of 8 or more (its prompt kernel), within float rounding
// between the two.
TEST(QuantMatMulTest, EqualsDotAndDoesNotDependOnTheOtherTokens) {
  ThreadPool pool(2);
  for (GgmlType type : kTypes) {
    const QuantDotKernel* k = FindQuantDot(type);
    ASSERT_NE(k, nullptr);
    for (int64_t n : {int64_t{64}, int64_t{4096}}) {
      const int64_t n_out = n == 64 ? 37 : 300;  // several row blocks at 4096
      const size_t rb = RowBytes(type, n);
      const std::vector<uint8_t> wdata = RandomWeights(type, n_out, n, rb, 11);
      const WeightMatrix w{type, n, n_out, wdata.data()};
      std::vector<float> wf(static_cast<size_t>(n * n_out));
      DequantizeRow(type, wdata.data(), wf.data(), n * n_out);
      for (int64_t tokens : {1, 5, 16, 17, 100}) {
        SCOPED_TRACE(std::string(TypeName(type)) + " n " + std::to_string(n) + " tokens " + std::to_string(tokens));
        const std::vector<float> x = RandomActivations(tokens, n, 12 + static_cast<uint32_t>(tokens));
        std::vector<float> y(static_cast<size_t>(tokens * n_out));
        MatMul(w, x.data(), tokens, y.data(), pool, MatMulPrecision::kInt8Activations);

        ASSERT_EQ(y, QuantizeThenDot(*k, wdata.data(), rb, n_out, x.data(), tokens, n));

        ThreadPool one(1);
        std::vector<float> y1(y.size());
        MatMul(w, x.data(), tokens, y1.data(), one, MatMulPrecision::kInt8Activations);
        ASSERT_EQ(y1, y) << "depends on the thread count";

        constexpr int64_t kGroup = 8;
        for (int64_t t : {int64_t{0}, tokens / 2, tokens - 1}) {
          // The same token among as few others as the call's kernel allows.
          const int64_t m = tokens >= kGroup ? kGroup : 1;
          const int64_t first = std::min(t, tokens - m);
          std::vector<float> part(static_cast<size_t>(m * n_out));
          MatMul(w, x.data() + first * n, m, part.data(), pool, MatMulPrecision::kInt8Activations);
          ASSERT_TRUE(std::equal(part.begin() + (t - first) * n_out, part.begin() + (t - first + 1) * n_out,
                                 y.begin() + t * n_out))
              << "token " << t;
          std::vector<float> alone(static_cast<size_t>(n_out));
          MatMul(w, x.data() + t * n, 1, alone.data(), pool, MatMulPrecision::kInt8Activations);
          if (k->batch_invariant) {
            ASSERT_TRUE(std::equal(alone.begin(), alone.end(), y.begin() + t * n_out)) << "token " << t;
            continue;
          }
          for (int64_t o = 0; o < n_out; ++o) {
            // Float rounding of the block sums: a few ulps of sum |w x|.
            double mag = 0;
            for (int64_t i = 0; i < n; ++i) mag += std::fabs(double{wf[o * n + i]} * x[t * n + i]);
            ASSERT_NEAR(alone[o], y[t * n_out + o], 1e-5 * mag) << "token " << t;
          }
        }
      }
    }
  }
}

TEST(QuantMatMulTest, ExactPrecisionAndTypesWithoutKernelStayExact) {
  ThreadPool pool(2);
  const int64_t n = 64, n_out = 8, tokens = 3;
  const std::vector<uint8_t> wdata = RandomWeights(GgmlType::kQ8_0, n_out, n, RowBytes(GgmlType::kQ8_0, n), 5);
  const WeightMatrix w{GgmlType::kQ8_0, n, n_out, wdata.data()};
  const std::vector<float> x = RandomActivations(tokens, n, 6);
  std::vector<float> exact(static_cast<size_t>(tokens * n_out)), fast(exact.size());
  MatMul(w, x.data(), tokens, exact.data(), pool, MatMulPrecision::kExact);
  MatMul(w, x.data(), tokens, fast.data(), pool, MatMulPrecision::kInt8Activations);
  EXPECT_NE(exact, fast);  // the flag reaches the kernel
  std::vector<float> wf(static_cast<size_t>(n * n_out));
  DequantizeRow(GgmlType::kQ8_0, wdata.data(), wf.data(), n * n_out);
  const WeightMatrix w32{GgmlType::kF32, n, n_out, reinterpret_cast<const uint8_t*>(wf.data())};
  std::vector<float> a(exact.size()), b(exact.size());
  MatMul(w32, x.data(), tokens, a.data(), pool, MatMulPrecision::kExact);
  MatMul(w32, x.data(), tokens, b.data(), pool, MatMulPrecision::kInt8Activations);
  EXPECT_EQ(a, b);  // F32 weights: no integer kernel, exact either way
}

}  // namespace
}  // namespace cairn
