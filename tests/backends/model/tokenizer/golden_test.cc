// The tokenizer goldens of ../shared/golden/tokenizer (llama.cpp's
// tokenization) reproduced exactly, and every golden id list detokenized one
// token at a time back to its text.
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backends/model/detokenizer.h"
#include "backends/model/gguf.h"
#include "backends/model/tokenizer.h"
#include "backends/model/unicode.h"
#include "gtest/gtest.h"
#include "tests/testing/shared_data.h"

namespace cairn {
namespace {

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string Unescape(const std::string& line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) {
      const char c = line[++i];
      out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c);
    } else {
      out.push_back(line[i]);
    }
  }
  return out;
}

std::vector<TokenId> ParseIds(const std::string& line) {
  std::vector<TokenId> ids;
  std::istringstream in(line);
  TokenId id;
  while (in >> id) ids.push_back(id);
  return ids;
}

std::unique_ptr<Tokenizer> Load(const std::string& relative) {
  auto model = ModelFile::Open(testing::SharedPath(relative));
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  auto tokenizer = Tokenizer::Create(**model);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

struct Golden {
  const char* name;
  const char* model;  // under ../shared
  const char* texts;  // under golden/tokenizer
  const char* ids;    // under golden/tokenizer
  bool parse_special;
  // Lines (0-based) whose text the vocabulary cannot give back, and why.
  std::map<int, const char*> round_trip_exceptions;
};

const Golden kGoldens[] = {
    {"stories260K", "models/stories260K.gguf", "texts.txt", "stories260K-ids.txt", false, {}},
    {"qwen3", "golden/tokenizer/qwen3-vocab.gguf", "texts.txt", "qwen3-ids.txt", false, {}},
    {"llama3", "golden/tokenizer/llama3-vocab.gguf", "texts.txt", "llama3-ids.txt", false, {}},
    {"qwen3-special", "golden/tokenizer/qwen3-vocab.gguf", "special.txt", "qwen3-special-ids.txt", true, {}},
    {"llama3-special", "golden/tokenizer/llama3-vocab.gguf", "special.txt", "llama3-special-ids.txt", true, {}},
};

class GoldenTest : public ::testing::TestWithParam<Golden> {};

TEST_P(GoldenTest, TokenizationMatchesLlamaCpp) {
  CAIRN_REQUIRE_SHARED("golden/tokenizer");
  const Golden& g = GetParam();
  auto tokenizer = Load(g.model);
  ASSERT_NE(tokenizer, nullptr);
  const auto texts = ReadLines(testing::SharedPath(std::string("golden/tokenizer/") + g.texts));
  const auto ids = ReadLines(testing::SharedPath(std::string("golden/tokenizer/") + g.ids));
  ASSERT_EQ(texts.size(), ids.size());
  ASSERT_FALSE(texts.empty());
  TokenizeOptions options;
  options.parse_special = g.parse_special;
  int matched = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto got = tokenizer->Tokenize(Unescape(texts[i]), options);
    const auto want = ParseIds(ids[i]);
    EXPECT_EQ(got, want) << g.name << " line " << i + 1 << ": '" << texts[i] << "'";
    matched += got == want;
  }
  std::cout << g.name << ": " << matched << "/" << texts.size() << " lines match\n";
}

TEST_P(GoldenTest, StreamingDetokenizationRoundTrips) {
  CAIRN_REQUIRE_SHARED("golden/tokenizer");
  const Golden& g = GetParam();
  auto tokenizer = Load(g.model);
  ASSERT_NE(tokenizer, nullptr);
  const auto texts = ReadLines(testing::SharedPath(std::string("golden/tokenizer/") + g.texts));
  const auto ids = ReadLines(testing::SharedPath(std::string("golden/tokenizer/") + g.ids));
  ASSERT_EQ(texts.size(), ids.size());
  DetokenizeOptions options;
  options.render_special = g.parse_special;
  int exact = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<TokenId> list = ParseIds(ids[i]);
    // The BOS the tokenizer added is not part of the text.
    if (tokenizer->add_bos() && !list.empty() && list[0] == tokenizer->special_tokens().bos) {
      list.erase(list.begin());
    }
    StreamingDetokenizer detok(*tokenizer, options);
    std::string text;
    for (const TokenId id : list) {
      const size_t before = text.size();
      ASSERT_TRUE(detok.Push(id, &text).ok());
      // Every chunk handed out is complete UTF-8 on its own.
      const std::string chunk = text.substr(before);
      EXPECT_EQ(chunk.size(), ValidUtf8PrefixLength(chunk)) << g.name << " line " << i + 1;
    }
    EXPECT_EQ(detok.pending_bytes(), 0u);
    detok.Flush(&text);
    const std::string want = Unescape(texts[i]);
    const auto exception = g.round_trip_exceptions.find(static_cast<int>(i));
    if (exception == g.round_trip_exceptions.end()) {
      EXPECT_EQ(text, want) << g.name << " line " << i + 1;
      exact += text == want;
    } else {
      EXPECT_NE(text, want) << g.name << " line " << i + 1
                            << " is listed as an exception but round-trips: " << exception->second;
    }
  }
  std::cout << g.name << ": " << exact << "/" << texts.size() << " lines round-trip, " << g.round_trip_exceptions.size()
            << " named exceptions\n";
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, GoldenTest, ::testing::ValuesIn(kGoldens), [](const auto& info) {
  std::string name = info.param.name;
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
});

}  // namespace
}  // namespace cairn
