#include "service/scheduling/stop_matcher.h"

#include <string>

#include "gtest/gtest.h"

namespace cairn::service {
namespace {

TEST(StopMatcherTest, PassesTextThroughWithoutStops) {
  StopMatcher m({});
  EXPECT_EQ(m.Push("hello").emit, "hello");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, MatchesAcrossPiecesAndHoldsBackPrefixes) {
  StopMatcher m({"END"});
  auto r = m.Push("abc E");
  EXPECT_EQ(r.emit, "abc ");  // "E" could start "END"
  EXPECT_FALSE(r.stopped);
  r = m.Push("N");
  EXPECT_EQ(r.emit, "");
  r = m.Push("D tail");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "");
  EXPECT_EQ(r.matched, "END");
}

TEST(StopMatcherTest, ReleasesHeldTextWhenItStopsMatching) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Push("xE").emit, "x");
  EXPECT_EQ(m.Push("Nx").emit, "ENx");
  EXPECT_EQ(m.Push("EN").emit, "");
  EXPECT_EQ(m.Flush(), "EN");
}

TEST(StopMatcherTest, EarliestMatchWins) {
  StopMatcher m({"cd", "bcde"});
  auto r = m.Push("abcdef");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "a");
  EXPECT_EQ(r.matched, "bcde");
}

TEST(StopMatcherTest, MultiByteStopStrings) {
  StopMatcher m({"\xC3\xA9t\xC3\xA9"});  // "été"
  EXPECT_EQ(m.Push("un \xC3\xA9").emit, "un ");
  auto r = m.Push("t\xC3\xA9!");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "");
}

}  // namespace
}  // namespace cairn::service
