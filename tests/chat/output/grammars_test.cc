// Every format but harmony (harmony_grammar_test.cc) on replies as its
// models write them: the syntax comes from what the templates in
// ../shared/chat_templates render for an assistant turn with tool calls
// (template_replies_test.cc checks those renderings themselves). Each
// sample is checked whole and split at every byte (parse_testing.h).
#include "chat/output/grammars.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/chat/output/parse_testing.h"

namespace cairn::chat::output {
namespace {

constexpr char kOslo[] = R"({"city":"Oslo"})";
constexpr char kLima[] = R"({"city":"Lima","unit":"celsius"})";
constexpr char kEvict[] = R"({"pattern":"evict","max_results":5})";

std::vector<Sample> ThinkSamples() {
  const OutputFormat f = OutputFormat::kThink;
  return {
      {"think_then_content",
       f,
       false,
       "<think>\nLet me add.\n</think>\n\n2 + 2 = 4.",
       {Reasoning("Let me add."), Content("2 + 2 = 4.")}},
      {"think_opened_by_prompt",
       f,
       true,
       "The user greets.\nTwo lines.\n</think>\n\nHello!",
       {Reasoning("The user greets.\nTwo lines."), Content("Hello!")}},
      {"think_only_at_start",
       f,
       false,
       "The tag <think> is literal </think> here.",
       {Content("The tag <think> is literal </think> here.")}},
      {"think_unterminated", f, true, "Still thinking about ", {Reasoning("Still thinking about")}},
      {"think_marker_prefix_at_end", f, false, "a < b and b </thi", {Content("a < b and b </thi")}},
      {"think_leading_space_then_think", f, false, "\n <think>x</think>y", {Reasoning("x"), Content("y")}},
      {"think_utf8",
       f,
       true,
       "Éthique — «ok» 日本\n</think>\n🙂 done",
       {Reasoning("Éthique — «ok» 日本"), Content("🙂 done")}},
      {"none_untouched", OutputFormat::kNone, false, "  Hello <think> world\n", {Content("  Hello <think> world\n")}},
  };
}

std::vector<Sample> QwenXmlSamples() {
  const OutputFormat f = OutputFormat::kQwenXml;
  return {
      // Qwen3.5 with thinking on: the prompt ended with "<think>\n".
      {"qwen35_reasoning_then_two_calls",
       f,
       true,
       "The user wants weather in two "
       "cities.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n"
       "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n"
       "</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>",
       {Reasoning("The user wants weather in two cities."), Call("call_0", "get_weather", kOslo),
        Call("call_1", "get_weather", kLima)}},
      {"qwen3_coder_content_then_call",
       f,
       false,
       "Let me search.\n\n<tool_call>\n<function=search_files>\n<parameter=pattern>\nevict\n</parameter>\n"
       "<parameter=max_results>\n5\n</parameter>\n</function>\n</tool_call>",
       {Content("Let me search."), Call("call_0", "search_files", kEvict)}},
      // Nemotron 3 Nano writes the same syntax after an empty think block.
      {"nemotron3_empty_think",
       f,
       false,
       "<think></think>Let me search.\n<tool_call>\n<function=search_files>\n<parameter=pattern>\nevict\n</parameter>\n"
       "<parameter=max_results>\n5\n</parameter>\n</function>\n</tool_call>\n",
       {Content("Let me search."), Call("call_0", "search_files", kEvict)}},
      {"qwen_xml_value_types",
       f,
       false,
       "<tool_call>\n<function=plan>\n<parameter=options>\n{\"deep\": true, \"paths\": [\"a\", \"b\"]}\n</parameter>\n"
       "<parameter=dry_run>\nTrue\n</parameter>\n<parameter=note>\nline one\nline two\n</parameter>\n"
       "<parameter=quoted>\n\"12\"\n</parameter>\n<parameter=ratio>\n-0.5\n</parameter>\n</function>\n</tool_call>",
       {Call(
           "call_0", "plan",
           R"({"options":{"deep":true,"paths":["a","b"]},"dry_run":true,"note":"line one\nline two","quoted":"12","ratio":-0.5})")}},
      {"qwen_xml_marker_like_content",
       f,
       false,
       "In XML, write <function=name> inside a </tool_call> pair; a<b.",
       {Content("In XML, write <function=name> inside a </tool_call> pair; a<b.")}},
      {"qwen_xml_unclosed_parameter",
       f,
       false,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</function>\n</tool_call>",
       {Call("call_0", "get_weather", "<parameter=city>\nOslo", /*raw=*/true)}},
      {"qwen_xml_no_function",
       f,
       false,
       "<tool_call>\nhello\n</tool_call> done",
       {Content("<tool_call>\nhello\n</tool_call> done")}},
      {"qwen_xml_cut_inside_call",
       f,
       false,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nOs",
       {Call("call_0", "get_weather", "<parameter=city>\nOs", /*raw=*/true)}},
      {"qwen_xml_missing_closing_marker",
       f,
       false,
       "<tool_call>\n<function=ping>\n</function>",
       {Call("call_0", "ping", "{}")}},
  };
}

std::vector<Sample> HermesSamples() {
  const OutputFormat f = OutputFormat::kHermes;
  return {
      {"hermes_qwen3_reasoning_two_calls",
       f,
       false,
       "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
       "{\"city\": \"Oslo\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Lima\", \"unit\": \"celsius\"}}\n</tool_call>",
       {Reasoning("The user wants the weather."), Call("call_0", "get_weather", kOslo),
        Call("call_1", "get_weather", kLima)}},
      {"hermes_markers_inside_json_strings",
       f,
       false,
       R"(<tool_call>
{"name": "write_file", "arguments": {"path": "a.xml", "text": "<tool_call>x</tool_call> and </tool_call> \"q\""}}
</tool_call>)",
       {Call("call_0", "write_file", R"({"path":"a.xml","text":"<tool_call>x</tool_call> and </tool_call> \"q\""})")}},
      {"hermes_malformed_arguments",
       f,
       false,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}\n</tool_call>",
       {Call("call_0", "get_weather", R"({"name": "get_weather", "arguments": {"city": "Oslo"})", /*raw=*/true)}},
      {"hermes_arguments_as_string",
       f,
       false,
       R"(<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>)",
       {Call("call_0", "f", R"({"a":1})")}},
      {"hermes_arguments_not_an_object",
       f,
       false,
       R"(<tool_call>{"name": "f", "arguments": [1, 2]}</tool_call>)",
       {Call("call_0", "f", "[1,2]", /*raw=*/true)}},
      {"hermes_content_around_call",
       f,
       false,
       "Sure.\n<tool_call>{\"name\": \"ping\", \"arguments\": {}}</tool_call>\nDone.",
       {Content("Sure."), Call("call_0", "ping", "{}"), Content("Done.")}},
      {"hermes_marker_prefix_at_end", f, false, "Compare a <tool", {Content("Compare a <tool")}},
      {"hermes_not_json",
       f,
       false,
       "<tool_call>I cannot call tools.</tool_call>",
       {Content("<tool_call>I cannot call tools.</tool_call>")}},
  };
}

std::vector<Sample> Llama3Samples() {
  const OutputFormat f = OutputFormat::kLlama3;
  return {
      {"llama3_json_call",
       f,
       false,
       R"({"name": "search_files", "parameters": {"pattern": "evict", "max_results": 5}})",
       {Call("call_0", "search_files", kEvict)}},
      {"llama3_spaced_json_call",
       f,
       false,
       "\n { \"name\" : \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
       {Call("call_0", "get_weather", kOslo)}},
      {"llama3_two_calls",
       f,
       false,
       R"({"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}})",
       {Call("call_0", "a", "{}"), Call("call_1", "b", R"({"x":1})")}},
      {"llama3_type_function",
       f,
       false,
       R"({"type": "function", "name": "ping", "parameters": {}})",
       {Call("call_0", "ping", "{}")}},
      {"llama3_json_answer", f, false, R"({"answer": 42})", {Content(R"({"answer": 42})")}},
      {"llama3_named_object_not_a_call",
       f,
       false,
       R"({"name": "Bob", "age": 3} is a person.)",
       {Content(R"({"name": "Bob", "age": 3} is a person.)")}},
      {"llama3_builtin_call",
       f,
       false,
       "<|python_tag|>brave_search.call(query=\"weather in Oslo\")",
       {Call("call_0", "brave_search", R"({"query":"weather in Oslo"})")}},
      {"llama3_python_tag_json",
       f,
       false,
       "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}<|eom_id|>",
       {Call("call_0", "get_weather", kOslo)}},
      {"llama3_python_code",
       f,
       false,
       "<|python_tag|>import math\nprint(math.sqrt(2))",
       {Call("call_0", "python", R"j({"code":"import math\nprint(math.sqrt(2))"})j")}},
      {"llama3_plain_answer", f, false, "The capital of Peru is Lima.", {Content("The capital of Peru is Lima.")}},
      {"llama3_semicolon_is_text_before_a_call", f, false, "; not a separator", {Content("; not a separator")}},
      {"llama3_cut_call",
       f,
       false,
       R"({"name": "get_weather", "parameters": {"city": "Os)",
       {Call("call_0", "get_weather", R"({"name": "get_weather", "parameters": {"city": "Os)", /*raw=*/true)}},
  };
}

