#include "backends/model/unicode_regex.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends/model/unicode.h"
#include "gtest/gtest.h"

namespace cairn {
namespace {

std::vector<std::string> SplitText(std::string_view pattern, std::string_view text) {
  auto re = UnicodeRegex::Compile(pattern);
  EXPECT_TRUE(re.ok()) << re.status();
  const auto cpts = DecodeUtf8Lenient(text);
  std::vector<size_t> pieces = {cpts.size()}, out;
  re->Split(cpts, pieces, &out);
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t len : out) {
    std::string w;
    for (size_t i = start; i < start + len; ++i) AppendUtf8(cpts[i], &w);
    words.push_back(w);
    start += len;
  }
  EXPECT_EQ(start, cpts.size());
  return words;
}

using Words = std::vector<std::string>;

TEST(UnicodeTest, Categories) {
  EXPECT_EQ(CategoryOf('a'), UnicodeCategory::kLetter);
  EXPECT_EQ(CategoryOf(0x4E2D), UnicodeCategory::kLetter);  // 中
  EXPECT_EQ(CategoryOf('7'), UnicodeCategory::kNumber);
  EXPECT_EQ(CategoryOf(0x00BD), UnicodeCategory::kNumber);  // ½
  EXPECT_EQ(CategoryOf(0x0301), UnicodeCategory::kMark);    // combining acute
  EXPECT_EQ(CategoryOf('!'), UnicodeCategory::kPunctuation);
  EXPECT_EQ(CategoryOf('$'), UnicodeCategory::kSymbol);
  EXPECT_EQ(CategoryOf(0x1F642), UnicodeCategory::kSymbol);  // 🙂
  EXPECT_EQ(CategoryOf(' '), UnicodeCategory::kSeparator);
  EXPECT_EQ(CategoryOf('\n'), UnicodeCategory::kOther);
  EXPECT_EQ(CategoryOf(0x10FFFF), UnicodeCategory::kOther);
  EXPECT_EQ(CategoryOf(0x200000), UnicodeCategory::kOther);
  for (uint32_t cp : {0x09u, 0x0Au, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x2003u, 0x3000u}) {
    EXPECT_TRUE(IsWhitespace(cp)) << cp;
  }
  for (uint32_t cp : {0x1Cu, 0x1Fu, 0x200Bu, 0x61u, 0x110000u}) EXPECT_FALSE(IsWhitespace(cp)) << cp;
}

TEST(UnicodeTest, LenientDecodingFollowsLlamaCpp) {
  EXPECT_EQ(DecodeUtf8Lenient("a\xFF"
                              "b"),
            (std::vector<uint32_t>{'a', 0xFFFD, 'b'}));
  EXPECT_EQ(DecodeUtf8Lenient("\xE4\xB8"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
  EXPECT_EQ(DecodeUtf8Lenient("\xC0\x80"), (std::vector<uint32_t>{0}));  // overlong kept
  EXPECT_EQ(DecodeUtf8Lenient("\xF0\x9F\x99\x82"), (std::vector<uint32_t>{0x1F642}));
  std::string s;
  AppendUtf8(0x1F642, &s);
  EXPECT_EQ(s, "\xF0\x9F\x99\x82");
  s.clear();
  AppendUtf8(0x1FFFFF, &s);
  EXPECT_EQ(s, "\xEF\xBF\xBD");
}

TEST(UnicodeTest, ValidPrefix) {
  EXPECT_EQ(ValidUtf8PrefixLength("ab\xE4\xB8"), 2u);
  EXPECT_EQ(ValidUtf8PrefixLength("\xED\xA0\x80"), 0u);  // surrogate
  EXPECT_EQ(ValidUtf8PrefixLength("\xC0\x80"), 0u);      // overlong
  EXPECT_EQ(ValidUtf8PrefixLength("\xF4\x90\x80\x80"), 0u);
  EXPECT_EQ(ValidUtf8PrefixLength("caf\xC3\xA9"), 5u);
}

TEST(UnicodeTest, ByteAlphabetIsABijection) {
  std::vector<bool> seen(512, false);
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = ByteToAlphabet(static_cast<uint8_t>(b));
    ASSERT_LT(cp, 512u);
    EXPECT_FALSE(seen[cp]);
    seen[cp] = true;
    EXPECT_EQ(AlphabetToByte(cp), b);
  }
  EXPECT_EQ(ByteToAlphabet(' '), 0x120u);   // Ġ
  EXPECT_EQ(ByteToAlphabet('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(ByteToAlphabet('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(AlphabetToByte(0x4E2D), -1);
}

TEST(UnicodeRegexTest, OrderedAlternationAndBacktracking) {
  auto re = UnicodeRegex::Compile("a|ab");
  ASSERT_TRUE(re.ok());
  const auto ab = DecodeUtf8Lenient("ab");
  EXPECT_EQ(re->MatchAt(ab, 0, 2, 0), 1);
  auto re2 = UnicodeRegex::Compile(R"(\s+(?!\S)|\s+)");
  ASSERT_TRUE(re2.ok());
  const auto sp = DecodeUtf8Lenient("   x");
  EXPECT_EQ(re2->MatchAt(sp, 0, 4, 0), 2);
  EXPECT_EQ(re2->MatchAt(sp, 0, 3, 0), 3);  // the lookahead sees only [begin, end)
  auto lazy = UnicodeRegex::Compile("a+?b|a");
  ASSERT_TRUE(lazy.ok());
  const auto aaa = DecodeUtf8Lenient("aaab");
  EXPECT_EQ(lazy->MatchAt(aaa, 0, 4, 0), 4);
  EXPECT_EQ(lazy->MatchAt(aaa, 0, 3, 0), 1);
  auto anchors = UnicodeRegex::Compile(R"(\s+$)");
  ASSERT_TRUE(anchors.ok());
  const auto tail = DecodeUtf8Lenient("a  ");
  EXPECT_EQ(anchors->MatchAt(tail, 0, 3, 1), 2);
  EXPECT_EQ(anchors->MatchAt(tail, 0, 2, 1), 1);
}

TEST(UnicodeRegexTest, SplitKeepsGapsAsPieces) {
  EXPECT_EQ(SplitText("a", "xxaxxa"), (Words{"xx", "a", "xx", "a"}));
  EXPECT_EQ(SplitText(R"(\p{N}{1,3})", "12345x"), (Words{"123", "45", "x"}));
  EXPECT_EQ(SplitText(R"((?i:'s|'re))", "it'S we'Re"), (Words{"it", "'S", " we", "'Re"}));
  EXPECT_EQ(SplitText(R"([^\s\p{L}]+)", "ab!?  ;"), (Words{"ab", "!?", "  ", ";"}));
}

TEST(UnicodeRegexTest, StartFiltersNeverHideAMatch) {
  struct Case {
    std::string_view pattern, text;
    int64_t want;
  };
  const Case cases[] = {
      {"(?=a)ab|b", "ab", 2},
      {"(?!a)\\p{L}|a", "a", 1},
      {"^x|y", "x", 1},
      {"[^a]?b", "cb", 2},
      {"[^a]?b", "b", 1},
      {"\\P{L}x", "1x", 2},
      {"(?i:K)", "k", 1},
      {"z|\\s*\\n", "  \n", 3},
      {"x*y", "y", 1},
      {"[^\\s\\p{L}]+", "\xE2\x82\xAC", 1},  // euro sign, non-ASCII symbol
      {"\\S", "\xE4\xB8\xAD", 1},
      {"\\s", "\xE3\x80\x80", 1},     // U+3000
      {"[\xC3\xA9]", "\xC3\xA9", 1},  // a non-ASCII literal in a class
      {"[^\xC3\xA9]", "\xC3\xA8", 1},
  };
  for (const Case& c : cases) {
    auto re = UnicodeRegex::Compile(c.pattern);
    ASSERT_TRUE(re.ok()) << c.pattern << ": " << re.status();
    const auto cpts = DecodeUtf8Lenient(c.text);
    EXPECT_EQ(re->MatchAt(cpts, 0, cpts.size(), 0), c.want) << c.pattern << " on " << c.text;
  }
}

TEST(UnicodeRegexTest, Llama3Pattern) {
  constexpr std::string_view kLlama3 =
      R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(SplitText(kLlama3, "Hello  world!!!\n\nfoo 123456 I'm"),
            (Words{"Hello", " ", " world", "!!!\n\n", "foo", " ", "123", "456", " I", "'m"}));
  EXPECT_EQ(SplitText(kLlama3, "中文 caf\xC3\xA9\t\n x"), (Words{"中文", " café", "\t\n", " x"}));
}

TEST(UnicodeRegexTest, LongRunsDoNotExhaustTheStack) {
  const std::string spaces(1 << 20, ' ');
  EXPECT_EQ(SplitText(R"(\s+(?!\S)|\s+)", spaces + "x"), (Words{std::string((1 << 20) - 1, ' '), " ", "x"}));
  const std::string letters(1 << 20, 'a');
  EXPECT_EQ(SplitText(R"( ?\p{L}+)", letters).size(), 1u);
}

TEST(UnicodeRegexTest, RejectsUnsupportedSyntax) {
  for (std::string_view bad : {"(?<=a)b", R"(\p{Lu})", "a++", "(ab", "[a-", "*a", R"(\1)", "a{3,1}", R"(\b)", "a)"}) {
    auto re = UnicodeRegex::Compile(bad);
    EXPECT_FALSE(re.ok()) << bad;
    if (!re.ok()) {
      EXPECT_EQ(re.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    }
  }
}

}  // namespace
}  // namespace cairn
