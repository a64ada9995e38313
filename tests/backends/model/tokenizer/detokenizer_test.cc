#include "backends/model/detokenizer.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends/model/gguf.h"
#include "backends/model/unicode.h"
#include "gtest/gtest.h"
#include "tests/testing/shared_data.h"

namespace cairn {
namespace {

std::unique_ptr<Tokenizer> LoadShared(const std::string& relative) {
  auto model = ModelFile::Open(testing::SharedPath(relative));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  auto tok = Tokenizer::Create(**model);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

TokenId ByteToken(const Tokenizer& spm, int b) {
  char name[8];
  std::snprintf(name, sizeof(name), "<0x%02X>", b);
  auto id = spm.FindToken(name);
  EXPECT_TRUE(id.has_value()) << name;
  return id.value_or(0);
}

TEST(DetokenizerTest, SpmByteTokensAreHeldBackUntilTheCharacterIsComplete) {
  CAIRN_REQUIRE_SHARED("models/stories260K.gguf");
  auto spm = LoadShared("models/stories260K.gguf");
  ASSERT_NE(spm, nullptr);
  StreamingDetokenizer detok(*spm);
  std::string out;
  // 中 = E4 B8 AD
  ASSERT_TRUE(detok.Push(ByteToken(*spm, 0xE4), &out).ok());
  EXPECT_EQ(out, "");
  EXPECT_EQ(detok.pending_bytes(), 1u);
  ASSERT_TRUE(detok.Push(ByteToken(*spm, 0xB8), &out).ok());
  EXPECT_EQ(out, "");
  EXPECT_EQ(detok.pending_bytes(), 2u);
  ASSERT_TRUE(detok.Push(ByteToken(*spm, 0xAD), &out).ok());
  EXPECT_EQ(out, "中");
  EXPECT_EQ(detok.pending_bytes(), 0u);
}

TEST(DetokenizerTest, InvalidBytesBecomeReplacementCharacters) {
  CAIRN_REQUIRE_SHARED("models/stories260K.gguf");
  auto spm = LoadShared("models/stories260K.gguf");
  ASSERT_NE(spm, nullptr);
  const TokenId a = *spm->FindToken("a");
  StreamingDetokenizer detok(*spm);
  std::string out;
  // A stray continuation byte: replaced at once.
  ASSERT_TRUE(detok.Push(ByteToken(*spm, 0x80), &out).ok());
  EXPECT_EQ(out, "\xEF\xBF\xBD");
  // A truncated sequence followed by ASCII: one U+FFFD for the maximal subpart.
  out.clear();
  ASSERT_TRUE(detok.Push(ByteToken(*spm, 0xE4), &out).ok());
  ASSERT_TRUE(detok.Push(ByteToken(*spm, 0xB8), &out).ok());
  EXPECT_EQ(out, "");
  ASSERT_TRUE(detok.Push(a, &out).ok());
  EXPECT_EQ(out,
            "\xEF\xBF\xBD"
            "a");
  // A surrogate lead (ED A0) is invalid as soon as the second byte arrives.
  out.clear();
  ASSERT_TRUE(detok.Push(ByteToken(*spm, 0xED), &out).ok());
  ASSERT_TRUE(detok.Push(ByteToken(*spm, 0xA0), &out).ok());
  EXPECT_EQ(out, "\xEF\xBF\xBD\xEF\xBF\xBD");
  // Flush turns an unfinished character into U+FFFD.
  out.clear();
  ASSERT_TRUE(detok.Push(ByteToken(*spm, 0xF0), &out).ok());
  detok.Flush(&out);
  EXPECT_EQ(out, "\xEF\xBF\xBD");
  EXPECT_EQ(detok.pending_bytes(), 0u);
}

TEST(DetokenizerTest, BadIdIsRejectedAndChangesNothing) {
  CAIRN_REQUIRE_SHARED("models/stories260K.gguf");
  auto spm = LoadShared("models/stories260K.gguf");
  ASSERT_NE(spm, nullptr);
  StreamingDetokenizer detok(*spm);
  std::string out;
  ASSERT_TRUE(detok.Push(ByteToken(*spm, 0xE4), &out).ok());
  for (TokenId bad : {-1, spm->n_vocab(), 1 << 30}) {
    const absl::Status s = detok.Push(bad, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(detok.pending_bytes(), 1u);
  ASSERT_TRUE(detok.Push(ByteToken(*spm, 0xB8), &out).ok());
  ASSERT_TRUE(detok.Push(ByteToken(*spm, 0xAD), &out).ok());
  EXPECT_EQ(out, "中");
}

TEST(DetokenizerTest, SpmLeadingSpace) {
  CAIRN_REQUIRE_SHARED("models/stories260K.gguf");
  auto spm = LoadShared("models/stories260K.gguf");
  ASSERT_NE(spm, nullptr);
  ASSERT_TRUE(spm->add_space_prefix());
  const auto ids = spm->Tokenize("Once upon a time");
  EXPECT_EQ(*Detokenize(*spm, ids), "Once upon a time");
  DetokenizeOptions keep;
  keep.strip_space_prefix = false;
  EXPECT_EQ(*Detokenize(*spm, ids, keep), " Once upon a time");
  // After a special token the prefix space is added (and removed) again.
  std::vector<TokenId> twice = ids;
  twice.push_back(spm->special_tokens().eos);
  const auto again = spm->Tokenize("Once", TokenizeOptions{false, false});
  twice.insert(twice.end(), again.begin(), again.end());
  EXPECT_EQ(*Detokenize(*spm, twice), "Once upon a timeOnce");
  DetokenizeOptions render;
  render.render_special = true;
  EXPECT_EQ(*Detokenize(*spm, twice, render), "<s>Once upon a time</s>Once");
}

TEST(DetokenizerTest, BpeTokensSplittingAnEmojiStream) {
  CAIRN_REQUIRE_SHARED("golden/tokenizer");
  auto bpe = LoadShared("golden/tokenizer/qwen3-vocab.gguf");
  ASSERT_NE(bpe, nullptr);
  const std::string text = "emoji \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD done";  // 👍🏽
  const auto ids = bpe->Tokenize(text);
  StreamingDetokenizer detok(*bpe);
  std::string out;
  size_t max_pending = 0;
  for (TokenId id : ids) {
    const size_t before = out.size();
    ASSERT_TRUE(detok.Push(id, &out).ok());
    const std::string chunk = out.substr(before);
    EXPECT_EQ(ValidUtf8PrefixLength(chunk), chunk.size());
    max_pending = std::max(max_pending, detok.pending_bytes());
  }
  detok.Flush(&out);
  EXPECT_EQ(out, text);
  // The vocabulary splits at least one emoji inside its bytes.
  EXPECT_GT(max_pending, 0u);
}

}  // namespace
}  // namespace cairn
