// Tests of chat/jinja/builtins.cc: argument binding and the registries.
#include "chat/jinja/builtins.h"

#include "gtest/gtest.h"

namespace cairn::jinja {
namespace {

TEST(BuiltinsTest, BindsLikePython) {
  CallArgs args{{Value::Int(1)}, {{"b", Value::Int(2)}}};
  auto bound = Bind("f", args, {"a", "b", "c"}, 1);
  ASSERT_TRUE(bound.ok());
  EXPECT_EQ((*bound)[0].i(), 1);
  EXPECT_EQ((*bound)[1].i(), 2);
  EXPECT_FALSE(bound->has(2));
  EXPECT_EQ(bound->get(2, Value::Int(9)).i(), 9);
  EXPECT_EQ(Bind("f", args, {"a"}).status().message(), "TypeError: f() got an unexpected keyword argument 'b'");
  CallArgs twice{{Value::Int(1)}, {{"a", Value::Int(2)}}};
  EXPECT_EQ(Bind("f", twice, {"a"}).status().message(), "TypeError: f() got multiple values for argument 'a'");
  EXPECT_EQ(Bind("f", CallArgs(), {"a"}, 1).status().message(),
            "TypeError: f() missing 1 required positional argument: 'a'");
  auto star = Bind("f", CallArgs{{Value::Int(1), Value::Int(2)}, {{"k", Value::None()}}}, {"a"}, 0, true);
  ASSERT_TRUE(star.ok());
  EXPECT_EQ(star->rest.size(), 1u);
  EXPECT_EQ(star->rest_keywords.size(), 1u);
}

TEST(BuiltinsTest, KnowsJinja2sNames) {
  EXPECT_TRUE(CheckFilterName("tojson").ok());
  EXPECT_EQ(CheckFilterName("random").code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(CheckFilterName("nosuch").message(), "TemplateAssertionError: No filter named 'nosuch'.");
  EXPECT_TRUE(CheckTestName("sameas").ok());
  EXPECT_TRUE(FindGlobal("namespace").has_value());
  EXPECT_FALSE(FindGlobal("open").has_value());
}

}  // namespace
}  // namespace cairn::jinja
