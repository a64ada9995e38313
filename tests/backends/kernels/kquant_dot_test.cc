// The K-quant integer dots (Q4_K, Q5_K, Q6_K with q8_K activations) on every
// instruction set this CPU runs: the q8_K quantizer's bytes and round trip,
// each kernel against the portable one (same integer sums; F32 rounding
// apart), and against the exact product of the dequantized weights with the
// unquantized activations within the bound the 8-bit rounding of the
// activations allows. Shapes: 1..9 rows x 1..20 tokens, rows of 256, 512 and
// 2816 elements, padded strides.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/kernels/matmul.h"
#include "backends/kernels/quant_dot.h"
#include "backends/kernels/quant_dot_kquant.h"
#include "backends/kernels/thread_pool.h"
#include "backends/model/dequant.h"
#include "backends/model/ggml_type.h"
#include "gtest/gtest.h"
#include "tests/backends/kernels/quant_dot_reference.h"

namespace cairn {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

// Every kernel for `type` this CPU runs, fastest first; the portable one last.
std::vector<const QuantDotKernel*> Runnable(GgmlType type) { return QuantDotKernelsFor(type); }

const QuantDotKernel* Portable(GgmlType type) {
  const std::vector<const QuantDotKernel*> ks = Runnable(type);
  return ks.empty() || ks.back()->isa != "portable" ? nullptr : ks.back();
}

// Random weight rows with valid fp16 block scales (random quant bytes
// everywhere else, as bench/forward.cc makes its synthetic weights).
std::vector<uint8_t> RandomWeights(GgmlType type, int64_t n, int64_t rows, size_t stride, std::mt19937& g) {
  std::vector<uint8_t> w(stride * static_cast<size_t>(rows));
  for (uint8_t& b : w) b = static_cast<uint8_t>(g());
  const GgmlTypeTraits& t = Traits(type);
  std::uniform_real_distribution<float> scale(0.5f, 2.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t blk = 0; blk < n / t.block_size; ++blk) {
      uint8_t* b = w.data() + static_cast<size_t>(r) * stride + static_cast<size_t>(blk) * t.block_bytes;
      const uint16_t d = Fp32ToFp16(scale(g) / 1024.0f), dmin = Fp32ToFp16(scale(g) / 512.0f);
      if (type == GgmlType::kQ6_K) {
        std::memcpy(b + 208, &d, 2);
      } else {
        std::memcpy(b, &d, 2);
        std::memcpy(b + 2, &dmin, 2);
      }
    }
  }
  return w;
}

// Activations of a few kinds: ordinary, an all-zero block (scale 0), one
// large outlier per block (most quants near 0), and a block of one value.
std::vector<float> RandomActivations(int64_t n, int64_t tokens, size_t stride, std::mt19937& g) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(stride * static_cast<size_t>(tokens), std::numeric_limits<float>::quiet_NaN());
  for (int64_t t = 0; t < tokens; ++t) {
    float* row = x.data() + static_cast<size_t>(t) * stride;
    for (int64_t i = 0; i < n; ++i) row[i] = normal(g);
    switch (t % 4) {
      case 1:
        std::fill(row, row + 256, 0.0f);
        break;
      case 2:
        row[n - 7] = 300.0f;
        break;
      case 3:
        std::fill(row, row + 256, -0.75f);
        break;
      default:
        break;
    }
  }
  return x;
}

struct Expected {
  double exact = 0;  // dequantized weights . unquantized activations
  double bound = 0;  // sum |w_i| * (d_x(i) / 2): what the activations' rounding can move it
  double scale = 0;  // sum |w_i * x_i|: the size F32 rounding is relative to
};

// Exact (double) products of every row with every token, and the bound of
// the activations' 8-bit rounding: |x_i - q_i d| <= d / 2, d = amax / 127.
std::vector<Expected> ExactProducts(GgmlType type, const std::vector<uint8_t>& w, size_t w_stride, int64_t rows,
                                    const std::vector<float>& x, size_t x_stride, int64_t tokens, int64_t n) {
  std::vector<Expected> out(static_cast<size_t>(rows * tokens));
  std::vector<float> wf(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(type, w.data() + static_cast<size_t>(r) * w_stride, wf.data(), n);
    for (int64_t t = 0; t < tokens; ++t) {
      const float* xt = x.data() + static_cast<size_t>(t) * x_stride;
      Expected& e = out[static_cast<size_t>(t * rows + r)];
      for (int64_t b = 0; b < n; b += 256) {
        float amax = 0;
        for (int64_t i = b; i < b + 256; ++i) amax = std::max(amax, std::fabs(xt[i]));
        for (int64_t i = b; i < b + 256; ++i) {
          e.exact += static_cast<double>(wf[i]) * xt[i];
          e.bound += std::fabs(static_cast<double>(wf[i])) * amax / 254.0;
          e.scale += std::fabs(static_cast<double>(wf[i]) * xt[i]);
        }
      }
    }
  }
  return out;
}

