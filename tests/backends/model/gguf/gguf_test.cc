// GGUF reader: every metadata type, both versions, alignment, splits, golden files.
#include "backends/model/gguf.h"

#include <unistd.h>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/model/gguf_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/shared_data.h"

namespace cairn {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> Bytes(std::initializer_list<float> values) {
  std::vector<uint8_t> b(values.size() * 4);
  std::memcpy(b.data(), values.begin(), b.size());
  return b;
}

GgufWriter EveryTypeWriter(uint32_t version, uint64_t alignment) {
  GgufWriter w(version, alignment);
  w.SetString("general.architecture", "llama");
  if (alignment != 32) w.SetUint32("general.alignment", static_cast<uint32_t>(alignment));
  using T = GgufValueType;
  w.Set("u8", MetadataValue::FromScalar(T::kUint8, uint64_t{200}));
  w.Set("i8", MetadataValue::FromScalar(T::kInt8, int64_t{-100}));
  w.Set("u16", MetadataValue::FromScalar(T::kUint16, uint64_t{60000}));
  w.Set("i16", MetadataValue::FromScalar(T::kInt16, int64_t{-30000}));
  w.SetUint32("u32", 4000000000u);
  w.SetInt32("i32", -2000000000);
  w.SetUint64("u64", 18000000000000000000ull);
  w.Set("i64", MetadataValue::FromScalar(T::kInt64, int64_t{-9000000000000000000}));
  w.SetFloat32("f32", 0.25f);
  w.Set("f64", MetadataValue::FromScalar(T::kFloat64, 1e300));
  w.SetBool("flag", true);
  w.SetString("str", "héllo");
  w.SetStringArray("strs", {"a", "", "ünï"});
  w.SetInt32Array("ints", {1, -2, 3});
  w.SetFloat32Array("floats", {0.5f, -1.5f});
  w.Set("u8s", MetadataValue::FromNumberArray(T::kUint8, {uint64_t{1}, uint64_t{255}}));
  w.Set("bools", MetadataValue::FromNumberArray(T::kBool, {true, false}));
  w.AddTensor("a", GgmlType::kF32, {2, 3}, Bytes({1, 2, 3, 4, 5, 6}));
  w.AddTensor("b", GgmlType::kF32, {4}, Bytes({7, 8, 9, 10}));
  return w;
}

class RoundTrip : public ::testing::TestWithParam<std::pair<uint32_t, uint64_t>> {};

TEST_P(RoundTrip, EveryValueTypeAndTensor) {
  const auto [version, alignment] = GetParam();
  const std::vector<uint8_t> image = EveryTypeWriter(version, alignment).Serialize();
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBuffer(image);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), version);
  EXPECT_EQ((*f)->alignment(), alignment);
  EXPECT_EQ((*f)->data_offset() % alignment, 0u);
  const Metadata& md = (*f)->metadata();
  EXPECT_EQ(*md.GetInt("u8"), 200);
  EXPECT_EQ(*md.GetInt("i8"), -100);
  EXPECT_EQ(*md.GetInt("u16"), 60000);
  EXPECT_EQ(*md.GetInt("i16"), -30000);
  EXPECT_EQ(*md.GetInt("u32"), 4000000000);
  EXPECT_EQ(*md.GetInt("i32"), -2000000000);
  EXPECT_EQ(*md.GetUint("u64"), 18000000000000000000ull);
  EXPECT_EQ(*md.GetInt("i64"), -9000000000000000000);
  EXPECT_EQ(*md.GetFloat("f32"), 0.25);
  EXPECT_EQ(*md.GetFloat("f64"), 1e300);
  EXPECT_EQ(*md.GetBool("flag"), true);
  EXPECT_EQ(*md.GetString("str"), "héllo");
  EXPECT_EQ(*md.GetStringArray("strs"), (std::vector<std::string>{"a", "", "ünï"}));
  EXPECT_EQ(*md.GetIntArray("ints"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*md.GetFloatArray("floats"), (std::vector<double>{0.5, -1.5}));
  EXPECT_EQ(*md.GetIntArray("u8s"), (std::vector<int64_t>{1, 255}));
  EXPECT_EQ(md.Find("bools")->TypeDescription(), "array[bool]");
  EXPECT_EQ(md.Find("u16")->type(), GgufValueType::kUint16);

  ASSERT_EQ((*f)->tensors().size(), 2u);
  const TensorInfo& a = (*f)->tensors()[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.n_rows(), 3);
  EXPECT_EQ(a.n_bytes, 24u);
  EXPECT_EQ(reinterpret_cast<const float*>(a.row(2))[1], 6.0f);
  const TensorInfo& b = (*f)->tensors()[1];
  EXPECT_EQ(b.offset % alignment, 0u);
  EXPECT_EQ(reinterpret_cast<const float*>(b.data)[3], 10.0f);
}

INSTANTIATE_TEST_SUITE_P(VersionsAndAlignments, RoundTrip,
                         ::testing::Values(std::make_pair(2u, uint64_t{32}), std::make_pair(3u, uint64_t{32}),
                                           std::make_pair(3u, uint64_t{64}), std::make_pair(3u, uint64_t{8})));

