// The K-quant kernels' packed layout (QuantDotKernel::pack / packed_dot,
// backends/kernels/quant_dot_kquant_packed_avx2.cc): packed rows give the
// same bits as `dot` on the GGUF rows they came from, for every token
// count (each path: decode tiles, panels) and shape, with the rows past the
// last whole group left to `dot`; and MatMul over a PackWeights matrix
// equals MatMul over the GGUF one. Kernels without a packed layout (or
// CPUs without one) have nothing to check here.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/kernels/matmul.h"
#include "backends/kernels/quant_dot.h"
#include "backends/kernels/thread_pool.h"
#include "backends/model/dequant.h"
#include "backends/model/ggml_type.h"
#include "gtest/gtest.h"

namespace cairn {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
constexpr int64_t kTokenCounts[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, 300};

// The kernels of `type` this CPU runs that have a packed layout.
std::vector<const QuantDotKernel*> PackingKernels(GgmlType type) {
  std::vector<const QuantDotKernel*> out;
  for (const QuantDotKernel* k : QuantDotKernelsFor(type)) {
    if (k->pack_rows > 0) out.push_back(k);
  }
  return out;
}

// `rows` GGUF rows of n elements: random bytes (every quant and packed
// scale value), block scales set to finite fp16 values. Row 0 has every
// quant at its largest (the int16 sums' worst case).
std::vector<uint8_t> GgufRows(GgmlType type, int64_t n, int64_t rows, std::mt19937& g) {
  const GgmlTypeTraits& t = Traits(type);
  std::vector<uint8_t> w(RowBytes(type, n) * static_cast<size_t>(rows));
  for (uint8_t& b : w) b = static_cast<uint8_t>(g());
  std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
  const size_t scale_at = type == GgmlType::kQ6_K ? 208 : 0;
  for (size_t at = 0; at < w.size(); at += t.block_bytes) {
    if (at < RowBytes(type, n)) std::memset(&w[at], 0xFF, t.block_bytes);
    const uint16_t d = Fp32ToFp16(scale(g) / 1024.0f), dmin = Fp32ToFp16(scale(g) / 512.0f);
    std::memcpy(&w[at + scale_at], &d, 2);
    if (type != GgmlType::kQ6_K) std::memcpy(&w[at + 2], &dmin, 2);
  }
  return w;
}

// Token t's activations: normal values, then every 3rd token one value
// (all quants 127 or -127), every 5th a block of zeros (scale 0).
std::vector<float> Activations(int64_t n, int64_t tokens, std::mt19937& g) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * tokens));
  for (int64_t t = 0; t < tokens; ++t) {
    float* row = &x[static_cast<size_t>(t * n)];
    for (int64_t i = 0; i < n; ++i) row[i] = normal(g);
    if (t % 3 == 2) std::fill(row, row + n, t % 2 == 0 ? 0.5f : -0.25f);
    if (t % 5 == 4) std::fill(row, row + 256, 0.0f);
  }
  return x;
}

