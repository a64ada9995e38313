// Tests of chat/jinja/value.cc: provenance through concatenation, Python's
// equality, truthiness and dict keys.
#include "chat/jinja/value.h"

#include "gtest/gtest.h"

namespace cairn::jinja {
namespace {

TEST(ValueTest, TextAppendKeepsClientSpansAndMarksInPlace) {
  Text t("<|im_start|>user\n");
  t.Append("hello", true);
  t.Append(" world", true);  // adjacent client text merges
  t.Append("<|im_end|>", false);
  Text inner("x", true);
  inner.AddMark(0, 7);
  t.Append(inner);
  EXPECT_EQ(t.bytes(), "<|im_start|>user\nhello world<|im_end|>x");
  ASSERT_EQ(t.client_spans().size(), 2u);
  EXPECT_EQ(t.client_spans()[0].begin, 17u);
  EXPECT_EQ(t.client_spans()[0].end, 28u);
  EXPECT_EQ(t.client_spans()[1].begin, 38u);
  ASSERT_EQ(t.marks().size(), 1u);
  EXPECT_EQ(t.marks()[0].offset, 38u);
  EXPECT_EQ(t.marks()[0].object, 7);
  EXPECT_FALSE(Text("").has_client());
  EXPECT_FALSE(Text("", true).has_client());  // no empty spans
}

TEST(ValueTest, DictKeysFollowPythonHashing) {
  Dict d;
  ASSERT_TRUE(d.Set(Value::Int(1), Value::String("one")).ok());
  ASSERT_TRUE(d.Set(Value::Float(1.0), Value::String("float one")).ok());  // the same key
  ASSERT_TRUE(d.Set(Value::String("1"), Value::String("text")).ok());
  ASSERT_TRUE(d.Set(Value::List({Value::Int(1)}, ListKind::kTuple), Value::None()).ok());
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(d.Find(Value::Bool(true))->str(), "float one");
  EXPECT_EQ(d.entries()[0].first.i(), 1);  // the first key stays, as in Python
  EXPECT_EQ(d.Set(Value::List({}), Value::None()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d.Find(Value::List({})), nullptr);
}

TEST(ValueTest, EqualityAndTruthAsPython) {
  EXPECT_TRUE(Equals(Value::Int(1), Value::Float(1.0)));
  EXPECT_TRUE(Equals(Value::Bool(true), Value::Int(1)));
  EXPECT_FALSE(Equals(Value::Int(1), Value::String("1")));
  EXPECT_FALSE(Equals(Value::List({Value::Int(1)}), Value::List({Value::Int(1)}, ListKind::kTuple)));
  EXPECT_TRUE(Equals(Value(), Value()));  // Undefined == Undefined
  EXPECT_FALSE(Equals(Value(), Value::None()));
  Dict a, b;
  ASSERT_TRUE(a.Set(Value::String("x"), Value::Int(1)).ok());
  ASSERT_TRUE(a.Set(Value::String("y"), Value::Int(2)).ok());
  ASSERT_TRUE(b.Set(Value::String("y"), Value::Int(2)).ok());
  ASSERT_TRUE(b.Set(Value::String("x"), Value::Int(1)).ok());
  EXPECT_TRUE(Equals(Value::FromDict(a), Value::FromDict(b)));  // order does not matter
  EXPECT_FALSE(Truthy(Value()));
  EXPECT_FALSE(Truthy(Value::String("")));
  EXPECT_TRUE(Truthy(Value::Generator({}, absl::OkStatus())));  // a generator is an object
  EXPECT_FALSE(Truthy(Value::Float(0.0)));
}

TEST(ValueTest, DepthCountsNesting) {
  Value v = Value::Int(1);
  for (int i = 0; i < 5; ++i) v = Value::List({v});
  EXPECT_EQ(v.depth(), 5);
  EXPECT_EQ(Value::String("x").depth(), 0);
}

}  // namespace
}  // namespace cairn::jinja