TEST(Metadata, AccessorErrorsNameKeyAndType) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBuffer(EveryTypeWriter(3, 32).Serialize());
  ASSERT_TRUE(f.ok());
  const Metadata& md = (*f)->metadata();
  absl::StatusOr<int64_t> i = md.GetInt("str");
  EXPECT_EQ(i.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(i.status().message(), HasSubstr("'str'"));
  EXPECT_THAT(i.status().message(), HasSubstr("has type string"));
  absl::StatusOr<std::string> s = md.GetString("strs");
  EXPECT_THAT(s.status().message(), HasSubstr("has type array[string]"));
  absl::StatusOr<std::vector<std::string>> sa = md.GetStringArray("ints");
  EXPECT_THAT(sa.status().message(), HasSubstr("'ints' has type array[int32], expected array[string]"));
  absl::StatusOr<bool> b = md.GetBool("missing.key");
  EXPECT_EQ(b.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(b.status().message(), HasSubstr("'missing.key'"));
  EXPECT_EQ(md.GetUint("i8").status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(md.GetInt("u64").status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*md.GetIntOr("missing", 7), 7);
  EXPECT_FALSE(md.GetIntOr("str", 7).ok());  // present with the wrong type is still an error
  EXPECT_EQ(*md.GetFloat("i32"), -2e9);      // integers widen to float
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/cairn-gguf-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void WriteSplit(const std::string& path, int no, int count, const std::string& tensor, float value) {
  GgufWriter w;
  if (no == 0) w.SetString("general.architecture", "llama");
  w.Set("split.no", MetadataValue::FromScalar(GgufValueType::kUint16, uint64_t(no)));
  w.Set("split.count", MetadataValue::FromScalar(GgufValueType::kUint16, uint64_t(count)));
  w.AddTensor(tensor, GgmlType::kF32, {1}, Bytes({value}));
  ASSERT_TRUE(w.WriteFile(path).ok());
}

TEST(ModelFile, OpensSplitModelAsOne) {
  TempDir dir;
  for (int i = 0; i < 3; ++i) {
    WriteSplit(absl::StrFormat("%s/m-%05d-of-00003.gguf", dir.path(), i + 1), i, 3, absl::StrCat("t", i), i * 1.5f);
  }
  // Any split's name opens the whole model.
  for (const char* part : {"m-00001-of-00003.gguf", "m-00002-of-00003.gguf"}) {
    absl::StatusOr<std::unique_ptr<ModelFile>> m = ModelFile::Open(dir.path() + "/" + part);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ((*m)->files().size(), 3u);
    ASSERT_EQ((*m)->tensors().size(), 3u);
    EXPECT_EQ(*(*m)->Architecture(), "llama");
    const TensorInfo* t2 = (*m)->FindTensor("t2");
    ASSERT_NE(t2, nullptr);
    EXPECT_EQ(t2->file_index, 2);
    EXPECT_EQ(reinterpret_cast<const float*>(t2->data)[0], 3.0f);
  }
}

TEST(ModelFile, MissingSplitIsNotFound) {
  TempDir dir;
  WriteSplit(dir.path() + "/m-00001-of-00002.gguf", 0, 2, "t0", 0);
  absl::StatusOr<std::unique_ptr<ModelFile>> m = ModelFile::Open(dir.path() + "/m-00001-of-00002.gguf");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("split 2 of 2"));
}

TEST(ModelFile, DuplicateTensorAcrossSplitsIsRejected) {
  TempDir dir;
  WriteSplit(dir.path() + "/m-00001-of-00002.gguf", 0, 2, "same", 0);
  WriteSplit(dir.path() + "/m-00002-of-00002.gguf", 1, 2, "same", 1);
  absl::StatusOr<std::unique_ptr<ModelFile>> m = ModelFile::Open(dir.path() + "/m-00001-of-00002.gguf");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("'same'"));
}

TEST(ModelFile, MissingFileIsNotFound) {
  EXPECT_EQ(ModelFile::Open("/nonexistent/model.gguf").status().code(), absl::StatusCode::kNotFound);
}

TEST(ModelFile, OpensEveryGoldenModel) {
  CAIRN_REQUIRE_SHARED("golden/models");
  int opened = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(testing::SharedDir())) {
    if (entry.path().extension() != ".gguf") continue;
    absl::StatusOr<std::unique_ptr<ModelFile>> m = ModelFile::Open(entry.path().string());
    ASSERT_TRUE(m.ok()) << entry.path() << ": " << m.status();
    for (const TensorInfo* t : (*m)->tensors()) {
      EXPECT_EQ(t->n_bytes, RowBytes(t->type, t->row_size()) * t->n_rows()) << t->name;
    }
    ++opened;
  }
  EXPECT_GE(opened, 22);
}

TEST(ModelFile, Stories260KHyperparameters) {
  CAIRN_REQUIRE_SHARED("models/stories260K.gguf");
  absl::StatusOr<std::unique_ptr<ModelFile>> m = ModelFile::Open(testing::SharedPath("models/stories260K.gguf"));
  ASSERT_TRUE(m.ok()) << m.status();
  const Metadata& md = (*m)->metadata();
  EXPECT_EQ(*(*m)->Architecture(), "llama");
  EXPECT_EQ(*md.GetInt("llama.embedding_length"), 64);
  EXPECT_EQ(*md.GetInt("llama.block_count"), 5);
  EXPECT_EQ((*md.GetStringArrayRef("tokenizer.ggml.tokens"))->size(), 512u);
  EXPECT_NE((*m)->FindTensor("token_embd.weight"), nullptr);
}

}  // namespace
}  // namespace cairn