std::vector<Sample> ListFormatSamples() {
  return {
      // Nemotron Nano v2: the prompt ends with "<think>\n".
      {"nemotron_reasoning_two_calls",
       OutputFormat::kNemotron,
       true,
       "Two cities.\n</think>\n\n<TOOLCALL>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, "
       "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\", \"unit\": \"celsius\"}}]</TOOLCALL>",
       {Reasoning("Two cities."), Call("call_0", "get_weather", kOslo), Call("call_1", "get_weather", kLima)}},
      {"nemotron_content_then_call",
       OutputFormat::kNemotron,
       false,
       "Let me search.\n<TOOLCALL>[{\"name\": \"search_files\", \"arguments\": {\"pattern\": \"evict\", "
       "\"max_results\": 5}}]</TOOLCALL>\n",
       {Content("Let me search."), Call("call_0", "search_files", kEvict)}},
      {"nemotron_unbalanced_list",
       OutputFormat::kNemotron,
       false,
       R"(<TOOLCALL>[{"name": "f", "arguments": {"a": 1}]</TOOLCALL>)",
       {Call("call_0", "f", R"([{"name": "f", "arguments": {"a": 1}])", /*raw=*/true)}},
      {"granite_two_calls",
       OutputFormat::kGranite,
       false,
       "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, {\"name\": \"get_weather\", "
       "\"arguments\": {\"city\": \"Lima\", \"unit\": \"celsius\"}}]",
       {Call("call_0", "get_weather", kOslo), Call("call_1", "get_weather", kLima)}},
      {"granite_thinking_response",
       OutputFormat::kGranite,
       false,
       "<think>Simple question.</think><response>Lima is the capital.</response>",
       {Reasoning("Simple question."), Content("Lima is the capital.")}},
      {"granite_content_after_list",
       OutputFormat::kGranite,
       false,
       "Checking.<|tool_call|>[{\"name\": \"ping\", \"arguments\": {}}] then more",
       {Content("Checking."), Call("call_0", "ping", "{}"), Content("then more")}},
      {"lfm2_two_calls",
       OutputFormat::kLfm2,
       false,
       "<|tool_call_start|>[get_weather(city=\"Oslo\"), get_weather(city=\"Lima\", unit=\"celsius\")]<|tool_call_end|>",
       {Call("call_0", "get_weather", kOslo), Call("call_1", "get_weather", kLima)}},
      {"lfm2_python_literals",
       OutputFormat::kLfm2,
       false,
       "<|tool_call_start|>[search_files(pattern='evict', max_results=5, flags=[\"a\", 'b'], strict=True, "
       "extra=None, opts={'k': 1.5, 2: (1,)})]<|tool_call_end|>Searching.",
       {Call(
            "call_0", "search_files",
            R"({"pattern":"evict","max_results":5,"flags":["a","b"],"strict":true,"extra":null,"opts":{"k":1.5,"2":[1]}})"),
        Content("Searching.")}},
      {"lfm2_json_list",
       OutputFormat::kLfm2,
       false,
       "<|tool_call_start|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]<|tool_call_end|>",
       {Call("call_0", "get_weather", kOslo)}},
      {"lfm2_malformed",
       OutputFormat::kLfm2,
       false,
       "<|tool_call_start|>[get_weather(city=Oslo)]<|tool_call_end|>",
       {Call("call_0", "get_weather", "city=Oslo", /*raw=*/true)}},
      {"lfm2_quote_hides_marker",
       OutputFormat::kLfm2,
       false,
       "<|tool_call_start|>[note(text='<|tool_call_end|> is a marker')]<|tool_call_end|>",
       {Call("call_0", "note", R"({"text":"<|tool_call_end|> is a marker"})")}},
      {"lfm25_thinking",
       OutputFormat::kLfm2,
       false,
       "<think>\nreason\n</think>\nanswer",
       {Reasoning("reason"), Content("answer")}},
      {"apriel_reasoning_content_call",
       OutputFormat::kApriel,
       false,
       "The user wants weather.\n[BEGIN FINAL RESPONSE]\nChecking.\n<tool_calls>[{\"name\": \"get_weather\", "
       "\"arguments\": {\"city\": \"Oslo\"}}]</tool_calls>\n<|end|>",
       {Reasoning("The user wants weather."), Content("Checking."), Call("call_0", "get_weather", kOslo)}},
      {"apriel_final_response",
       OutputFormat::kApriel,
       false,
       "Simple.\n[BEGIN FINAL RESPONSE]\nLima.\n[END FINAL RESPONSE]\n<|end|>",
       {Reasoning("Simple."), Content("Lima.")}},
      {"cohere_thinking_action",
       OutputFormat::kCohere,
       false,
       "<|START_THINKING|>Search for evict.<|END_THINKING|><|START_ACTION|>[\n    {\"tool_call_id\": \"0\", "
       "\"tool_name\": \"search_files\", \"parameters\": {\"pattern\": \"evict\", \"max_results\": "
       "5}}\n]<|END_ACTION|>",
       {Reasoning("Search for evict."), Call("0", "search_files", kEvict)}},
      {"cohere_response",
       OutputFormat::kCohere,
       false,
       "<|START_THINKING|>Easy.<|END_THINKING|><|START_RESPONSE|>Lima.<|END_RESPONSE|>",
       {Reasoning("Easy."), Content("Lima.")}},
  };
}

