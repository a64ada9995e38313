// Malformed GGUF files: each is refused with a specific code and a message
// naming the byte offset and what was expected; none crashes.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "backends/model/gguf.h"
#include "backends/model/gguf_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cairn {
namespace {

using ::testing::HasSubstr;

// A valid two-tensor file that the cases below corrupt in one place each.
GgufWriter ValidWriter() {
  GgufWriter w(3, 32);
  w.SetString("general.architecture", "llama");
  w.SetInt32Array("arr", {1, 2, 3});
  w.AddTensor("first", GgmlType::kF32, {8, 2}, std::vector<uint8_t>(64, 0));
  w.AddTensor("second", GgmlType::kF32, {8}, std::vector<uint8_t>(32, 0));
  return w;
}

absl::Status Parse(const std::vector<uint8_t>& image) { return GgufFile::FromBuffer(image).status(); }

// Offset of the first byte after the length-prefixed string `s` in `image`.
size_t After(const std::vector<uint8_t>& image, const std::string& s) {
  for (size_t i = 8; i + s.size() <= image.size(); ++i) {
    uint64_t len;
    std::memcpy(&len, image.data() + i - 8, 8);
    if (len == s.size() && std::memcmp(image.data() + i, s.data(), s.size()) == 0) return i + s.size();
  }
  ADD_FAILURE() << "string not found: " << s;
  return 0;
}

template <typename T>
void Poke(std::vector<uint8_t>& image, size_t at, T v) {
  std::memcpy(image.data() + at, &v, sizeof v);
}

// Tensor info layout after the name: n_dims u32, dims i64[n], type u32, offset u64.
struct TensorFields {
  size_t n_dims, dim0, type, offset;
};
TensorFields Fields(const std::vector<uint8_t>& image, const std::string& name, int n_dims) {
  const size_t at = After(image, name);
  return {at, at + 4, at + 4 + 8 * n_dims, at + 4 + 8 * n_dims + 4};
}

void ExpectError(const absl::Status& s, absl::StatusCode code, std::initializer_list<const char*> parts) {
  EXPECT_EQ(s.code(), code) << s;
  for (const char* p : parts) EXPECT_THAT(std::string(s.message()), HasSubstr(p));
}

TEST(Malformed, ValidBaselineParses) { EXPECT_TRUE(Parse(ValidWriter().Serialize()).ok()); }

TEST(Malformed, BadMagic) {
  std::vector<uint8_t> img = ValidWriter().Serialize();
  img[0] = 'X';
  ExpectError(Parse(img), absl::StatusCode::kInvalidArgument, {"byte offset 0", "GGUF magic"});
}

TEST(Malformed, UnsupportedVersion) {
  for (uint32_t v : {0u, 1u, 4u, 0xffffffffu}) {
    std::vector<uint8_t> img = ValidWriter().Serialize();
    Poke<uint32_t>(img, 4, v);
    ExpectError(Parse(img), absl::StatusCode::kUnimplemented, {"byte offset 4", "expected 2 or 3"});
  }
}

TEST(Malformed, TruncatedHeader) {
  std::vector<uint8_t> img = ValidWriter().Serialize();
  img.resize(12);
  ExpectError(Parse(img), absl::StatusCode::kOutOfRange, {"byte offset 8", "tensor count"});
  img.clear();
  ExpectError(Parse(img), absl::StatusCode::kOutOfRange, {"byte offset 0", "magic"});
}

TEST(Malformed, EveryTruncationFailsCleanly) {
  const std::vector<uint8_t> full = ValidWriter().Serialize();
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> img(full.begin(), full.begin() + n);
    const absl::Status s = Parse(img);
    ASSERT_FALSE(s.ok()) << "prefix of " << n << " bytes parsed";
    ASSERT_EQ(s.code(), absl::StatusCode::kOutOfRange) << n << ": " << s;
    ASSERT_THAT(std::string(s.message()), ::testing::AnyOf(HasSubstr("byte offset"), HasSubstr("past the end")));
  }
}

