// Tokenizer loading (errors for what cairn does not implement), special-token
// parsing, and the named exceptions to the text round trip.
#include "backends/model/tokenizer.h"

#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends/model/detokenizer.h"
#include "backends/model/unicode.h"
#include "gtest/gtest.h"
#include "tests/testing/shared_data.h"

namespace cairn {
namespace {

MetadataValue Str(std::string s) { return MetadataValue::FromScalar(GgufValueType::kString, std::move(s)); }
MetadataValue Strings(std::vector<std::string> v) { return MetadataValue::FromStringArray(std::move(v)); }
MetadataValue Int32s(const std::vector<int64_t>& v) {
  std::vector<MetadataValue::Scalar> s(v.begin(), v.end());
  return MetadataValue::FromNumberArray(GgufValueType::kInt32, std::move(s));
}

// A byte-level BPE vocabulary: the 256 alphabet characters plus a few merges.
Metadata TinyBpe(std::string pre) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) {
    std::string t;
    AppendUtf8(ByteToAlphabet(static_cast<uint8_t>(b)), &t);
    tokens.push_back(t);
  }
  tokens.push_back("ab");   // 256
  tokens.push_back("abc");  // 257
  tokens.push_back(
      "\xC4\xA0"
      "a");                     // 258 "Ġa"
  tokens.push_back("<|end|>");  // 259
  std::vector<int64_t> types(tokens.size(), 1);
  types[259] = 3;
  Metadata m;
  m.Set("tokenizer.ggml.model", Str("gpt2"));
  if (!pre.empty()) m.Set("tokenizer.ggml.pre", Str(pre));
  m.Set("tokenizer.ggml.tokens", Strings(tokens));
  m.Set("tokenizer.ggml.token_type", Int32s(types));
  m.Set("tokenizer.ggml.merges", Strings({"a b", "ab c", "\xC4\xA0 a"}));
  return m;
}

TEST(TokenizerLoadTest, TinyBpeMergesByRank) {
  auto tok = Tokenizer::FromMetadata(TinyBpe("gpt-2"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->kind(), TokenizerKind::kBpe);
  EXPECT_EQ((*tok)->Tokenize("abc"), (std::vector<TokenId>{257}));
  EXPECT_EQ((*tok)->Tokenize("abcab a"), (std::vector<TokenId>{257, 256, 258}));
  EXPECT_EQ((*tok)->Tokenize("ca"), (std::vector<TokenId>{'c', 'a'}));
  TokenizeOptions special;
  special.parse_special = true;
  EXPECT_EQ((*tok)->Tokenize("ab<|end|>", special), (std::vector<TokenId>{256, 259}));
  EXPECT_NE((*tok)->Tokenize("ab<|end|>"), (std::vector<TokenId>{256, 259}));
  EXPECT_TRUE((*tok)->IsEndOfGeneration(259));
}

TEST(TokenizerLoadTest, UnknownPreTokenizerIsAnError) {
  auto tok = Tokenizer::FromMetadata(TinyBpe("no-such-pre"));
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(tok.status().message().find("no-such-pre"), std::string_view::npos);
}

TEST(TokenizerLoadTest, EveryRequiredPreTokenizerLoads) {
  for (const char* pre : {"llama-bpe", "llama3", "qwen2", "qwen35", "smollm", "gpt-2", "default", "falcon", "dbrx",
                          "seed-coder", "bailingmoe"}) {
    Metadata m = TinyBpe(pre);
    // llama3 adds a BOS by default, so the vocabulary must name one.
    m.Set("tokenizer.ggml.bos_token_id", MetadataValue::FromScalar(GgufValueType::kUint32, uint64_t{259}));
    auto tok = Tokenizer::FromMetadata(m);
    EXPECT_TRUE(tok.ok()) << pre << ": " << tok.status();
    if (tok.ok()) {
      EXPECT_EQ((*tok)->pre_tokenizer(), pre);
    }
  }
}

TEST(TokenizerLoadTest, MissingPreTokenizerMeansDefault) {
  auto tok = Tokenizer::FromMetadata(TinyBpe(""));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->pre_tokenizer(), "default");
}

