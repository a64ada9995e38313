// The packed layout of the Q8_0 / Q4_0 kernels (QuantDotKernel::pack,
// packed_dot): every output of packed_dot has exactly the bits of `dot` on
// the GGUF rows the groups were packed from, for decode steps and prompts
// alike; a packed group stays within its rows' bytes; and MatMul over a
// matrix from PackWeights (whole groups packed, tail rows as GGUF rows)
// equals MatMul over the GGUF matrix.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/kernels/cpu_isa.h"
#include "backends/kernels/matmul.h"
#include "backends/kernels/quant_dot.h"
#include "backends/kernels/thread_pool.h"
#include "backends/model/dequant.h"
#include "gtest/gtest.h"

namespace cairn {
namespace {

constexpr GgmlType kBlockTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0};

// The kernels for `type` this CPU runs that have a packed layout.
std::vector<const QuantDotKernel*> PackingKernels(GgmlType type) {
  std::vector<const QuantDotKernel*> packing;
  for (const QuantDotKernel* k : QuantDotKernelsFor(type)) {
    if (k->pack_rows > 0) packing.push_back(k);
  }
  return packing;
}

// n_rows GGUF rows of n elements: random quant bytes, block scales drawn
// from +-[0.001, 0.05] (some zero); the first row of every 8 has its
// extreme quants (Q8_0 127, Q4_0 nibbles 15), where int16 sums come closest
// to overflowing.
std::vector<uint8_t> GgufRows(GgmlType type, int64_t n_rows, int64_t n, uint32_t seed) {
  const GgmlTypeTraits& traits = Traits(type);
  const size_t rb = RowBytes(type, n);
  std::mt19937 rng(seed);
  std::vector<uint8_t> w(rb * static_cast<size_t>(n_rows));
  for (uint8_t& byte : w) byte = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> magnitude(0.001f, 0.05f);
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t b = 0; b < n / traits.block_size; ++b) {
      uint8_t* block = w.data() + r * rb + b * traits.block_bytes;
      if (r % 8 == 0) std::memset(block + 2, type == GgmlType::kQ8_0 ? 0x7F : 0xFF, traits.block_bytes - 2);
      const uint32_t dice = rng() % 16;
      const float scale = dice == 0 ? 0.0f : dice < 4 ? -magnitude(rng) : magnitude(rng);
      const uint16_t half = Fp32ToFp16(scale);
      std::memcpy(block, &half, 2);
    }
  }
  return w;
}

// n_tokens activation rows of n elements, quantized by k: normal values,
// every 5th block all zero, every 3rd token a constant (its quants all
// +-127, the largest products).
std::vector<uint8_t> QuantizedTokens(const QuantDotKernel& k, int64_t n_tokens, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  const size_t stride = k.activation_row_bytes(n);
  std::vector<uint8_t> qx(stride * static_cast<size_t>(n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < n; ++i) x[i] = t % 3 == 2 ? 0.5f : (i / 32) % 5 == 4 ? 0.0f : normal(rng);
    k.quantize(x.data(), n, qx.data() + t * stride);
  }
  return qx;
}

// So that the tests below test something wherever the AVX2 kernels run.
TEST(BlockPackedTest, TheAvx2KernelsPack) {
  if (!CpuRuns(Isa::kAvx2)) GTEST_SKIP() << "no AVX2: the portable kernels read GGUF rows only";
  for (GgmlType type : kBlockTypes) {
    const std::vector<const QuantDotKernel*> packing = PackingKernels(type);
    ASSERT_FALSE(packing.empty()) << TypeName(type);
    for (const QuantDotKernel* k : packing) {
      EXPECT_EQ(16 % k->pack_rows, 0) << TypeName(type) << " " << k->isa;
      EXPECT_NE(k->pack, nullptr) << TypeName(type) << " " << k->isa;
      EXPECT_NE(k->packed_dot, nullptr) << TypeName(type) << " " << k->isa;
    }
  }
}