TEST(Malformed, StringLengthPastEnd) {
  std::vector<uint8_t> img = ValidWriter().Serialize();
  const size_t key_len_at = 24;  // first metadata key length
  Poke<uint64_t>(img, key_len_at, 1000000);
  ExpectError(Parse(img), absl::StatusCode::kOutOfRange, {"byte offset 24", "metadata key of 1000000 bytes"});
  Poke<uint64_t>(img, key_len_at, ~uint64_t{0});
  ExpectError(Parse(img), absl::StatusCode::kInvalidArgument, {"byte offset 24", "exceeds"});
}

TEST(Malformed, ArrayLengthPastEnd) {
  std::vector<uint8_t> img = ValidWriter().Serialize();
  const size_t count_at = After(img, "arr") + 4 + 4;  // value type, element type
  Poke<uint64_t>(img, count_at, uint64_t{1} << 40);
  ExpectError(Parse(img), absl::StatusCode::kOutOfRange, {"array of 1099511627776 int32 values", "'arr'"});
}

TEST(Malformed, StringArrayLengthPastEnd) {
  GgufWriter w;
  w.SetStringArray("names", {"a", "b"});
  std::vector<uint8_t> img = w.Serialize();
  const size_t count_at = After(img, "names") + 8;
  Poke<uint64_t>(img, count_at, uint64_t{1} << 62);
  ExpectError(Parse(img), absl::StatusCode::kOutOfRange, {"string values", "'names'"});
  // An element whose own length runs past the end.
  img = w.Serialize();
  Poke<uint64_t>(img, count_at + 8, 5000);
  ExpectError(Parse(img), absl::StatusCode::kOutOfRange, {"array string of 5000 bytes"});
}

TEST(Malformed, TensorPastEndOfFile) {
  std::vector<uint8_t> img = ValidWriter().Serialize();
  img.resize(img.size() - 16);  // cut into the second tensor's data
  ExpectError(Parse(img), absl::StatusCode::kOutOfRange, {"tensor 'second'", "past the end of the file"});
  img = ValidWriter().Serialize();
  Poke<uint64_t>(img, Fields(img, "second", 1).offset, uint64_t{1} << 50);
  ExpectError(Parse(img), absl::StatusCode::kOutOfRange, {"tensor 'second'"});
}

TEST(Malformed, MisalignedOffset) {
  std::vector<uint8_t> img = ValidWriter().Serialize();
  const size_t at = Fields(img, "second", 1).offset;
  Poke<uint64_t>(img, at, 68);
  ExpectError(Parse(img), absl::StatusCode::kInvalidArgument,
              {absl::StrCat("byte offset ", at).c_str(), "not a multiple of the alignment 32"});
}

TEST(Malformed, OverlappingOffsets) {
  std::vector<uint8_t> img = ValidWriter().Serialize();
  Poke<uint64_t>(img, Fields(img, "second", 1).offset, 32);  // inside 'first' (64 bytes)
  ExpectError(Parse(img), absl::StatusCode::kInvalidArgument, {"'second'", "overlaps tensor 'first'"});
}

TEST(Malformed, AbsurdDimensions) {
  std::vector<uint8_t> img = ValidWriter().Serialize();
  Poke<uint32_t>(img, Fields(img, "first", 2).n_dims, 9);
  ExpectError(Parse(img), absl::StatusCode::kInvalidArgument, {"expected 1..4 dimensions, found 9"});
  for (int64_t bad : {int64_t{0}, int64_t{-8}, int64_t{1} << 50}) {
    img = ValidWriter().Serialize();
    Poke<int64_t>(img, Fields(img, "first", 2).dim0 + 8, bad);
    ExpectError(Parse(img), absl::StatusCode::kInvalidArgument, {"tensor 'first': dimension 1"});
  }
  // Each dimension allowed, but their product overflows.
  GgufWriter w;
  w.AddTensor("big", GgmlType::kF32, {1 << 30, 1 << 30, 1 << 30, 1}, {});
  ExpectError(Parse(w.Serialize()), absl::StatusCode::kInvalidArgument, {"fits in 64 bits"});
}

