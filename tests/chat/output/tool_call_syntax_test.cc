#include "chat/output/tool_call_syntax.h"

#include <string>

#include "gtest/gtest.h"

namespace cairn::chat::output {
namespace {

TEST(ToolCallSyntaxTest, ArgumentsTextIsCompactJsonOfAnObjectInTheModelsKeyOrder) {
  const ToolCall call = CallWithArgumentsText("f", " {\"z\": 1, \"a\": {\"k\": [true, null, 2.5]}, \"é\": \"日本\"} ");
  EXPECT_EQ(call.name, "f");
  EXPECT_EQ(call.arguments, R"({"z":1,"a":{"k":[true,null,2.5]},"é":"日本"})");
  EXPECT_FALSE(call.arguments_raw);
  EXPECT_EQ(CallWithArgumentsText("f", "  ").arguments, "{}");
}

TEST(ToolCallSyntaxTest, ArgumentsThatAreNotAnObjectAreKeptRaw) {
  for (const char* text : {"[1, 2]", "\"just text\"", "{\"a\": }", "call me", "{\"a\": 1} trailing"}) {
    const ToolCall call = CallWithArgumentsText("f", text);
    EXPECT_TRUE(call.arguments_raw) << text;
    EXPECT_EQ(call.arguments, text);
  }
}

TEST(ToolCallSyntaxTest, DeepNestingIsNotParsed) {
  const std::string deep = std::string(kMaxNesting + 1, '[') + std::string(kMaxNesting + 1, ']');
  EXPECT_FALSE(ParseJson(deep).has_value());
  const std::string ok = std::string(kMaxNesting, '[') + std::string(kMaxNesting, ']');
  EXPECT_TRUE(ParseJson(ok).has_value());
  EXPECT_TRUE(ParseJson("\"[[[[\"").has_value());  // brackets inside a string do not count
}

TEST(ToolCallSyntaxTest, JsonCallObjectsInEveryShape) {
  const ParsedBlock block = ParseJsonCallBlock(
      R"({"name": "a", "arguments": {"x": 1}}
         [{"name": "b", "parameters": {}}, {"type": "function", "function": {"name": "c", "arguments": "{\"y\": 2}"}, "id": "id_c"}];
         {"tool_call_id": "7", "tool_name": "d", "parameters": {"z": null}}, {"name": "e"})");
  ASSERT_TRUE(block.ok);
  ASSERT_EQ(block.calls.size(), 5u);
  EXPECT_EQ(block.calls[0].arguments, R"({"x":1})");
  EXPECT_EQ(block.calls[1].name, "b");
  EXPECT_EQ(block.calls[2].name, "c");
  EXPECT_EQ(block.calls[2].id, "id_c");
  EXPECT_EQ(block.calls[2].arguments, R"({"y":2})");
  EXPECT_EQ(block.calls[3].id, "7");
  EXPECT_EQ(block.calls[3].name, "d");
  EXPECT_EQ(block.calls[4].arguments, "{}");
}

TEST(ToolCallSyntaxTest, UnparsedJsonBlocksSalvageTheName) {
  ParsedBlock block = ParseJsonCallBlock(R"( {"name": "get_weather", "arguments": {"city": "Oslo"} )");
  EXPECT_FALSE(block.ok);
  EXPECT_EQ(block.name, "get_weather");
  EXPECT_EQ(block.raw_arguments, R"({"name": "get_weather", "arguments": {"city": "Oslo"})");
  block = ParseJsonCallBlock(R"({"arguments": {}})");  // a call object needs a name
  EXPECT_FALSE(block.ok);
  EXPECT_EQ(block.name, "");
  block = ParseJsonCallBlock(R"({"name": "Bob", "age": 3})", /*require_arguments=*/true);
  EXPECT_FALSE(block.ok);
  EXPECT_EQ(block.name, "");  // no arguments: not a call at all
}

TEST(ToolCallSyntaxTest, QwenXml) {
  ParsedBlock block = ParseQwenXmlBlock(
      "\n<function=f>\n<parameter=n>\n5\n</parameter>\n<parameter=s>\n a b \n</parameter>\n</function>\n");
  ASSERT_TRUE(block.ok);
  ASSERT_EQ(block.calls.size(), 1u);
  EXPECT_EQ(block.calls[0].arguments, R"({"n":5,"s":" a b "})");
  block = ParseQwenXmlBlock("<function=f>\n</function> extra");
  EXPECT_FALSE(block.ok);
  EXPECT_EQ(block.name, "f");
  EXPECT_FALSE(ParseQwenXmlBlock("<function=").ok);
  EXPECT_EQ(ParseQwenXmlBlock("<function=").name, "");
}

TEST(ToolCallSyntaxTest, ParameterValues) {
  EXPECT_EQ(ParameterValue("12"), Json(12));
  EXPECT_EQ(ParameterValue("[1, \"a\"]"), Json::parse("[1, \"a\"]"));
  EXPECT_EQ(ParameterValue("False"), Json(false));
  EXPECT_EQ(ParameterValue("None"), Json(nullptr));
  EXPECT_EQ(ParameterValue("null"), Json(nullptr));
  EXPECT_EQ(ParameterValue("Oslo"), Json("Oslo"));
  EXPECT_EQ(ParameterValue("2024-01-15"), Json("2024-01-15"));
  EXPECT_EQ(ParameterValue("{not json"), Json("{not json"));
}

TEST(ToolCallSyntaxTest, Glm) {
  ParsedBlock block = ParseGlmBlock(
      "f\n<arg_key>a</arg_key>\n<arg_value>[1]</arg_value>\n<arg_key>b</arg_key><arg_value>x y</arg_value>\n");
  ASSERT_TRUE(block.ok);
  EXPECT_EQ(block.calls[0].arguments, R"({"a":[1],"b":"x y"})");
  EXPECT_EQ(ParseGlmBlock("g").calls.at(0).arguments, "{}");
  EXPECT_FALSE(ParseGlmBlock("<arg_key>a</arg_key>").ok);
  EXPECT_EQ(ParseGlmBlock("<arg_key>a</arg_key>").name, "");
}

TEST(ToolCallSyntaxTest, InvokeBlocks) {
  ParsedBlock block = ParseInvokeBlock(
      "<invoke name=\"a\"></invoke>\n<invoke name=\"b\">\n<parameter name=\"x\">{\"y\": 1}</parameter>\n</invoke>", "");
  ASSERT_TRUE(block.ok);
  ASSERT_EQ(block.calls.size(), 2u);
  EXPECT_EQ(block.calls[0].arguments, "{}");
  EXPECT_EQ(block.calls[1].arguments, R"({"x":{"y":1}})");
  EXPECT_FALSE(ParseInvokeBlock("<invoke name=\"\"></invoke>", "").ok);
  EXPECT_EQ(ParseInvokeBlock("<invoke name=\"\"></invoke>", "").name, "");
  block =
      ParseInvokeBlock("<P|invoke name=\"c\"><P|parameter name=\"s\" string=\"true\">5</P|parameter></P|invoke>", "P|");
  ASSERT_TRUE(block.ok);
  EXPECT_EQ(block.calls[0].arguments, R"({"s":"5"})");
  block = ParseInvokeBlock("<invoke name=\"d\"><parameter name=\"s\">5</invoke>", "");
  EXPECT_FALSE(block.ok);
  EXPECT_EQ(block.name, "d");
}

TEST(ToolCallSyntaxTest, Gemma4Calls) {
  ParsedBlock block = ParseGemma4Block("call:f{a:<|\"|>x<|\"|>,b:{c:[1,2]},d:False}");
  ASSERT_TRUE(block.ok);
  EXPECT_EQ(block.calls[0].name, "f");
  EXPECT_EQ(block.calls[0].arguments, R"({"a":"x","b":{"c":[1,2]},"d":false})");
  EXPECT_EQ(ParseGemma4Block("call:g{}").calls.at(0).arguments, "{}");
  block = ParseGemma4Block("call:h{a:<|\"|>unterminated}");
  EXPECT_FALSE(block.ok);
  EXPECT_EQ(block.name, "h");
  EXPECT_EQ(ParseGemma4Block("call:{a:1}").name, "");
}

TEST(ToolCallSyntaxTest, InvalidUtf8IsReplacedWhenPrinted) {
  Json value = Json::object();
  value["s"] = std::string(
      "a\xFF"
      "b");
  EXPECT_EQ(DumpJson(value),
            "{\"s\":\"a\xEF\xBF\xBD"
            "b\"}");
}

}  // namespace
}  // namespace cairn::chat::output
