// GemmFloatWeights (the prompt GEMM of F32 and F16 weights) and
// StreamFloatWeights (the decode product of F32, F16 and BF16 weights)
// against a double-precision reference on shapes that are not multiples of
// their blocking (6 tokens x 64 outputs per register block, input blocks of
// up to 2048; 32 and 8 inputs a step), and the same bits whatever the thread
// count; GemmTakes and StreamTakes under the CPU and the CAIRN_ISA cap (ctest
// runs this binary again under CAIRN_ISA=avx2, where the AVX2 kernels run on
// an AVX-512 CPU too, and =portable, where the products skip).
#include "backends/kernels/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

#include "backends/kernels/cpu_isa.h"
#include "backends/model/dequant.h"
#include "gtest/gtest.h"
#include "tests/backends/kernels/reference_dot.h"

namespace cairn {
namespace {

constexpr char kNoGemm[] =
    "GemmTakes is false (no AVX-512 F/BW/VL on this CPU, or CAIRN_ISA caps below avx512vnni): "
    "MatMul keeps sgemm";
constexpr char kNoStream[] =
    "StreamTakes is false (no AVX2/FMA/F16C on this CPU, or CAIRN_ISA=portable): MatMul keeps "
    "its portable decode path";

std::vector<float> RandomVec(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

struct Case {
  int64_t tokens, n_in, n_out;
};

// Rows of `type` holding wf (n_out x n_in, row-major); for F16 and BF16, wf
// is rounded to the values the rows really hold.
std::vector<uint8_t> Encode(GgmlType type, std::vector<float>& wf) {
  std::vector<uint8_t> bytes(wf.size() * (type == GgmlType::kF32 ? 4 : 2));
  for (size_t i = 0; i < wf.size(); ++i) {
    if (type == GgmlType::kF32) {
      std::memcpy(&bytes[i * 4], &wf[i], 4);
    } else if (type == GgmlType::kF16) {
      const uint16_t h = Fp32ToFp16(wf[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
      wf[i] = Fp16ToFp32(h);
    } else {
      const uint16_t h = Fp32ToBf16(wf[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
      wf[i] = Bf16ToFp32(h);
    }
  }
  return bytes;
}

// The ISA the environment caps the kernels at ("" when unset).
std::string_view IsaCapFromEnv() {
  const char* env = std::getenv("CAIRN_ISA");
  return env == nullptr ? "" : env;
}

// y1 (one thread) within 1e-6 of the summed magnitudes of a double-precision
// x . wf^T, and y3 (three threads) equal to it bit for bit.
void ExpectReference(GgmlType type, const Case& c, const std::vector<float>& wf, const std::vector<float>& x,
                     const std::vector<float>& y1, const std::vector<float>& y3) {
  for (int64_t t = 0; t < c.tokens; ++t) {
    for (int64_t o = 0; o < c.n_out; ++o) {
      const ReferenceDot want = DotInDouble(&wf[o * c.n_in], &x[t * c.n_in], c.n_in);
      const size_t at = static_cast<size_t>(t * c.n_out + o);
      ASSERT_LE(std::fabs(y1[at] - want.value), 1e-6 * want.magnitude + 1e-30)
          << TypeName(type) << " tokens " << c.tokens << " n_in " << c.n_in << " n_out " << c.n_out << " t " << t
          << " o " << o;
      ASSERT_EQ(y1[at], y3[at]) << "thread count changed the result at t " << t << " o " << o;
    }
  }
}

// A product whose kernels do not take F32 weights leaves y as it was.
void ExpectLeavesYAlone(void (*product)(const WeightMatrix&, const float*, int64_t, float*, ThreadPool&)) {
  ThreadPool pool(2);
  const std::vector<float> wx(4 * 4, 1.0f);
  const WeightMatrix w{GgmlType::kF32, 4, 4, reinterpret_cast<const uint8_t*>(wx.data())};
  std::vector<float> y(4 * 4, 5.0f);
  product(w, wx.data(), 4, y.data(), pool);
  for (float v : y) EXPECT_EQ(v, 5.0f);
}

// The kernels are in every build (CAIRN_NATIVE or not): GemmTakes F32 and
// F16 exactly where the CPU runs AVX-512 F/BW/VL and CAIRN_ISA does not cap
// it; when it does not take them, the products leave y alone.
TEST(GemmTest, TakesF32AndF16WhereTheCpuAndCairnIsaAllow) {
  const std::string_view cap = IsaCapFromEnv();
  const bool capped = cap == "avx2" || cap == "portable";
  const bool want = CpuRunsAvx512Float() && !capped;
  EXPECT_EQ(GemmTakes(GgmlType::kF32), want) << "CAIRN_ISA=" << cap;
  EXPECT_EQ(GemmTakes(GgmlType::kF16), want) << "CAIRN_ISA=" << cap;
  EXPECT_FALSE(GemmTakes(GgmlType::kQ8_0));
  EXPECT_FALSE(GemmTakes(GgmlType::kBF16));
  if (!want) ExpectLeavesYAlone(&GemmFloatWeights);
}

TEST(GemmTest, MatchesReferenceOnOddShapesForF32AndF16) {
  if (!GemmTakes(GgmlType::kF32)) GTEST_SKIP() << kNoGemm;
  const Case cases[] = {{1, 1, 1},      {5, 15, 63},   {6, 16, 64},    {7, 17, 65},
                        {13, 100, 130}, {17, 33, 200}, {40, 2100, 70}, {100, 4097, 129}};
  ThreadPool one(1), three(3);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16}) {
    for (const Case& c : cases) {
      std::vector<float> wf = RandomVec(static_cast<size_t>(c.n_in * c.n_out), 7);
      const std::vector<uint8_t> bytes = Encode(type, wf);
      const WeightMatrix w{type, c.n_in, c.n_out, bytes.data()};
      const std::vector<float> x = RandomVec(static_cast<size_t>(c.tokens * c.n_in), 11);
      std::vector<float> y1(static_cast<size_t>(c.tokens * c.n_out), -1.0f), y3(y1.size(), -2.0f);
      GemmFloatWeights(w, x.data(), c.tokens, y1.data(), one);
      GemmFloatWeights(w, x.data(), c.tokens, y3.data(), three);
      ASSERT_NO_FATAL_FAILURE(ExpectReference(type, {c.tokens, c.n_in, c.n_out}, wf, x, y1, y3));
    }
  }
}

// The row stream takes F32, F16 and BF16 wherever AVX2 runs and CAIRN_ISA
// is not portable (on AVX-512 CPUs F32 and F16 through the AVX-512 stream);
// when it does not take a type, the product leaves y alone.
TEST(GemmTest, StreamTakesFloatTypesWhereTheCpuAndCairnIsaAllow) {
  const bool want = CpuRuns(Isa::kAvx2) && IsaCapFromEnv() != "portable";
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    EXPECT_EQ(StreamTakes(type), want) << TypeName(type) << " CAIRN_ISA=" << IsaCapFromEnv();
    EXPECT_TRUE(!GemmTakes(type) || StreamTakes(type)) << TypeName(type);
  }
  EXPECT_FALSE(StreamTakes(GgmlType::kQ8_0));
  EXPECT_FALSE(StreamTakes(GgmlType::kQ4_K));
  if (!want) ExpectLeavesYAlone(&StreamFloatWeights);
}

// StreamFloatWeights (decode steps) on odd shapes (around its steps of 32
// and 8 inputs), 1 to 7 tokens (groups of 3 and a remainder), against the
// reference and across threads (1, 2, 3: odd splits of 67 rows).
TEST(GemmTest, StreamMatchesReferenceForFewTokens) {
  if (!StreamTakes(GgmlType::kF32)) GTEST_SKIP() << kNoStream;
  ThreadPool one(1), two(2), three(3);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    for (int64_t n_in : {1, 7, 8, 15, 16, 31, 33, 40, 100, 2100}) {
      const int64_t n_out = 67;
      std::vector<float> wf = RandomVec(static_cast<size_t>(n_in * n_out), 3);
      const std::vector<uint8_t> bytes = Encode(type, wf);
      const WeightMatrix w{type, n_in, n_out, bytes.data()};
      for (int64_t tokens = 1; tokens <= 7; ++tokens) {
        const std::vector<float> x = RandomVec(static_cast<size_t>(tokens * n_in), 13);
        std::vector<float> y1(static_cast<size_t>(tokens * n_out), -1.0f), y2(y1.size(), -3.0f), y3(y1.size(), -2.0f);
        StreamFloatWeights(w, x.data(), tokens, y1.data(), one);
        StreamFloatWeights(w, x.data(), tokens, y2.data(), two);
        StreamFloatWeights(w, x.data(), tokens, y3.data(), three);
        ASSERT_NO_FATAL_FAILURE(ExpectReference(type, {tokens, n_in, n_out}, wf, x, y1, y3));
        ASSERT_EQ(y1, y2) << TypeName(type) << " n_in " << n_in << " tokens " << tokens;
        // A token's sums do not depend on the tokens it came with.
        std::vector<float> alone(static_cast<size_t>(n_out));
        StreamFloatWeights(w, x.data() + (tokens - 1) * n_in, 1, alone.data(), two);
        ASSERT_TRUE(std::equal(alone.begin(), alone.end(), y1.begin() + (tokens - 1) * n_out))
            << TypeName(type) << " n_in " << n_in << " tokens " << tokens;
      }
    }
  }
}

TEST(GemmTest, NoInputsGiveZeros) {
  ThreadPool pool(2);
  const float dummy = 0;
  const WeightMatrix w{GgmlType::kF32, 0, 3, reinterpret_cast<const uint8_t*>(&dummy)};
  std::vector<float> y(2 * 3, 5.0f);
  if (GemmTakes(GgmlType::kF32)) {
    GemmFloatWeights(w, &dummy, 2, y.data(), pool);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
  if (!StreamTakes(GgmlType::kF32)) GTEST_SKIP() << kNoStream;
  std::fill(y.begin(), y.end(), 5.0f);
  StreamFloatWeights(w, &dummy, 2, y.data(), pool);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace cairn
