// Dequantization reproduces the reference implementation bit for bit.
#include "backends/model/dequant.h"

#include <cmath>
#include <cstring>
#include <random>

#include "backends/model/gguf.h"
#include "gtest/gtest.h"
#include "tests/testing/shared_data.h"

namespace cairn {
namespace {

struct QuantCase {
  const char* file;
  GgmlType type;
  friend std::ostream& operator<<(std::ostream& os, const QuantCase& c) { return os << c.file; }
};

class GoldenQuant : public ::testing::TestWithParam<QuantCase> {};

TEST_P(GoldenQuant, MatchesReferenceBitForBit) {
  const auto [file, type] = GetParam();
  CAIRN_REQUIRE_SHARED(std::string("golden/quants/") + file);
  absl::StatusOr<std::unique_ptr<ModelFile>> model =
      ModelFile::Open(testing::SharedPath(std::string("golden/quants/") + file));
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<const TensorInfo*> q = (*model)->GetTensor("quantized");
  absl::StatusOr<const TensorInfo*> expected = (*model)->GetTensor("expected");
  ASSERT_TRUE(q.ok() && expected.ok());
  ASSERT_EQ((*q)->type, type);
  ASSERT_EQ((*expected)->type, GgmlType::kF32);
  ASSERT_EQ((*q)->shape, (*expected)->shape);

  const std::vector<float> got = DequantizeTensor(**q);
  ASSERT_EQ(got.size(), static_cast<size_t>((*expected)->n_elements()));
  const float* want = reinterpret_cast<const float*>((*expected)->data);
  size_t mismatches = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    if (a != b && mismatches++ < 5) ADD_FAILURE() << "element " << i << ": got " << got[i] << " want " << want[i];
  }
  EXPECT_EQ(mismatches, 0u);

  // Row by row gives the same as the whole tensor.
  std::vector<float> row(static_cast<size_t>((*q)->row_size()));
  DequantizeRow((*q)->type, (*q)->row(3), row.data(), (*q)->row_size());
  EXPECT_EQ(0, std::memcmp(row.data(), got.data() + 3 * (*q)->row_size(), row.size() * 4));
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, GoldenQuant,
    ::testing::Values(QuantCase{"q4_0.gguf", GgmlType::kQ4_0}, QuantCase{"q4_1.gguf", GgmlType::kQ4_1},
                      QuantCase{"q5_0.gguf", GgmlType::kQ5_0}, QuantCase{"q5_1.gguf", GgmlType::kQ5_1},
                      QuantCase{"q8_0.gguf", GgmlType::kQ8_0}, QuantCase{"q4_k.gguf", GgmlType::kQ4_K},
                      QuantCase{"q5_k.gguf", GgmlType::kQ5_K}, QuantCase{"q6_k.gguf", GgmlType::kQ6_K}),
    [](const auto& info) { return std::string(TypeName(info.param.type)); });

TEST(HalfPrecision, Fp16RoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0) continue;  // NaN payloads
    ASSERT_EQ(Fp32ToFp16(Fp16ToFp32(bits)), bits) << std::hex << h;
  }
}

TEST(HalfPrecision, Fp16KnownValues) {
  EXPECT_EQ(Fp16ToFp32(0x3c00), 1.0f);
  EXPECT_EQ(Fp16ToFp32(0xc000), -2.0f);
  EXPECT_EQ(Fp16ToFp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(Fp16ToFp32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(Fp16ToFp32(0x7c00)));
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7c00);                      // rounds to infinity
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -25)), 0x0000);         // tie to even (zero)
  EXPECT_EQ(Fp32ToFp16(std::ldexp(3.0f, -26)), 0x0001);
}

TEST(HalfPrecision, Bf16RoundsToNearestEven) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
  for (int i = 0; i < 10000; ++i) {
    const float f = dist(rng);
    const float back = Bf16ToFp32(Fp32ToBf16(f));
    EXPECT_LE(std::fabs(back - f), std::fabs(f) * std::ldexp(1.0f, -8));
  }
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3f80);
  EXPECT_TRUE(std::isnan(Bf16ToFp32(Fp32ToBf16(std::nanf("")))));
}

TEST(Dequantize, F16AndBf16Rows) {
  const std::vector<float> values = {0.5f, -1.25f, 3.0f, 1024.0f};
  std::vector<uint16_t> f16, bf16;
  for (float v : values) {
    f16.push_back(Fp32ToFp16(v));
    bf16.push_back(Fp32ToBf16(v));
  }
  std::vector<float> out(4);
  DequantizeRow(GgmlType::kF16, f16.data(), out.data(), 4);
  EXPECT_EQ(out, values);
  DequantizeRow(GgmlType::kBF16, bf16.data(), out.data(), 4);
  EXPECT_EQ(out, values);
}

}  // namespace
}  // namespace cairn
