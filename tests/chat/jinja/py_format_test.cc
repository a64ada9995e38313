// Tests of chat/jinja/py_format.cc: Python's repr of floats and strings and
// str() of values, with provenance kept.
#include "chat/jinja/py_format.h"

#include <limits>

#include "gtest/gtest.h"

namespace cairn::jinja {
namespace {

TEST(PyFormatTest, FloatsPrintAsPythonRepr) {
  // Python 3.11's repr() of each value.
  const std::pair<double, const char*> cases[] = {
      {0.0, "0.0"},
      {-0.0, "-0.0"},
      {1.0, "1.0"},
      {-1.5, "-1.5"},
      {0.1, "0.1"},
      {0.30000000000000004, "0.30000000000000004"},
      {0.3333333333333333, "0.3333333333333333"},
      {1e+16, "1e+16"},
      {1000000000000000.0, "1000000000000000.0"},
      {1.2345678901234568e+17, "1.2345678901234568e+17"},
      {0.0001, "0.0001"},
      {1e-05, "1e-05"},
      {1.5e-07, "1.5e-07"},
      {5e-324, "5e-324"},
      {1.7976931348623157e+308, "1.7976931348623157e+308"},
      {100.0, "100.0"},
      {1e+22, "1e+22"},
      {1e+23, "1e+23"},
      {0.000123, "0.000123"},
      {123.456, "123.456"},
      {std::numeric_limits<double>::infinity(), "inf"},
      {-std::numeric_limits<double>::infinity(), "-inf"},
      {12345678.9, "12345678.9"},
      {9007199254740992.0, "9007199254740992.0"},
      {1e-100, "1e-100"},
      {3.14159e-10, "3.14159e-10"},
  };
  for (const auto& [value, repr] : cases) EXPECT_EQ(PyFloatRepr(value), repr) << value;
  EXPECT_EQ(PyFloatRepr(std::numeric_limits<double>::quiet_NaN()), "nan");
}

TEST(PyFormatTest, StringsQuoteAndEscapeAsPython) {
  EXPECT_EQ(PyStrRepr("abc"), "'abc'");
  EXPECT_EQ(PyStrRepr("it's"), "\"it's\"");
  EXPECT_EQ(PyStrRepr("a'b\"c"), "'a\\'b\"c'");
  EXPECT_EQ(PyStrRepr("t\tn\nr\r\\"), "'t\\tn\\nr\\r\\\\'");
  EXPECT_EQ(PyStrRepr(std::string("x\0y", 3)), "'x\\x00y'");
  EXPECT_EQ(PyStrRepr("\x7f \xc2\xa0 \xe2\x80\x8b"), "'\\x7f \\xa0 \\u200b'");  // not printable
  EXPECT_EQ(PyStrRepr("é 日本 😀"), "'é 日本 😀'");
  EXPECT_EQ(PyStrRepr("\xff"), "'\\xff'");  // a byte that is no UTF-8
}

TEST(PyFormatTest, PrintedContainersKeepClientText) {
  Dict d;
  ASSERT_TRUE(
      d.Set(Value::String("key", true), Value::List({Value::Int(5, true), Value::None(), Value::Bool(true)})).ok());
  const Text text = ToText(Value::FromDict(std::move(d)));
  EXPECT_EQ(text.bytes(), "{'key': [5, None, True]}");
  // The client's key (quoted) and number are client text; the rest is not.
  ASSERT_EQ(text.client_spans().size(), 2u);
  EXPECT_EQ(
      text.bytes().substr(text.client_spans()[0].begin, text.client_spans()[0].end - text.client_spans()[0].begin),
      "'key'");
  EXPECT_EQ(
      text.bytes().substr(text.client_spans()[1].begin, text.client_spans()[1].end - text.client_spans()[1].begin),
      "5");
  EXPECT_EQ(ToStr(Value()), "");
  EXPECT_EQ(ToRepr(Value()), "Undefined");
  EXPECT_EQ(ToStr(Value::List({Value::String("a")}, ListKind::kTuple)), "('a',)");
}

}  // namespace
}  // namespace cairn::jinja