TEST(BlockPackedTest, PackedDotHasTheBitsOfDotOnGgufRows) {
  for (GgmlType type : kBlockTypes) {
    for (const QuantDotKernel* k : PackingKernels(type)) {
      for (int64_t n : {32, 256, 4096}) {
        for (int64_t rows : {8, 16, 64}) {
          const size_t rb = RowBytes(type, n);
          const std::vector<uint8_t> w = GgufRows(type, rows, n, static_cast<uint32_t>(n + rows));
          std::vector<uint8_t> packed(w.size());
          k->pack(w.data(), rows, n, packed.data());
          for (int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 8, 16, 300}) {
            const std::string where = std::string(TypeName(type)) + " " + std::string(k->isa) +
                                      " n=" + std::to_string(n) + " rows=" + std::to_string(rows) +
                                      " tokens=" + std::to_string(tokens);
            const std::vector<uint8_t> qx = QuantizedTokens(*k, tokens, n, static_cast<uint32_t>(tokens));
            const size_t qs = k->activation_row_bytes(n);
            // Outputs rows + 3 apart: the 3 between must stay untouched.
            const int64_t ldy = rows + 3;
            std::vector<float> want(static_cast<size_t>(tokens * ldy), -1.0f), got(want.size(), -1.0f);
            k->dot(w.data(), rb, rows, qx.data(), qs, tokens, n, want.data(), ldy);
            k->packed_dot(packed.data(), rows, qx.data(), qs, tokens, n, got.data(), ldy);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << where;
          }
        }
      }
    }
  }
}

TEST(BlockPackedTest, AGroupStaysInItsRowsBytes) {
  for (GgmlType type : kBlockTypes) {
    for (const QuantDotKernel* k : PackingKernels(type)) {
      const int64_t n = 256, rows = 4 * k->pack_rows;
      const size_t rb = RowBytes(type, n), group_bytes = rb * static_cast<size_t>(k->pack_rows);
      const std::vector<uint8_t> w = GgufRows(type, rows, n, 9);
      // All groups at once, and each group alone at its rows' offset, into
      // buffers with a guard past the end: the same bytes, guard untouched.
      constexpr size_t kGuard = 64;
      std::vector<uint8_t> whole(w.size() + kGuard, 0xA5), each(w.size() + kGuard, 0x5A);
      k->pack(w.data(), rows, n, whole.data());
      for (int64_t g = 0; g < rows / k->pack_rows; ++g) {
        k->pack(w.data() + g * group_bytes, k->pack_rows, n, each.data() + g * group_bytes);
      }
      EXPECT_EQ(std::memcmp(whole.data(), each.data(), w.size()), 0) << TypeName(type) << " " << k->isa;
      for (size_t i = w.size(); i < whole.size(); ++i) {
        ASSERT_EQ(whole[i], 0xA5) << TypeName(type) << " " << k->isa;
        ASSERT_EQ(each[i], 0x5A) << TypeName(type) << " " << k->isa;
      }
    }
  }
}

TEST(BlockPackedTest, MatMulOnPackWeightsEqualsGgufRows) {
  ThreadPool pool(2);
  int packed_matrices = 0;
  for (GgmlType type : kBlockTypes) {
    for (int64_t n_out : {8, 40, 61, 200}) {
      const int64_t n_in = 512;
      if (PackingKernel(type, n_in, n_out) == nullptr) continue;  // this type reads GGUF rows here
      ++packed_matrices;
      std::vector<uint8_t> data = GgufRows(type, n_out, n_in, static_cast<uint32_t>(n_out));
      const WeightMatrix rows{type, n_in, n_out, data.data()};
      std::vector<uint8_t> storage(rows.bytes());
      const WeightMatrix packed = PackWeights(rows, storage.data(), pool);
      ASSERT_NE(packed.packed, nullptr);
      for (int64_t tokens : {1, 5, 300}) {
        std::mt19937 rng(static_cast<uint32_t>(tokens));
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(tokens * n_in));
        for (float& v : x) v = normal(rng);
        std::vector<float> want(static_cast<size_t>(tokens * n_out)), got(want.size());
        MatMul(rows, x.data(), tokens, want.data(), pool, MatMulPrecision::kInt8Activations);
        MatMul(packed, x.data(), tokens, got.data(), pool, MatMulPrecision::kInt8Activations);
        ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
            << TypeName(type) << " n_out " << n_out << " tokens " << tokens;
      }
    }
  }
  if (packed_matrices == 0) GTEST_SKIP() << "MatMul packs nothing on this CPU (or under this CAIRN_ISA)";
}

}  // namespace
}  // namespace cairn
