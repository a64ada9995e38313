// The assistant turns with tool calls that the real templates render
// (../shared/chat_templates/expected, cases tool_roundtrip and agent_loop)
// are replies in their model's own syntax: parsed with the format detected
// from the template, each gives back the conversation's tool calls (names
// and arguments, as in cases.json), its content and its reasoning where
// the template rendered them. Each reply is also checked split at every
// byte (parse_testing.h).
#include <cctype>
#include <iostream>
#include <string>
#include <vector>

#include "chat/output/format_detection.h"
#include "chat/output/tool_call_syntax.h"
#include "gtest/gtest.h"
#include "tests/chat/output/parse_testing.h"
#include "tests/chat/output/shared_templates.h"
#include "tests/testing/shared_data.h"

namespace cairn::chat::output {
namespace {

// Where a template's assistant turn starts (after the user message before
// it) and ends.
struct Turn {
  const char* template_name;
  const char* case_name;
  const char* header;
  const char* end;
  // The template's history shows the prompt opened reasoning: the turn
  // starts with the closing marker.
  bool starts_in_reasoning = false;
  // gpt-oss's template renders one call per message.
  size_t max_calls = 100;
};

constexpr char kChatml[] = "<|im_start|>assistant\n";
constexpr char kLlama[] = "<|start_header_id|>assistant<|end_header_id|>\n\n";
constexpr char kDeepSeek[] = "<｜Assistant｜>";
constexpr char kCohere[] = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>";

// A template's turns in the cases that have them: tool_roundtrip (two
// calls, no content) and agent_loop (content, reasoning, one call).
struct Template {
  const char* name;
  const char* header;
  const char* end;
  std::vector<const char*> cases = {"tool_roundtrip", "agent_loop"};
  bool starts_in_reasoning = false;
  size_t max_calls = 100;
};

const std::vector<Turn>& Turns() {
  static const auto* const turns = [] {
    const char* const kRoundtrip = "tool_roundtrip";
    const Template templates[] = {
        {"Qwen3.5-4B", kChatml, "<|im_end|>"},
        {"Qwen3-Coder", kChatml, "<|im_end|>"},
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", kChatml, "<|im_end|>"},
        {"Qwen-Qwen2.5-7B-Instruct", kChatml, "<|im_end|>"},
        {"Qwen-Qwen3-0.6B", kChatml, "<|im_end|>"},
        {"Qwen-QwQ-32B", kChatml, "<|im_end|>"},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", kChatml, "<|im_end|>"},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", kChatml, "<|im_end|>"},
        {"ibm-granite-granite-4.0", "<|start_of_role|>assistant<|end_of_role|>", "<|end_of_text|>"},
        {"NVIDIA-Nemotron-Nano-v2", "<SPECIAL_11>Assistant\n", "<SPECIAL_12>"},
        {"openai-gpt-oss-120b", "<|start|>assistant", "<|start|>functions.", {kRoundtrip, "agent_loop"}, false, 1},
        // Llama 3 refuses two calls in one message.
        {"meta-llama-Llama-3.1-8B-Instruct", kLlama, "<|eot_id|>", {"agent_loop"}},
        {"meta-llama-Llama-3.2-3B-Instruct", kLlama, "<|eot_id|>", {"agent_loop"}},
        {"meta-llama-Llama-3.3-70B-Instruct", kLlama, "<|eot_id|>", {"agent_loop"}},
        {"meetkai-functionary-medium-v3.1", kLlama, "<|eom_id|>"},
        {"moonshotai-Kimi-K2", "<|im_assistant|>assistant<|im_middle|>", "<|im_end|>"},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", kDeepSeek, "<｜end▁of▁sentence｜>"},
        {"deepseek-ai-DeepSeek-V3.1", kDeepSeek, "<｜end▁of▁sentence｜>"},
        {"unsloth-mistral-Devstral-Small-2507", "[/INST]", "<|eos|>"},
        {"GLM-4.6", "<|assistant|>", "<|observation|>"},
        {"GLM-4.7-Flash", "<|assistant|>", "<|observation|>", {kRoundtrip, "agent_loop"}, true},
        {"poolside-Laguna-S-2.1", "<assistant>", "</assistant>", {kRoundtrip, "agent_loop"}, true},
        {"poolside-Laguna-XS-2.1", "<assistant>", "</assistant>", {kRoundtrip}, true},
        {"poolside-Laguna-XS-2.1", "<assistant>", "</assistant>", {"agent_loop"}},
        // Apriel's history drops the reasoning and its closing marker, which
        // the model writes before content: only a turn without content is
        // the model's reply as written.
        {"Apriel-1.6-15b-Thinker-fixed", "<|begin_assistant|>\n", "<|end|>", {kRoundtrip}},
        {"unsloth-Apriel-1.5", "<|assistant|>\n", "<|end|>", {kRoundtrip}},
        {"Cohere2MoE", kCohere, "<|END_OF_TURN_TOKEN|>"},
        {"MiniMax-M2", "]~b]ai\n", "[e~["},
        {"deepseek-ai-DeepSeek-V4", kDeepSeek, "<｜end▁of▁sentence｜>", {kRoundtrip, "agent_loop"}, true},
        // Gemma 4 renders a call's content after the tool's response.
        {"google-gemma-4-31B-it", "<|turn>model\n", "<|tool_response>"},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", kCohere, "<|END_OF_TURN_TOKEN|>"},
    };
    auto* all = new std::vector<Turn>();
    for (const Template& t : templates) {
      for (const char* c : t.cases) all->push_back({t.name, c, t.header, t.end, t.starts_in_reasoning, t.max_calls});
    }
    return all;
  }();
  return *turns;
}

class TemplateReplyTest : public ::testing::TestWithParam<Turn> {};

TEST_P(TemplateReplyTest, ParsesIntoTheConversationsToolCalls) {
  CAIRN_REQUIRE_SHARED("chat_templates");
  const Turn& turn = GetParam();
  const Json cases = Json::parse(testing::ReadFile(::cairn::testing::SharedPath("chat_templates/cases.json")));
  Json conversation;
  for (const Json& c : cases.at("cases")) {
    if (c.at("case") == turn.case_name) conversation = c;
  }
  const std::string rendered = testing::Rendering(turn.template_name, turn.case_name);
  ASSERT_FALSE(rendered.empty()) << "no rendering of " << turn.case_name;
  const OutputFormat format = DetectOutputFormat(testing::TemplateSource(turn.template_name));

  // The first assistant message with tool calls, and the user's before it.
  const Json& messages = conversation.at("messages");
  size_t at = 0;
  while (!messages[at].contains("tool_calls")) ++at;
  const Json& assistant = messages[at];
  const size_t user_at = rendered.find(messages[at - 1].at("content").get<std::string>());
  const size_t begin = rendered.find(turn.header, user_at);
  ASSERT_NE(begin, std::string::npos) << "no assistant header";
  const size_t reply_begin = begin + std::string_view(turn.header).size();
  const std::string reply = rendered.substr(reply_begin, rendered.find(turn.end, reply_begin) - reply_begin);

  // What the reply must parse into.
  const std::string content = assistant.at("content").get<std::string>();
  const std::string reasoning = assistant.value("reasoning_content", "");
  std::vector<OutputEvent> expected;
  if (!reasoning.empty() && reply.find(reasoning) != std::string::npos)
    expected.push_back(testing::Reasoning(reasoning));
  if (!content.empty() && reply.find(content) != std::string::npos) expected.push_back(testing::Content(content));
  const std::vector<OutputEvent> parsed = testing::Parse(format, reply, turn.starts_in_reasoning);
  size_t n = 0;
  for (const Json& call : assistant.at("tool_calls")) {
    if (n == turn.max_calls) break;
    const std::string name = call.at("function").at("name").get<std::string>();
    // Ids: the format's own where it writes one (Kimi's functions.NAME:IDX,
    // Apriel's copy of the conversation's, Cohere's index), else the
    // counter's. Checked below, then taken as parsed.
    const OutputEvent* got = expected.size() < parsed.size() ? &parsed[expected.size()] : nullptr;
    const std::string id = got != nullptr ? got->tool_call.id : "";
    if (format == OutputFormat::kKimiK2) {
      EXPECT_EQ(id, "functions." + name + ":" + std::to_string(n));
    } else if (format == OutputFormat::kApriel) {
      EXPECT_EQ(id, call.at("id").get<std::string>());
    } else if (format == OutputFormat::kCohere) {
      EXPECT_EQ(id, std::to_string(n));
    }
    // Arguments compare as JSON values: Gemma 4's template sorts the keys.
    std::string arguments = DumpJson(call.at("function").at("arguments"));
    if (got != nullptr && nlohmann::json::parse(arguments) ==
                              nlohmann::json::parse(got->tool_call.arguments, nullptr, /*allow_exceptions=*/false)) {
      arguments = got->tool_call.arguments;
    }
    expected.push_back(testing::Call(id, name, arguments));
    ++n;
  }
  std::cout << "  " << turn.template_name << " / " << turn.case_name << " (" << OutputFormatName(format) << "): " << n
            << " call(s)\n";
  EXPECT_EQ(parsed, expected) << "reply: " << ::testing::PrintToString(reply);
  for (const OutputEvent& e : parsed) {
    if (e.kind == OutputEvent::Kind::kToolCall) {
      EXPECT_FALSE(e.tool_call.id.empty());
    }
  }
  Sample sample{"reply", format, turn.starts_in_reasoning, reply, expected};
  testing::ExpectParses(sample);
}

INSTANTIATE_TEST_SUITE_P(SharedTemplates, TemplateReplyTest, ::testing::ValuesIn(Turns()),
                         [](const ::testing::TestParamInfo<Turn>& info) {
                           std::string name = std::string(info.param.template_name) + "_" + info.param.case_name;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace cairn::chat::output