std::string Name(const QuantDotKernel& k) { return std::string(TypeName(k.weight_type)) + "/" + std::string(k.isa); }

TEST(KQuantDotTest, EveryIsaHasAKernelPerTypeAndTheRegistryListsThem) {
  for (Isa isa : {Isa::kAvx512Vnni, Isa::kAvx2, Isa::kPortable}) {
    const std::vector<const QuantDotKernel*> ks = KQuantKernels(isa);
    ASSERT_EQ(ks.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(ks[i]->weight_type, kTypes[i]);
      EXPECT_EQ(ks[i]->block_elems, 256);
      EXPECT_EQ(ks[i]->activation_row_bytes(2816), 11 * kQ8KBlockBytes);
      EXPECT_EQ(ks[i]->isa, isa == Isa::kAvx512Vnni ? "avx512vnni" : isa == Isa::kAvx2 ? "avx2" : "portable");
    }
  }
  for (GgmlType type : kTypes) {
    ASSERT_NE(Portable(type), nullptr) << TypeName(type);
    const QuantDotKernel* best = FindQuantDot(type);
    ASSERT_NE(best, nullptr) << TypeName(type);
    const std::vector<const QuantDotKernel*> ks = Runnable(type);
    EXPECT_NE(std::find(ks.begin(), ks.end(), best), ks.end()) << TypeName(type);
  }
}

// Every ISA writes the same bytes; the scale is amax / 127, each quant is the
// nearest multiple of it (error <= d / 2), and the sums are those of the quants.
TEST(KQuantDotTest, QuantizeRoundTripsAndAgreesAcrossIsas) {
  std::mt19937 g(7);
  const int64_t n = 2816;
  const std::vector<float> x = RandomActivations(n, 8, static_cast<size_t>(n), g);
  const QuantDotKernel* portable = Portable(GgmlType::kQ4_K);
  ASSERT_NE(portable, nullptr);
  std::vector<uint8_t> ref(portable->activation_row_bytes(n));
  for (int64_t t = 0; t < 8; ++t) {
    const float* xt = x.data() + t * n;
    portable->quantize(xt, n, ref.data());
    for (int64_t b = 0; b < n / 256; ++b) {
      const uint8_t* qb = ref.data() + b * kQ8KBlockBytes;
      float d;
      std::memcpy(&d, qb, 4);
      float amax = 0;
      for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(xt[b * 256 + i]));
      EXPECT_EQ(d, amax / 127.0f) << "token " << t << " block " << b;
      for (int grp = 0; grp < 16; ++grp) {
        int sum = 0;
        for (int i = 16 * grp; i < 16 * grp + 16; ++i) {
          const int q = static_cast<int8_t>(qb[4 + i]);
          ASSERT_LE(std::abs(q), 127);
          EXPECT_LE(std::fabs(q * d - xt[b * 256 + i]), d * 0.5f * 1.0001f) << "token " << t << " elem " << b * 256 + i;
          sum += q;
        }
        int16_t s;
        std::memcpy(&s, qb + 4 + 256 + 2 * grp, 2);
        EXPECT_EQ(s, sum);
      }
    }
    for (GgmlType type : kTypes) {
      for (const QuantDotKernel* k : Runnable(type)) {
        std::vector<uint8_t> q(k->activation_row_bytes(n), 0xAA);
        k->quantize(xt, n, q.data());
        EXPECT_EQ(q, ref) << Name(*k) << " token " << t;
      }
    }
  }
}

