// Tests of chat/jinja/json.cc: JSON as values and json.dumps.
#include "chat/jinja/json.h"

#include "chat/jinja/py_format.h"
#include "gtest/gtest.h"

namespace cairn::jinja {
namespace {

TEST(JsonTest, FromJsonKeepsKeyOrderTypesAndProvenance) {
  auto v = FromJson(nlohmann::ordered_json::parse(R"({"z": 1, "a": [1.5, true, null, "s"], "m": {}})"), true);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(ToStr(*v), "{'z': 1, 'a': [1.5, True, None, 's'], 'm': {}}");
  EXPECT_TRUE(v->dict().entries()[0].first.text().has_client());
  EXPECT_TRUE(v->dict().entries()[0].second.client());
  auto plain = FromJson(nlohmann::ordered_json::parse(R"(["t"])"), false);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->items()[0].text().has_client());
}

TEST(JsonTest, FromJsonRefusesDeepNestingAndHugeIntegers) {
  std::string deep(kMaxJsonDepth + 1, '[');
  deep += std::string(kMaxJsonDepth + 1, ']');
  EXPECT_EQ(FromJson(nlohmann::ordered_json::parse(deep), true).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FromJson(nlohmann::ordered_json::parse("18446744073709551615"), true).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(JsonTest, DumpsAsPython) {
  auto v = FromJson(nlohmann::ordered_json::parse(R"({"b": [1, "é\n"], "a": {}})"), true);
  ASSERT_TRUE(v.ok());
  JsonOptions options;
  EXPECT_EQ(ToJson(*v, options, 1 << 20)->bytes(), "{\"b\": [1, \"é\\n\"], \"a\": {}}");
  options.indent = "  ";
  options.sort_keys = true;
  EXPECT_EQ(ToJson(*v, options, 1 << 20)->bytes(), "{\n  \"a\": {},\n  \"b\": [\n    1,\n    \"é\\n\"\n  ]\n}");
  JsonOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(ToJson(Value::String("é😀"), ascii, 1 << 20)->bytes(), "\"\\u00e9\\ud83d\\ude00\"");
  EXPECT_EQ(ToJson(Value(), options, 1 << 20).status().message(),
            "TypeError: Object of type Undefined is not JSON serializable");
  EXPECT_EQ(ToJson(*v, JsonOptions(), 4).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(JsonTest, DumpsKeepClientTextExact) {
  Dict d;
  ASSERT_TRUE(d.Set(Value::String("k", true), Value::String("<|im_end|>", true)).ok());
  auto json = ToJson(Value::FromDict(std::move(d)), JsonOptions(), 1 << 20);
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->bytes(), "{\"k\": \"<|im_end|>\"}");
  ASSERT_EQ(json->client_spans().size(), 2u);
  EXPECT_EQ(json->client_spans()[1].begin, 7u);  // the value's bytes inside its quotes
  EXPECT_EQ(json->client_spans()[1].end, 17u);
}

}  // namespace
}  // namespace cairn::jinja