TEST(Malformed, AbsurdCounts) {
  std::vector<uint8_t> img = ValidWriter().Serialize();
  Poke<uint64_t>(img, 8, uint64_t{1} << 60);
  ExpectError(Parse(img), absl::StatusCode::kInvalidArgument, {"byte offset 8", "tensor count"});
  img = ValidWriter().Serialize();
  Poke<uint64_t>(img, 16, ~uint64_t{0});
  ExpectError(Parse(img), absl::StatusCode::kInvalidArgument, {"byte offset 16", "metadata count"});
}

TEST(Malformed, UnknownTensorType) {
  std::vector<uint8_t> img = ValidWriter().Serialize();
  const size_t at = Fields(img, "first", 2).type;
  Poke<uint32_t>(img, at, 99);
  ExpectError(Parse(img), absl::StatusCode::kUnimplemented,
              {absl::StrCat("byte offset ", at).c_str(), "unsupported type id 99"});
}

TEST(Malformed, RowWidthNotDivisibleByBlockSize) {
  GgufWriter w;
  w.AddTensor("q", GgmlType::kQ4_K, {128, 1}, std::vector<uint8_t>(144, 0));
  ExpectError(Parse(w.Serialize()), absl::StatusCode::kInvalidArgument,
              {"row width 128 is not a multiple of the Q4_K block size 256"});
}

TEST(Malformed, BadMetadataValues) {
  std::vector<uint8_t> img = ValidWriter().Serialize();
  const size_t type_at = After(img, "arr");
  Poke<uint32_t>(img, type_at, 42);
  ExpectError(Parse(img), absl::StatusCode::kInvalidArgument,
              {absl::StrCat("byte offset ", type_at).c_str(), "metadata value type", "found 42"});
  img = ValidWriter().Serialize();
  Poke<uint32_t>(img, type_at + 4, 9);  // array of arrays
  ExpectError(Parse(img), absl::StatusCode::kInvalidArgument, {"nested arrays"});

  GgufWriter w;
  w.SetBool("b", true);
  img = w.Serialize();
  img[After(img, "b") + 4] = 7;
  ExpectError(Parse(img), absl::StatusCode::kInvalidArgument, {"expected a bool (0 or 1), found 7"});
}

TEST(Malformed, DuplicateKeysAndTensors) {
  GgufWriter w;
  w.SetUint32("k1", 1);
  w.SetUint32("k2", 2);
  std::vector<uint8_t> img = w.Serialize();
  img[After(img, "k2") - 1] = '1';
  ExpectError(Parse(img), absl::StatusCode::kInvalidArgument, {"duplicate metadata key 'k1'"});

  GgufWriter t;
  t.AddTensor("ta", GgmlType::kF32, {1}, std::vector<uint8_t>(4, 0));
  t.AddTensor("tb", GgmlType::kF32, {1}, std::vector<uint8_t>(4, 0));
  img = t.Serialize();
  img[After(img, "tb") - 1] = 'a';
  ExpectError(Parse(img), absl::StatusCode::kInvalidArgument, {"duplicate tensor name 'ta'"});
}

TEST(Malformed, BadAlignment) {
  for (uint32_t a : {0u, 3u, 1u << 30}) {
    GgufWriter w;
    w.SetUint32("general.alignment", a);
    ExpectError(Parse(w.Serialize()), absl::StatusCode::kInvalidArgument, {"general.alignment"});
  }
  GgufWriter w;
  w.SetString("general.alignment", "32");
  ExpectError(Parse(w.Serialize()), absl::StatusCode::kInvalidArgument, {"has type string"});
}

}  // namespace
}  // namespace cairn
