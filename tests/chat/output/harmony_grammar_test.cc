// gpt-oss's harmony channels, as the model writes them after the prompt's
// "<|start|>assistant" (openai-gpt-oss-120b.jinja renders the header with
// the recipient first: " to=functions.N<|channel|>commentary json"; the
// model writes "<|channel|>commentary to=functions.N <|constrain|>json").
#include <vector>

#include "chat/output/grammars.h"
#include "gtest/gtest.h"
#include "tests/chat/output/parse_testing.h"

namespace cairn::chat::output {
namespace {

std::vector<Sample> HarmonySamples() {
  const OutputFormat f = OutputFormat::kHarmony;
  return {
      {"analysis_then_final",
       f,
       false,
       "<|channel|>analysis<|message|>User asks the capital. Simple.<|end|><|start|>assistant<|channel|>final"
       "<|message|>Lima.<|return|>",
       {Reasoning("User asks the capital. Simple."), Content("Lima.")}},
      {"analysis_then_call",
       f,
       false,
       "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>",
       {Reasoning("Need the weather."), Call("call_0", "get_weather", R"({"city":"Oslo"})")}},
      {"template_header_order",
       f,
       false,
       " to=functions.search_files<|channel|>commentary json<|message|>{\"pattern\": \"evict\", \"max_results\": 5}"
       "<|call|>",
       {Call("call_0", "search_files", R"({"pattern":"evict","max_results":5})")}},
      // The service stops at <|call|> (an end-of-generation token) without
      // rendering it.
      {"call_without_end_marker",
       f,
       false,
       "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}",
       {Call("call_0", "f", R"({"a":1})")}},
      {"preamble_then_call",
       f,
       false,
       "<|channel|>commentary<|message|>Checking the weather now.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Lima\"}<|call|>",
       {Content("Checking the weather now."), Call("call_0", "get_weather", R"({"city":"Lima"})")}},
      {"malformed_arguments",
       f,
       false,
       "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": Oslo}<|call|>",
       {Call("call_0", "get_weather", "{\"city\": Oslo}", /*raw=*/true)}},
      {"markers_in_argument_strings",
       f,
       false,
       "<|channel|>commentary to=functions.note <|constrain|>json<|message|>{\"text\": \"ends with <|call|> or "
       "<|end|>\"}<|call|>",
       {Call("call_0", "note", R"({"text":"ends with <|call|> or <|end|>"})")}},
      {"prompt_opened_analysis",
       f,
       true,
       "Thinking it over.<|end|><|start|>assistant<|channel|>final<|message|>Done<|return|>",
       {Reasoning("Thinking it over."), Content("Done")}},
      {"no_framing", f, false, "\n Just text. \n", {Content("Just text.")}},
      {"builtin_recipient",
       f,
       false,
       "<|channel|>analysis<|message|>Search.<|end|><|start|>assistant<|channel|>commentary to=browser.search code"
       "<|message|>{\"query\": \"cairn\"}<|call|>",
       {Reasoning("Search."), Call("call_0", "browser.search", R"({"query":"cairn"})")}},
      {"two_calls",
       f,
       false,
       "<|channel|>commentary to=functions.a <|constrain|>json<|message|>{}<|call|><|start|>assistant<|channel|>"
       "commentary to=functions.b <|constrain|>json<|message|>{\"x\": [1, 2]}<|call|>",
       {Call("call_0", "a", "{}"), Call("call_1", "b", R"({"x":[1,2]})")}},
      {"final_without_end", f, false, "<|channel|>final<|message|>Partial ans", {Content("Partial ans")}},
      {"cut_inside_header",
       f,
       false,
       "<|channel|>analysis<|message|>Hm.<|end|><|start|>assistant<|chan",
       {Reasoning("Hm.")}},
  };
}

class HarmonySampleTest : public ::testing::TestWithParam<Sample> {};

TEST_P(HarmonySampleTest, ParsesWholeAndSplitAnywhere) { testing::ExpectParses(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Harmony, HarmonySampleTest, ::testing::ValuesIn(HarmonySamples()),
                         [](const ::testing::TestParamInfo<Sample>& info) { return info.param.name; });

}  // namespace
}  // namespace cairn::chat::output
