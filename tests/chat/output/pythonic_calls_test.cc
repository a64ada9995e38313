#include "chat/output/pythonic_calls.h"

#include <string>

#include "gtest/gtest.h"

namespace cairn::chat::output {
namespace {

TEST(PythonicCallsTest, ListsAndBareCalls) {
  ParsedBlock block = ParsePythonicCallBlock(" [a(), b.c(x=1,), d(y='q')] ");
  ASSERT_TRUE(block.ok);
  ASSERT_EQ(block.calls.size(), 3u);
  EXPECT_EQ(block.calls[0].name, "a");
  EXPECT_EQ(block.calls[0].arguments, "{}");
  EXPECT_EQ(block.calls[1].name, "b.c");
  EXPECT_EQ(block.calls[1].arguments, R"({"x":1})");
  EXPECT_EQ(block.calls[2].arguments, R"({"y":"q"})");
  block = ParsePythonicCallBlock("f(a=1), g(b=2)");
  ASSERT_TRUE(block.ok);
  EXPECT_EQ(block.calls.size(), 2u);
  EXPECT_TRUE(ParsePythonicCallBlock("[]").ok);
}

TEST(PythonicCallsTest, Literals) {
  const ParsedBlock block = ParsePythonicCallBlock(
      R"(f(s="a\"b\n\u00e9\x41", t='it\'s', n=-3, r=1e3, z=.5, l=[1, [2, (3, 4)]], d={"k": {1: None}}, b=False))");
  ASSERT_TRUE(block.ok);
  EXPECT_EQ(
      block.calls[0].arguments,
      R"({"s":"a\"b\néA","t":"it's","n":-3,"r":1000.0,"z":0.5,"l":[1,[2,[3,4]]],"d":{"k":{"1":null}},"b":false})");
}

TEST(PythonicCallsTest, UnparsedCallsKeepTheirNameAndRawArguments) {
  for (const char* text : {"[f(a=b)]", "f(1, 2)", "f(a=1", "[f(a='x)]", "f(a=1) trailing", "[f(a=1)"}) {
    const ParsedBlock block = ParsePythonicCallBlock(text);
    EXPECT_FALSE(block.ok) << text;
    EXPECT_EQ(block.name, "f") << text;
  }
  EXPECT_EQ(ParsePythonicCallBlock("f(1, 2)").raw_arguments, "1, 2");
  EXPECT_EQ(ParsePythonicCallBlock("no call here").name, "");
  EXPECT_EQ(ParsePythonicCallBlock("two words(a=1)").name, "");
}

TEST(PythonicCallsTest, DeepNestingIsRefused) {
  const std::string deep = "f(a=" + std::string(kMaxNesting + 1, '[') + std::string(kMaxNesting + 1, ']') + ")";
  EXPECT_FALSE(ParsePythonicCallBlock(deep).ok);
  const std::string ok = "f(a=" + std::string(kMaxNesting - 1, '[') + std::string(kMaxNesting - 1, ']') + ")";
  EXPECT_TRUE(ParsePythonicCallBlock(ok).ok);
}

}  // namespace
}  // namespace cairn::chat::output