// Every (rows, tokens) of `shapes` (each within max_rows x max_tokens) of
// rows of n elements against the portable kernel and the exact product, with
// padded weight, activation and output strides.
void CheckShapes(GgmlType type, int64_t n, int64_t max_rows, int64_t max_tokens,
                 const std::vector<std::pair<int64_t, int64_t>>& shapes, std::mt19937& g) {
  const size_t w_stride = RowBytes(type, n) + 13;
  const std::vector<uint8_t> w = RandomWeights(type, n, max_rows, w_stride, g);
  const size_t x_stride = static_cast<size_t>(n) + 5;
  const std::vector<float> x = RandomActivations(n, max_tokens, x_stride, g);
  const std::vector<Expected> want = ExactProducts(type, w, w_stride, max_rows, x, x_stride, max_tokens, n);
  const QuantDotKernel* portable = Portable(type);
  ASSERT_NE(portable, nullptr);
  const size_t qx_stride = portable->activation_row_bytes(n) + 7;
  std::vector<uint8_t> qx(qx_stride * static_cast<size_t>(max_tokens));
  for (int64_t t = 0; t < max_tokens; ++t) portable->quantize(x.data() + t * x_stride, n, qx.data() + t * qx_stride);
  const int64_t ldy_full = max_rows + 2;
  std::vector<float> ref(static_cast<size_t>(ldy_full * max_tokens));
  portable->dot(w.data(), w_stride, max_rows, qx.data(), qx_stride, max_tokens, n, ref.data(), ldy_full);
  for (const QuantDotKernel* k : Runnable(type)) {
    for (auto [rows, tokens] : shapes) {
      const int64_t ldy = rows + 3;
      std::vector<float> y(static_cast<size_t>(ldy * tokens), std::numeric_limits<float>::quiet_NaN());
      k->dot(w.data(), w_stride, rows, qx.data(), qx_stride, tokens, n, y.data(), ldy);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t r = 0; r < ldy; ++r) {
          const float got = y[static_cast<size_t>(t * ldy + r)];
          if (r >= rows) {
            ASSERT_TRUE(std::isnan(got)) << Name(*k) << " wrote past row " << rows << " at " << r;
            continue;
          }
          const Expected& e = want[static_cast<size_t>(t * max_rows + r)];
          const double fp = 1e-5 * e.scale;
          const float p = ref[static_cast<size_t>(t * ldy_full + r)];
          // Bit for bit: every kernel rounds the same F32 operations in the
          // same order, whatever the shape of the call (quant_dot_kquant.h).
          ASSERT_EQ(got, p) << Name(*k) << " n " << n << " rows " << rows << " tokens " << tokens << " r " << r << " t "
                            << t;
          ASSERT_NEAR(got, e.exact, e.bound + fp)
              << Name(*k) << " n " << n << " rows " << rows << " tokens " << tokens << " r " << r << " t " << t;
        }
      }
    }
  }
}

// The shapes of the brief: 1..9 rows x 1..20 tokens (decode, batched decode
// and the row-wise tiles).
TEST(KQuantDotTest, MatchesPortableAndExactProductOnEveryShape) {
  std::mt19937 g(42);
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int64_t rows = 1; rows <= 9; ++rows) {
    for (int64_t tokens = 1; tokens <= 20; ++tokens) shapes.emplace_back(rows, tokens);
  }
  for (GgmlType type : kTypes) {
    for (int64_t n : {256, 512, 2816}) CheckShapes(type, n, 9, 20, shapes, g);
  }
}

// Prompt and batched-decode shapes: panels of 8 and 16 rows with the rows
// left over, token counts around the panel threshold (AVX2: 5) and the
// register tiles (8, 4, 3, 2, 1).
TEST(KQuantDotTest, MatchesPortableAndExactProductOnPromptShapes) {
  std::mt19937 g(43);
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{16, 16}, {16, 15}, {17, 16}, {33, 23}, {47, 40}, {35, 17},
                                                           {16, 3},  {16, 4},  {16, 5},  {24, 6},  {41, 7},  {40, 8}};
  for (GgmlType type : kTypes) {
    for (int64_t n : {256, 2816}) CheckShapes(type, n, 47, 40, shapes, g);
  }
}

