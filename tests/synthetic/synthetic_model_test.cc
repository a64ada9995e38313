// SyntheticModel: deterministic values, edits that keep the other values,
// the weight types, and errors that name the tensor.
#include "synthetic/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/model/dequant.h"
#include "gtest/gtest.h"

namespace cairn::synthetic {
namespace {

// A model of no architecture's: three tensors of each kind of Init.
SyntheticModel Small() {
  SyntheticModel m("test");
  m.metadata().SetUint32(m.Key("answer"), 42);
  m.AddWeight("w", {64, 3});
  m.Add("u", {5}, Init::Uniform(2.0f, 3.0f));
  m.AddOnes("ones", {4, 2});
  m.Add("rows", {3, 4}, Init::RowUniform({0.0f, 1.0f, 0.0f, 0.5f}));
  return m;
}

std::vector<float> FileValues(const SyntheticModel& m, const std::string& name) {
  auto file = m.Open("small");
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return {};
  const TensorInfo* t = (*file)->FindTensor(name);
  EXPECT_NE(t, nullptr) << name;
  return t != nullptr ? DequantizeTensor(*t) : std::vector<float>();
}

TEST(SyntheticModelTest, SerializesTheSameBytesEveryTimeAndMaterializedOrNot) {
  const SyntheticModel lazy = Small();
  SyntheticModel materialized = Small();
  materialized.Materialize();
  auto a = lazy.Serialize(), b = lazy.Serialize(), c = materialized.Serialize();
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, *c);
  SyntheticModel reseeded = Small();
  reseeded.seed = 7;
  EXPECT_NE(*reseeded.Serialize(), *a);
}

TEST(SyntheticModelTest, InitsDrawWhatTheySay) {
  SyntheticModel m = Small();
  const float fan_in = 1.0f / std::sqrt(64.0f);
  for (float v : m.Values("w")) EXPECT_LE(std::abs(v), fan_in);
  for (float v : m.Values("u")) EXPECT_TRUE(v >= 2.0f && v < 3.0f) << v;
  EXPECT_EQ(m.Values("ones"), std::vector<float>(8, 1.0f));
  const std::vector<float>& rows = m.Values("rows");
  for (int r = 0; r < 4; ++r) {
    const float h = std::vector<float>{0.0f, 1.0f, 0.0f, 0.5f}[r];
    for (int i = 0; i < 3; ++i) EXPECT_LE(std::abs(rows[r * 3 + i]), h) << "row " << r;
  }
  EXPECT_NE(rows[3], 0.0f);
  // What the file holds is what was drawn.
  EXPECT_EQ(FileValues(m, "u"), m.Values("u"));
  auto file = m.Open("small");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*(*file)->metadata().GetInt("test.answer"), 42);
  EXPECT_EQ(*(*file)->Architecture(), "test");
}

TEST(SyntheticModelTest, EditsAfterMaterializeKeepTheOtherValues) {
  SyntheticModel m = Small();
  m.Materialize();
  const std::vector<float> u = m.Values("u"), rows = m.Values("rows");
  ASSERT_TRUE(m.Remove("w"));
  EXPECT_FALSE(m.Remove("w"));
  m.Add("u", {2}, Init::Constant(5.0f));  // replaced in place
  EXPECT_EQ(m.tensors()[0].name, "u");
  EXPECT_EQ(FileValues(m, "u"), std::vector<float>(2, 5.0f));
  EXPECT_EQ(FileValues(m, "rows"), rows);
  // Without Materialize a removed tensor's draws go to the next one.
  SyntheticModel lazy = Small();
  lazy.Remove("w");
  EXPECT_NE(FileValues(lazy, "u"), u);
}

TEST(SyntheticModelTest, WeightsTakeTheWeightTypeWhereTheirRowsFit) {
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    SCOPED_TRACE(TypeName(type));
    SyntheticModel m = Small();
    m.AddWeight("wide", {256, 2});
    m.AddWeight("narrow", {5, 2});
    m.weight_type = type;
    auto file = m.Open("typed");
    ASSERT_TRUE(file.ok()) << file.status();
    const bool k_quant = Traits(type).block_size == 256;
    EXPECT_EQ((*file)->FindTensor("wide")->type, type);
    EXPECT_EQ((*file)->FindTensor("w")->type, k_quant ? GgmlType::kF32 : type);  // 64 fits blocks of 32
    const bool per_value = Traits(type).block_size == 1;                         // F16, BF16: any row fits
    EXPECT_EQ((*file)->FindTensor("narrow")->type, per_value ? type : GgmlType::kF32);
    EXPECT_EQ((*file)->FindTensor("u")->type, GgmlType::kF32);  // not a weight
    const std::vector<float> got = DequantizeTensor(*(*file)->FindTensor("wide"));
    const float bound = 1.0f / std::sqrt(256.0f);
    if (k_quant) {
      // Random blocks: values of the Init's magnitude, not its values.
      const float max = std::abs(
          *std::max_element(got.begin(), got.end(), [](float a, float b) { return std::abs(a) < std::abs(b); }));
      EXPECT_GT(max, 0.0f);
      EXPECT_LT(max, 64 * bound);
      continue;
    }
    const std::vector<float>& want = m.Values("wide");
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], bound / 100) << i;
  }
}

TEST(SyntheticModelTest, InconsistentValuesAreRefusedByName) {
  SyntheticModel m = Small();
  m.Add("bad", {4}, Init::Values({1.0f, 2.0f}));
  auto s = m.Serialize().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'bad'"), std::string::npos) << s;
  SyntheticModel rows = Small();
  rows.Add("rows", {3, 4}, Init::RowUniform({1.0f}));
  EXPECT_EQ(rows.Serialize().status().code(), absl::StatusCode::kInvalidArgument);
  SyntheticModel q4 = Small();
  q4.AddWeight("given", {256, 1}, Init::Values(std::vector<float>(256, 0.5f)));
  q4.weight_type = GgmlType::kQ4_K;
  s = q4.Serialize().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("Q4_K"), std::string::npos) << s;
}

TEST(QuantizeQ8_0Test, RoundsEachBlockToItsOwnScale) {
  std::vector<float> x(64);
  for (size_t i = 0; i < 32; ++i) x[i] = static_cast<float>(i) - 16.0f;  // block 0: scale 16 / 127
  // Block 1 stays zeros: scale 0, every value 0.
  const std::vector<uint8_t> q = QuantizeQ8_0(x);
  ASSERT_EQ(q.size(), 2u * 34u);
  std::vector<float> back(64);
  DequantizeRow(GgmlType::kQ8_0, q.data(), back.data(), 64);
  for (size_t i = 0; i < 32; ++i) EXPECT_NEAR(back[i], x[i], 16.0f / 127 / 2 + 1e-3f) << i;
  // The largest magnitude maps to -127 times the fp16 scale.
  EXPECT_EQ(back[0], -127.0f * Fp16ToFp32(Fp32ToFp16(16.0f / 127.0f)));
  for (size_t i = 32; i < 64; ++i) EXPECT_EQ(back[i], 0.0f) << i;
}

}  // namespace
}  // namespace cairn::synthetic