std::vector<Sample> NamedCallSamples() {
  return {
      // DeepSeek R1: the prompt ends with "<think>\n".
      {"deepseek_r1_two_calls",
       OutputFormat::kDeepSeek,
       true,
       "Need "
       "weather.\n</think>\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
       "{\"city\": \"Oslo\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
       "{\"city\": \"Lima\", \"unit\": \"celsius\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {Reasoning("Need weather."), Call("call_0", "get_weather", kOslo), Call("call_1", "get_weather", kLima)}},
      {"deepseek_v31_content_call",
       OutputFormat::kDeepSeek,
       false,
       "<think></think>Let me "
       "search.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search_files<｜tool▁sep｜>{\"pattern\": "
       "\"evict\", \"max_results\": 5}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {Content("Let me search."), Call("call_0", "search_files", kEvict)}},
      {"deepseek_malformed",
       OutputFormat::kDeepSeek,
       false,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{city: "
       "Oslo}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       {Call("call_0", "get_weather", "{city: Oslo}", /*raw=*/true)}},
      {"kimi_content_call",
       OutputFormat::kKimiK2,
       false,
       "Let me search.<|tool_calls_section_begin|><|tool_call_begin|>functions.search_files:0"
       "<|tool_call_argument_begin|>{\"pattern\": \"evict\", \"max_results\": 5}<|tool_call_end|>"
       "<|tool_calls_section_end|>",
       {Content("Let me search."), Call("functions.search_files:0", "search_files", kEvict)}},
      {"kimi_two_calls",
       OutputFormat::kKimiK2,
       false,
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
       "{\"city\": \"Oslo\"}<|tool_call_end|><|tool_call_begin|>functions.get_weather:1"
       "<|tool_call_argument_begin|>{\"city\": \"Lima\", \"unit\": \"celsius\"}<|tool_call_end|>"
       "<|tool_calls_section_end|>",
       {Call("functions.get_weather:0", "get_weather", kOslo), Call("functions.get_weather:1", "get_weather", kLima)}},
      {"mistral_devstral_two_calls",
       OutputFormat::kMistral,
       false,
       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Lima\", \"unit\": "
       "\"celsius\"}",
       {Call("call_0", "get_weather", kOslo), Call("call_1", "get_weather", kLima)}},
      {"mistral_small_call_id",
       OutputFormat::kMistral,
       false,
       "Let me check.[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{\"city\": \"Oslo\"}",
       {Content("Let me check."), Call("a1B2c3D4e", "get_weather", kOslo)}},
      {"mistral_nemo_list",
       OutputFormat::kMistral,
       false,
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}, \"id\": \"a1B2c3D4e\"}]",
       {Call("a1B2c3D4e", "get_weather", kOslo)}},
      {"mistral_cut_arguments",
       OutputFormat::kMistral,
       false,
       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Os",
       {Call("call_0", "get_weather", "{\"city\": \"Os", /*raw=*/true)}},
      {"functionary_content_call",
       OutputFormat::kFunctionary,
       false,
       "Let me search.<function=search_files>{\"pattern\": \"evict\", \"max_results\": 5}</function>",
       {Content("Let me search."), Call("call_0", "search_files", kEvict)}},
      {"functionary_two_calls",
       OutputFormat::kFunctionary,
       false,
       "<function=get_weather>{\"city\": \"Oslo\"}</function><function=get_weather>{\"city\": \"Lima\", \"unit\": "
       "\"celsius\"}</function>",
       {Call("call_0", "get_weather", kOslo), Call("call_1", "get_weather", kLima)}},
      {"functionary_python",
       OutputFormat::kFunctionary,
       false,
       "<|python_tag|>print(1)",
       {Call("call_0", "python", R"j({"code":"print(1)"})j")}},
      {"glm46_reasoning_two_calls",
       OutputFormat::kGlm,
       false,
       "<think>Two cities.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
       "</tool_call>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Lima</arg_value>\n"
       "<arg_key>unit</arg_key>\n<arg_value>celsius</arg_value>\n</tool_call>",
       {Reasoning("Two cities."), Call("call_0", "get_weather", kOslo), Call("call_1", "get_weather", kLima)}},
      // GLM 4.7 opens <think> in the prompt.
      {"glm47_reasoning_content_call",
       OutputFormat::kGlm,
       true,
       "Search.</think>Let me search.<tool_call>search_files<arg_key>pattern</arg_key><arg_value>evict</arg_value>"
       "<arg_key>max_results</arg_key><arg_value>5</arg_value></tool_call>",
       {Reasoning("Search."), Content("Let me search."), Call("call_0", "search_files", kEvict)}},
      {"glm_missing_value",
       OutputFormat::kGlm,
       false,
       "<tool_call>f<arg_key>a</arg_key></tool_call>",
       {Call("call_0", "f", "<arg_key>a</arg_key>", /*raw=*/true)}},
  };
}

std::vector<Sample> XmlInvokeAndGemmaSamples() {
  return {
      // MiniMax-M2's prompt ends with "<think>\n".
      {"minimax_reasoning_two_calls",
       OutputFormat::kMiniMax,
       true,
       "Two cities.\n</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Oslo"
       "</parameter>\n</invoke>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Lima</parameter>\n"
       "<parameter name=\"unit\">celsius</parameter>\n</invoke>\n</minimax:tool_call>",
       {Reasoning("Two cities."), Call("call_0", "get_weather", kOslo), Call("call_1", "get_weather", kLima)}},
      {"minimax_unclosed_parameter",
       OutputFormat::kMiniMax,
       false,
       "<minimax:tool_call><invoke name=\"f\"><parameter name=\"a\">1</invoke></minimax:tool_call>",
       {Call("call_0", "f", "<invoke name=\"f\"><parameter name=\"a\">1</invoke>", /*raw=*/true)}},
      {"deepseek_v4_reasoning_content_call",
       OutputFormat::kDeepSeekV4,
       true,
       "Search.</think>Let me search.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"search_files\">\n"
       "<｜DSML｜parameter name=\"pattern\" string=\"true\">evict</｜DSML｜parameter>\n"
       "<｜DSML｜parameter name=\"max_results\" string=\"false\">5</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
       "</｜DSML｜tool_calls>",
       {Reasoning("Search."), Content("Let me search."), Call("call_0", "search_files", kEvict)}},
      {"deepseek_v4_string_attribute",
       OutputFormat::kDeepSeekV4,
       false,
       "<｜DSML｜tool_calls><｜DSML｜invoke name=\"f\"><｜DSML｜parameter name=\"zip\" string=\"true\">0150"
       "</｜DSML｜parameter><｜DSML｜parameter name=\"n\" string=\"false\">[1]</｜DSML｜parameter></｜DSML｜invoke>"
       "</｜DSML｜tool_calls>",
       {Call("call_0", "f", R"({"zip":"0150","n":[1]})")}},
      {"gemma4_thought_two_calls",
       OutputFormat::kGemma4,
       false,
       "<|channel>thought\nNeed weather.<channel|><|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>"
       "<|tool_call>call:get_weather{city:<|\"|>Lima<|\"|>,unit:<|\"|>celsius<|\"|>}<tool_call|>",
       {Reasoning("Need weather."), Call("call_0", "get_weather", kOslo), Call("call_1", "get_weather", kLima)}},
      {"gemma4_values",
       OutputFormat::kGemma4,
       false,
       "<|tool_call>call:plan{steps:[<|\"|>a<|\"|>,<|\"|>b, c: {d}<|\"|>],n:-2.5e1,deep:true,"
       "opts:{<|\"|>k<|\"|>:null,x:None}}<tool_call|>Planned.",
       {Call("call_0", "plan", R"({"steps":["a","b, c: {d}"],"n":-25.0,"deep":true,"opts":{"k":null,"x":null}})"),
        Content("Planned.")}},
      {"gemma4_malformed",
       OutputFormat::kGemma4,
       false,
       "<|tool_call>call:f{a:oops}<tool_call|>",
       {Call("call_0", "f", "{a:oops}", /*raw=*/true)}},
  };
}

std::vector<Sample> AllSamples() {
  std::vector<Sample> all;
  for (auto samples : {ThinkSamples(), QwenXmlSamples(), HermesSamples(), Llama3Samples(), ListFormatSamples(),
                       NamedCallSamples(), XmlInvokeAndGemmaSamples()}) {
    all.insert(all.end(), samples.begin(), samples.end());
  }
  return all;
}

class GrammarSampleTest : public ::testing::TestWithParam<Sample> {};

TEST_P(GrammarSampleTest, ParsesWholeAndSplitAnywhere) { testing::ExpectParses(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Formats, GrammarSampleTest, ::testing::ValuesIn(AllSamples()),
                         [](const ::testing::TestParamInfo<Sample>& info) { return info.param.name; });

TEST(GrammarsTest, EveryFormatHasAGrammar) {
  for (OutputFormat format : AllOutputFormats()) {
    for (bool starts_in_reasoning : {false, true}) {
      const Grammar g = GrammarFor(format, starts_in_reasoning);
      ASSERT_FALSE(g.sections.empty()) << OutputFormatName(format);
      ASSERT_LT(static_cast<size_t>(g.start), g.sections.size());
      for (const Section& s : g.sections) {
        for (const Exit& e : s.exits) {
          EXPECT_LT(static_cast<size_t>(e.next), g.sections.size());
        }
        if (s.sink == Sink::kCapture) {
          EXPECT_TRUE(s.on_end) << OutputFormatName(format);
        }
      }
    }
  }
}

}  // namespace
}  // namespace cairn::chat::output