// The activations quantized by k, rows padded to qx_stride bytes.
std::vector<uint8_t> Quantized(const QuantDotKernel& k, const std::vector<float>& x, int64_t n, int64_t tokens,
                               size_t qx_stride) {
  std::vector<uint8_t> qx(qx_stride * static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) k.quantize(&x[static_cast<size_t>(t * n)], n, &qx[qx_stride * t]);
  return qx;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// packed_dot on packed rows (rows a multiple of pack_rows) against dot on
// their GGUF rows, for every token count, bit for bit (outputs with a
// padded ldy, activations with a padded stride).
TEST(KQuantPackedTest, PackedDotHasTheBitsOfDotOnTheGgufRows) {
  std::mt19937 g(31);
  int checked = 0;
  for (GgmlType type : kTypes) {
    for (const QuantDotKernel* k : PackingKernels(type)) {
      for (int64_t n : {256, 512, 4096}) {
        for (int64_t rows : {8, 16, 64}) {
          ASSERT_EQ(rows % k->pack_rows, 0);
          const std::vector<uint8_t> w = GgufRows(type, n, rows, g);
          std::vector<uint8_t> packed(w.size(), 0xA5);
          k->pack(w.data(), rows, n, packed.data());
          EXPECT_NE(packed, w);  // a layout of its own
          for (int64_t tokens : kTokenCounts) {
            SCOPED_TRACE(std::string(TypeName(type)) + "/" + std::string(k->isa) + " n " + std::to_string(n) +
                         " rows " + std::to_string(rows) + " tokens " + std::to_string(tokens));
            const size_t qx_stride = k->activation_row_bytes(n) + 32;
            const std::vector<uint8_t> qx = Quantized(*k, Activations(n, tokens, g), n, tokens, qx_stride);
            const int64_t ldy = rows + 5;
            std::vector<float> want(static_cast<size_t>(ldy * tokens), -1.0f), got = want;
            k->dot(w.data(), RowBytes(type, n), rows, qx.data(), qx_stride, tokens, n, want.data(), ldy);
            k->packed_dot(packed.data(), rows, qx.data(), qx_stride, tokens, n, got.data(), ldy);
            ASSERT_TRUE(SameBits(got, want));
            ++checked;
          }
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no K-quant kernel of this CPU has a packed layout";
}

// Rows past the last whole group stay GGUF rows, which the caller hands to
// dot (as QuantMatMul does): together the same bits as dot on all rows.
TEST(KQuantPackedTest, TailRowsGoThroughDotBesideThePackedGroups) {
  std::mt19937 g(32);
  int checked = 0;
  for (GgmlType type : kTypes) {
    for (const QuantDotKernel* k : PackingKernels(type)) {
      const int64_t n = 512, rows = 3 * k->pack_rows + 5, grouped = 3 * k->pack_rows;
      const size_t rb = RowBytes(type, n);
      const std::vector<uint8_t> w = GgufRows(type, n, rows, g);
      std::vector<uint8_t> packed = w;
      k->pack(w.data(), grouped, n, packed.data());
      for (int64_t tokens : {1, 3, 7}) {
        SCOPED_TRACE(std::string(TypeName(type)) + " tokens " + std::to_string(tokens));
        const size_t qx_stride = k->activation_row_bytes(n);
        const std::vector<uint8_t> qx = Quantized(*k, Activations(n, tokens, g), n, tokens, qx_stride);
        std::vector<float> want(static_cast<size_t>(rows * tokens)), got(want.size(), -1.0f);
        k->dot(w.data(), rb, rows, qx.data(), qx_stride, tokens, n, want.data(), rows);
        k->packed_dot(packed.data(), grouped, qx.data(), qx_stride, tokens, n, got.data(), rows);
        k->dot(packed.data() + grouped * rb, rb, rows - grouped, qx.data(), qx_stride, tokens, n, got.data() + grouped,
               rows);
        ASSERT_TRUE(SameBits(got, want));
        ++checked;
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no K-quant kernel of this CPU has a packed layout";
}

// The loader's path: PackWeights (whole groups packed, the tail copied) and
// MatMul over the packed matrix, split over threads, equal to MatMul over
// the GGUF rows; the matrix keeps its size and tail bytes.
TEST(KQuantPackedTest, MatMulOverPackWeightsEqualsMatMulOverGgufRows) {
  ThreadPool pool(2);
  std::mt19937 g(33);
  int checked = 0;
  for (GgmlType type : kTypes) {
    const int64_t n = 768, n_out = 100;
    const QuantDotKernel* k = PackingKernel(type, n, n_out);
    if (k == nullptr) continue;
    const std::vector<uint8_t> wdata = GgufRows(type, n, n_out, g);
    const WeightMatrix w{type, n, n_out, wdata.data()};
    std::vector<uint8_t> out(w.bytes());
    const WeightMatrix packed = PackWeights(w, out.data(), pool);
    ASSERT_EQ(packed.packed, k);
    ASSERT_EQ(packed.bytes(), w.bytes());
    const size_t tail = static_cast<size_t>(n_out / k->pack_rows * k->pack_rows) * w.row_bytes();
    EXPECT_EQ(0, std::memcmp(out.data() + tail, wdata.data() + tail, w.bytes() - tail));
    for (int64_t tokens : {1, 4, 17}) {
      SCOPED_TRACE(std::string(TypeName(type)) + " tokens " + std::to_string(tokens));
      const std::vector<float> x = Activations(n, tokens, g);
      std::vector<float> want(static_cast<size_t>(n_out * tokens)), got(want.size(), -1.0f);
      MatMul(w, x.data(), tokens, want.data(), pool, MatMulPrecision::kInt8Activations);
      MatMul(packed, x.data(), tokens, got.data(), pool, MatMulPrecision::kInt8Activations);
      ASSERT_TRUE(SameBits(got, want));
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no K-quant kernel of this CPU has a packed layout";
}

}  // namespace
}  // namespace cairn