// Every quant at its largest (all quant and scale bits set) against
// activations at +-127: the integer sums reach their extremes (no int16
// saturation in the pairwise products, no int32 overflow per block), in the
// row-wise tiles (2 rows x 3 tokens) and the prompt panels (17 x 17).
TEST(KQuantDotTest, ExtremeBlocksAreExact) {
  const int64_t n = 512;
  for (GgmlType type : kTypes) {
    for (auto [rows, tokens] : {std::pair<int64_t, int64_t>{2, 3}, {17, 17}}) {
      const size_t w_stride = RowBytes(type, n);
      std::vector<uint8_t> w(w_stride * static_cast<size_t>(rows), 0xFF);
      const uint16_t d = Fp32ToFp16(1.0f / 1024), dmin = Fp32ToFp16(1.0f / 4096);
      for (size_t off = 0; off < w.size(); off += Traits(type).block_bytes) {
        if (type == GgmlType::kQ6_K) {
          std::memcpy(&w[off + 208], &d, 2);
        } else {
          std::memcpy(&w[off], &d, 2);
          std::memcpy(&w[off + 2], &dmin, 2);
        }
      }
      // Odd rows of Q6_K: scales of -128 instead of -1; K4 rows keep 63.
      if (type == GgmlType::kQ6_K) {
        for (int64_t r = 1; r < rows; r += 2) {
          for (int64_t b = 0; b < n / 256; ++b) std::memset(&w[r * w_stride + b * 210 + 192], 0x80, 16);
        }
      }
      std::vector<float> x(static_cast<size_t>(tokens * n));
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t i = 0; i < n; ++i) {
          switch (t % 3) {
            case 0:
              x[t * n + i] = 1.0f;
              break;
            case 1:
              x[t * n + i] = -1.0f;
              break;
            default:
              x[t * n + i] = (i % 3 == 0) ? 2.0f : -2.0f;
              break;
          }
        }
      }
      const std::vector<Expected> want = ExactProducts(type, w, w_stride, rows, x, n, tokens, n);
      for (const QuantDotKernel* k : Runnable(type)) {
        const size_t qs = k->activation_row_bytes(n);
        std::vector<uint8_t> qx(qs * static_cast<size_t>(tokens));
        for (int64_t t = 0; t < tokens; ++t) k->quantize(x.data() + t * n, n, qx.data() + t * qs);
        std::vector<float> y(static_cast<size_t>(rows * tokens));
        k->dot(w.data(), w_stride, rows, qx.data(), qs, tokens, n, y.data(), rows);
        for (size_t i = 0; i < y.size(); ++i) {
          // These activations are exact multiples of their scale: no rounding.
          EXPECT_NEAR(y[i], want[i].exact, 1e-6 * want[i].scale) << Name(*k) << " rows " << rows << " output " << i;
        }
      }
    }
  }
}

// MatMul(kInt8Activations) on K-quant weights is the chosen kernel's dot over
// quantized rows, split over threads, row blocks and token groups: equal to
// one dot() call over everything, bit for bit, and each token's row equal to
// the same token computed alone (the fast path does not depend on batch
// composition, so chunked and cached prompts see the same products).
TEST(KQuantDotTest, MatMulEqualsDotAndDoesNotDependOnTheOtherTokens) {
  ThreadPool pool(2);
  std::mt19937 g(44);
  for (GgmlType type : kTypes) {
    const QuantDotKernel* k = FindQuantDot(type);
    ASSERT_NE(k, nullptr);
    const int64_t n = 2816, n_out = 300;
    const size_t rb = RowBytes(type, n);
    const std::vector<uint8_t> wdata = RandomWeights(type, n, n_out, rb, g);
    const WeightMatrix w{type, n, n_out, wdata.data()};
    for (int64_t tokens : {1, 5, 16, 17, 100}) {
      SCOPED_TRACE(std::string(TypeName(type)) + " tokens " + std::to_string(tokens));
      const std::vector<float> x = RandomActivations(n, tokens, static_cast<size_t>(n), g);
      std::vector<float> y(static_cast<size_t>(tokens * n_out));
      MatMul(w, x.data(), tokens, y.data(), pool, MatMulPrecision::kInt8Activations);
      ASSERT_EQ(y, QuantizeThenDot(*k, wdata.data(), rb, n_out, x.data(), tokens, n));
      for (int64_t t : {int64_t{0}, tokens / 2, tokens - 1}) {
        std::vector<float> alone(static_cast<size_t>(n_out));
        MatMul(w, x.data() + t * n, 1, alone.data(), pool, MatMulPrecision::kInt8Activations);
        ASSERT_TRUE(std::equal(alone.begin(), alone.end(), y.begin() + t * n_out)) << "token " << t;
      }
    }
  }
}

}  // namespace
}  // namespace cairn
