// Tests of chat/jinja/py_string.cc and py_unicode.cc: Python's str
// operations, character by character.
#include "chat/jinja/py_string.h"

#include "chat/jinja/py_unicode.h"
#include "gtest/gtest.h"

namespace cairn::jinja {
namespace {

TEST(PyStringTest, CharactersAreCodepoints) {
  EXPECT_EQ(PyLength("日本語"), 3u);
  EXPECT_EQ(PyLength("a\xff"), 2u);  // a stray byte is one character
  EXPECT_EQ(PySubstr("日本語", 1, 2), "本");
  EXPECT_EQ(PyByteOffset("é!", 1), 2u);
  EXPECT_EQ(PyCharIndex("é!", 2), 1u);
  const std::vector<PyChar> chars = PyChars("\xe2\x82");  // truncated sequence
  ASSERT_EQ(chars.size(), 2u);
  EXPECT_EQ(chars[0].cp, 0xFFFDu);
}

TEST(PyStringTest, CaseMappingsAreUnicodes) {
  EXPECT_EQ(PyUpper("straße é"), "STRASSE É");
  EXPECT_EQ(PyLower("ΟΔΟΣ ΣΑΣ."), "οδος σας.");  // final sigma
  EXPECT_EQ(PyTitle("hello wORLD 3rd"), "Hello World 3Rd");
  EXPECT_EQ(PyCapitalize("ǆemal"), "ǅemal");
  EXPECT_EQ(PyUpper("a\xffz"), "A\xffZ");  // bytes that are no characters stay
  EXPECT_TRUE(PyIsTitle("Hello World"));
  EXPECT_FALSE(PyIsLower("abc1A"));
  EXPECT_TRUE(PyAllChars("١٢", kPyDecimal));  // Arabic-Indic digits
}

TEST(PyStringTest, StripSplitFindReplaceAsPython) {
  EXPECT_EQ(PyStrip("\u3000 a \t\n", std::nullopt, true, true), "a");
  EXPECT_EQ(PyStrip("xyaxy", std::string("yx"), true, false), "axy");
  EXPECT_EQ(PySplit(" a  b ", std::nullopt, -1), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(PySplit("a,,b", std::string(","), -1), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(PyRSplit("a b c", std::nullopt, 1), (std::vector<std::string>{"a b", "c"}));
  EXPECT_EQ(PySplitLines("a\r\nb\u2028c", false), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(PyFind("héllo", "l", std::nullopt, std::nullopt, false), 2);
  EXPECT_EQ(PyFind("hello", "l", -2, std::nullopt, false), 3);
  EXPECT_EQ(PyFind("hello", "l", std::nullopt, std::nullopt, true), 3);
  EXPECT_EQ(PyCount("aaaa", "aa", std::nullopt, std::nullopt), 2);
  EXPECT_EQ(PyReplace("aaa", "a", "b", 2), "bba");
  EXPECT_EQ(PyReplace("ab", "", "-", -1), "-a-b-");
  EXPECT_EQ(PyReplacedSize("ab", "", "--", -1), 8u);
  EXPECT_EQ(PyPad("ab", 5, "*", '^'), "**ab*");
  EXPECT_EQ(PyPad("abc", 6, "*", '^'), "*abc**");
  EXPECT_EQ(PyZfill("-7", 4), "-007");
  EXPECT_EQ(HtmlEscape("<a href='x'>&\"</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&#34;&lt;/a&gt;");
}

}  // namespace
}  // namespace cairn::jinja