TEST(TokenizerLoadTest, Errors) {
  {
    Metadata m = TinyBpe("gpt-2");
    m.Set("tokenizer.ggml.model", Str("bert"));
    auto tok = Tokenizer::FromMetadata(m);
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  }
  {
    Metadata m;
    auto tok = Tokenizer::FromMetadata(m);
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kNotFound);
  }
  // "none" and "no_vocab" name no tokenizer (llama.cpp serves such files for
  // token ids): NOT_FOUND as for a file without the keys, not UNIMPLEMENTED.
  for (const char* none : {"none", "no_vocab"}) {
    Metadata m;
    m.Set("tokenizer.ggml.model", Str(none));
    auto tok = Tokenizer::FromMetadata(m);
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kNotFound) << none;
    EXPECT_NE(tok.status().message().find(none), std::string::npos) << tok.status();
  }
  {
    Metadata m = TinyBpe("gpt-2");
    m.Set("tokenizer.ggml.tokens", Strings({"a", "b", "a"}));
    m.Set("tokenizer.ggml.token_type", Int32s({1, 1, 1}));
    auto tok = Tokenizer::FromMetadata(m);
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  }
  {
    Metadata m = TinyBpe("gpt-2");
    m.Set("tokenizer.ggml.token_type", Int32s({1, 1}));
    auto tok = Tokenizer::FromMetadata(m);
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  }
  {
    Metadata m = TinyBpe("gpt-2");
    m.Set("tokenizer.ggml.add_bos_token", MetadataValue::FromScalar(GgufValueType::kBool, true));  // but no bos id
    auto tok = Tokenizer::FromMetadata(m);
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  }
  {
    Metadata m = TinyBpe("gpt-2");
    m.Set("tokenizer.ggml.merges", Str("a b"));
    auto tok = Tokenizer::FromMetadata(m);
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

std::unique_ptr<Tokenizer> LoadShared(const std::string& relative) {
  auto model = ModelFile::Open(testing::SharedPath(relative));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  auto tok = Tokenizer::Create(**model);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

TEST(TokenizerSharedTest, SpecialTokensOnlyWithSpecialParsing) {
  CAIRN_REQUIRE_SHARED("golden/tokenizer");
  auto qwen = LoadShared("golden/tokenizer/qwen3-vocab.gguf");
  ASSERT_NE(qwen, nullptr);
  const TokenId im_end = *qwen->FindToken("<|im_end|>");
  const TokenId think = *qwen->FindToken("<think>");
  EXPECT_EQ(qwen->token_type(im_end), TokenType::kControl);
  EXPECT_EQ(qwen->token_type(think), TokenType::kUserDefined);
  TokenizeOptions plain, special;
  special.parse_special = true;
  for (const auto& [text, id] : {std::pair<std::string, TokenId>{"x<|im_end|>y", im_end}, {"x<think>y", think}}) {
    const auto with = qwen->Tokenize(text, special);
    const auto without = qwen->Tokenize(text, plain);
    EXPECT_NE(std::find(with.begin(), with.end(), id), with.end()) << text;
    EXPECT_EQ(std::find(without.begin(), without.end(), id), without.end()) << text;
    // Without special parsing the marker is ordinary text and comes back as such.
    EXPECT_EQ(*Detokenize(*qwen, without), text);
  }
  EXPECT_TRUE(qwen->IsEndOfGeneration(im_end));
  EXPECT_FALSE(qwen->IsEndOfGeneration(think));
  // Fill-in-the-middle markers are control tokens (as llama.cpp forces them),
  // the file separator also ends generation.
  EXPECT_EQ(qwen->token_type(*qwen->FindToken("<|fim_prefix|>")), TokenType::kControl);
  EXPECT_TRUE(qwen->IsEndOfGeneration(*qwen->FindToken("<|file_sep|>")));
  EXPECT_FALSE(qwen->IsEndOfGeneration(*qwen->FindToken("<|fim_prefix|>")));
  EXPECT_FALSE(qwen->add_bos());

  auto llama = LoadShared("golden/tokenizer/llama3-vocab.gguf");
  ASSERT_NE(llama, nullptr);
  EXPECT_TRUE(llama->add_bos());
  EXPECT_EQ(llama->special_tokens().bos, 128000);
  EXPECT_TRUE(llama->IsEndOfGeneration(128001));
  EXPECT_TRUE(llama->IsEndOfGeneration(*llama->FindToken("<|eot_id|>")));
  TokenizeOptions no_special;
  no_special.add_special = false;
  EXPECT_EQ(llama->Tokenize("Hello", no_special).front(), *llama->FindToken("Hello"));
}

// Random text from a pool of characters that each vocabulary can represent.
std::string RandomText(std::mt19937* rng, size_t n_chars) {
  static const std::vector<uint32_t> kPool = {
      'a',    'b',    'Z',     ' ',     ' ',     ' ',    '\n',   '\t',   '\r',     '0',    '7',
      '\'',   '!',    '.',     ',',     '<',     '|',    0xE9,   0xDF,   0x301,    0x4E2D, 0x6587,
      0x65E5, 0x3042, 0x1F642, 0x1F680, 0x1F3FD, 0xA0,   0x3000, 0x2003, 0x85,     0x410,  0x5D0,
      0x627,  0x939,  0xE01,   0x1F1FA, 0x200D,  0xFEFF, 0x0,    0x7F,   0x10FFFF, 0xFFFD};
  std::uniform_int_distribution<size_t> pick(0, kPool.size() - 1);
  std::string s;
  for (size_t i = 0; i < n_chars; ++i) AppendUtf8(kPool[pick(*rng)], &s);
  return s;
}

TEST(TokenizerSharedTest, ValidUtf8RoundTripsThroughEveryVocabulary) {
  CAIRN_REQUIRE_SHARED("golden/tokenizer");
  for (const char* path :
       {"models/stories260K.gguf", "golden/tokenizer/qwen3-vocab.gguf", "golden/tokenizer/llama3-vocab.gguf"}) {
    auto tok = LoadShared(path);
    ASSERT_NE(tok, nullptr);
    std::mt19937 rng(42);
    for (int trial = 0; trial < 300; ++trial) {
      const std::string text = RandomText(&rng, 1 + trial % 40);
      TokenizeOptions options;
      options.add_special = trial % 2 == 0;
      const auto ids = tok->Tokenize(text, options);
      for (TokenId id : ids) ASSERT_TRUE(id >= 0 && id < tok->n_vocab());
      auto back = Detokenize(*tok, ids);
      ASSERT_TRUE(back.ok());
      ASSERT_EQ(*back, text) << path << " trial " << trial;
    }
  }
}

TEST(TokenizerSharedTest, PartsTokenizeLikeTheWholeAndLocateTheirStart) {
  CAIRN_REQUIRE_SHARED("golden/tokenizer");
  for (const char* path :
       {"models/stories260K.gguf", "golden/tokenizer/qwen3-vocab.gguf", "golden/tokenizer/llama3-vocab.gguf"}) {
    auto tok = LoadShared(path);
    ASSERT_NE(tok, nullptr);
    std::mt19937 rng(7);
    for (int trial = 0; trial < 200; ++trial) {
      const std::string a = RandomText(&rng, trial % 13);
      const std::string b = RandomText(&rng, 1 + trial % 17);
      const std::string c = RandomText(&rng, trial % 5);
      const TextPart parts[] = {{a, false}, {b, false}, {c, false}};
      std::vector<size_t> starts;
      const auto ids = tok->TokenizeParts(parts, true, &starts);
      ASSERT_EQ(ids, tok->Tokenize(a + b + c)) << path << " trial " << trial;
      ASSERT_EQ(starts.size(), 3u);
      // The token at starts[k] holds the part's first byte.
      const std::span<const TokenId> all(ids);
      const size_t offsets[] = {0, a.size(), a.size() + b.size()};
      for (int k = 0; k < 3; ++k) {
        ASSERT_LE(starts[k], ids.size());
        const size_t before = Detokenize(*tok, all.first(starts[k]))->size();
        EXPECT_LE(before, offsets[k]) << path << " trial " << trial << " part " << k;
        if (starts[k] < ids.size()) {
          const size_t through = Detokenize(*tok, all.first(starts[k] + 1))->size();
          EXPECT_GT(through, offsets[k]) << path << " trial " << trial << " part " << k;
        }
      }
    }
  }
}

TEST(TokenizerSharedTest, ArbitraryBytesAreSafe) {
  CAIRN_REQUIRE_SHARED("golden/tokenizer");
  for (const char* path :
       {"models/stories260K.gguf", "golden/tokenizer/qwen3-vocab.gguf", "golden/tokenizer/llama3-vocab.gguf"}) {
    auto tok = LoadShared(path);
    ASSERT_NE(tok, nullptr);
    std::mt19937 rng(99);
    std::uniform_int_distribution<int> byte(0, 255), len(0, 64);
    const std::string specials[] = {"<|im_end|>", "<|eot_id|>", "<s>", "<think>", "\xE2\x96\x81"};
    for (int trial = 0; trial < 300; ++trial) {
      std::string text;
      for (int i = len(rng); i > 0; --i) {
        if (byte(rng) < 8) text += specials[byte(rng) % 5];
        text.push_back(static_cast<char>(byte(rng)));
      }
      TokenizeOptions options;
      options.parse_special = trial % 2 == 1;
      const auto ids = tok->Tokenize(text, options);
      for (TokenId id : ids) ASSERT_TRUE(id >= 0 && id < tok->n_vocab());
      DetokenizeOptions render;
      render.render_special = trial % 3 == 0;
      auto back = Detokenize(*tok, ids, render);
      ASSERT_TRUE(back.ok());
      EXPECT_EQ(ValidUtf8PrefixLength(*back), back->size()) << path << " trial " << trial;
      // Where the input is valid UTF-8 the round trip is exact (but for the
      // named exceptions below: SPM's U+2581, rendered control tokens).
      if (ValidUtf8PrefixLength(text) == text.size() && !options.parse_special && !render.render_special &&
          text.find("\xE2\x96\x81") == std::string::npos) {
        EXPECT_EQ(*back, text) << path << " trial " << trial;
      }
    }
  }
}

// The named exceptions: text the vocabularies cannot give back.
TEST(TokenizerSharedTest, RoundTripExceptions) {
  CAIRN_REQUIRE_SHARED("golden/tokenizer");
  auto spm = LoadShared("models/stories260K.gguf");
  auto bpe = LoadShared("golden/tokenizer/qwen3-vocab.gguf");
  ASSERT_NE(spm, nullptr);
  ASSERT_NE(bpe, nullptr);
  // 1. Invalid UTF-8. SPM keeps the bytes (byte tokens) but the detokenizer
  //    only ever hands out valid UTF-8, so they come back as U+FFFD; BPE
  //    already replaces them with U+FFFD when pre-tokenizing (as llama.cpp).
  const std::string invalid =
      "a\xFF"
      "b\xE4\xB8";
  EXPECT_EQ(*Detokenize(*spm, spm->Tokenize(invalid)),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
  EXPECT_EQ(*Detokenize(*bpe, bpe->Tokenize(invalid)),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD");
  // 2. SPM: U+2581 ('▁') is how SPM spells a space, so it comes back as ' '.
  EXPECT_EQ(*Detokenize(*spm, spm->Tokenize("a\xE2\x96\x81"
                                            "b")),
            "a b");
  // 3. Control tokens made by special parsing render only when asked for.
  TokenizeOptions special;
  special.parse_special = true;
  const auto ids = bpe->Tokenize("hi<|im_end|>", special);
  EXPECT_EQ(*Detokenize(*bpe, ids), "hi");
  DetokenizeOptions render;
  render.render_special = true;
  EXPECT_EQ(*Detokenize(*bpe, ids, render), "hi<|im_end|>");
}

}  // namespace
}  // namespace cairn
