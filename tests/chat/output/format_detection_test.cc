// Format detection on every template of ../shared/chat_templates, and the
// reasoning check on the generation prompts those templates render.
#include "chat/output/format_detection.h"

#include <filesystem>
#include <iostream>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "tests/chat/output/shared_templates.h"
#include "tests/testing/shared_data.h"

namespace cairn::chat::output {
namespace {

// What each template's model writes. Templates whose models' tool-call
// syntax is not parsed (GigaChat's function call role, Command R+'s
// "Action:", firefunction's "functools", Gemma 2 and Phi 3.5 without
// tools) get the reasoning or plain format their text needs.
const std::map<std::string, OutputFormat>& ExpectedFormats() {
  static const auto* const expected = new std::map<std::string, OutputFormat>{
      {"Apriel-1.6-15b-Thinker-fixed", OutputFormat::kApriel},
      {"Cohere2MoE", OutputFormat::kCohere},
      {"CohereForAI-c4ai-command-r-plus-tool_use", OutputFormat::kNone},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", OutputFormat::kCohere},
      {"GLM-4.6", OutputFormat::kGlm},
      {"GLM-4.7-Flash", OutputFormat::kGlm},
      {"GigaChat3-10B-A1.8B", OutputFormat::kNone},
      {"HuggingFaceTB-SmolLM3-3B", OutputFormat::kThink},
      {"Kimi-K2-Instruct", OutputFormat::kKimiK2},
      {"LFM2-8B-A1B", OutputFormat::kLfm2},
      {"LFM2.5-Instruct", OutputFormat::kLfm2},
      {"MiniMax-M2", OutputFormat::kMiniMax},
      {"Mistral-Small-3.2-24B-Instruct-2506", OutputFormat::kMistral},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", OutputFormat::kQwenXml},
      {"NVIDIA-Nemotron-Nano-v2", OutputFormat::kNemotron},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", OutputFormat::kHermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", OutputFormat::kHermes},
      {"Qwen-QwQ-32B", OutputFormat::kHermes},
      {"Qwen-Qwen2.5-7B-Instruct", OutputFormat::kHermes},
      {"Qwen-Qwen3-0.6B", OutputFormat::kHermes},
      {"Qwen3-Coder", OutputFormat::kQwenXml},
      {"Qwen3.5-4B", OutputFormat::kQwenXml},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", OutputFormat::kDeepSeek},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", OutputFormat::kDeepSeek},
      {"deepseek-ai-DeepSeek-V3.1", OutputFormat::kDeepSeek},
      {"deepseek-ai-DeepSeek-V4", OutputFormat::kDeepSeekV4},
      {"fireworks-ai-llama-3-firefunction-v2", OutputFormat::kNone},
      {"google-gemma-2-2b-it", OutputFormat::kNone},
      {"google-gemma-4-31B-it", OutputFormat::kGemma4},
      {"ibm-granite-granite-3.3-2B-Instruct", OutputFormat::kGranite},
      {"ibm-granite-granite-4.0", OutputFormat::kHermes},
      {"llama-cpp-deepseek-r1", OutputFormat::kDeepSeek},
      {"llama-cpp-rwkv-world", OutputFormat::kThink},
      {"meetkai-functionary-medium-v3.1", OutputFormat::kFunctionary},
      {"meta-llama-Llama-3.1-8B-Instruct", OutputFormat::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct", OutputFormat::kLlama3},
      {"meta-llama-Llama-3.3-70B-Instruct", OutputFormat::kLlama3},
      {"microsoft-Phi-3.5-mini-instruct", OutputFormat::kNone},
      {"mistralai-Mistral-Nemo-Instruct-2407", OutputFormat::kMistral},
      {"moonshotai-Kimi-K2", OutputFormat::kKimiK2},
      {"openai-gpt-oss-120b", OutputFormat::kHarmony},
      {"poolside-Laguna-S-2.1", OutputFormat::kGlm},
      {"poolside-Laguna-XS-2.1", OutputFormat::kGlm},
      {"unsloth-Apriel-1.5", OutputFormat::kApriel},
      {"unsloth-mistral-Devstral-Small-2507", OutputFormat::kMistral},
  };
  return *expected;
}

TEST(FormatDetectionTest, EveryTemplateOfTheSharedFolder) {
  CAIRN_REQUIRE_SHARED("chat_templates/templates");
  const std::filesystem::path dir = ::cairn::testing::SharedPath("chat_templates/templates");
  std::map<std::string, OutputFormat> detected;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    detected[entry.path().stem().string()] = DetectOutputFormat(testing::ReadFile(entry.path().string()));
  }
  std::cout << "template -> detected output format\n";
  for (const auto& [name, format] : detected) std::cout << "  " << name << " -> " << OutputFormatName(format) << "\n";
  ASSERT_EQ(detected.size(), ExpectedFormats().size()) << "a template was added or removed: update the table";
  for (const auto& [name, format] : ExpectedFormats()) {
    ASSERT_TRUE(detected.count(name)) << name;
    EXPECT_EQ(OutputFormatName(detected[name]), OutputFormatName(format)) << name;
  }
}

TEST(FormatDetectionTest, TextWithoutMarkersIsPlain) {
  EXPECT_EQ(DetectOutputFormat(""), OutputFormat::kNone);
  EXPECT_EQ(DetectOutputFormat("{{ messages[0].content }}"), OutputFormat::kNone);
  EXPECT_EQ(DetectOutputFormat("{{ '<think>' }}"), OutputFormat::kThink);
}

// The generation prompt each template renders for a case, and whether the
// reply then starts in reasoning.
TEST(FormatDetectionTest, PromptOpensReasoningOnRenderedPrompts) {
  CAIRN_REQUIRE_SHARED("chat_templates/expected");
  struct Row {
    const char* template_name;
    const char* case_name;
    bool opens;
  };
  const Row rows[] = {
      {"Qwen3.5-4B", "reasoning_history", true},
      {"Qwen3.5-4B", "thinking_off", false},
      {"Qwen-Qwen3-0.6B", "thinking_off", false},
      {"Qwen-Qwen3-0.6B", "reasoning_history", false},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "reasoning_history", true},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "thinking_off", false},
      {"NVIDIA-Nemotron-Nano-v2", "tools_offered", true},
      {"GLM-4.7-Flash", "reasoning_history", true},
      {"GLM-4.7-Flash", "thinking_off", false},
      {"GLM-4.6", "thinking_off", false},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "reasoning_history", true},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "reasoning_history", false},
      {"deepseek-ai-DeepSeek-V3.1", "reasoning_history", false},
      {"MiniMax-M2", "single_user", true},
      {"Cohere2MoE", "thinking_off", true},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", "thinking_off", false},
      {"openai-gpt-oss-120b", "reasoning_history", false},
      {"Apriel-1.6-15b-Thinker-fixed", "thinking_off", true},
      {"poolside-Laguna-S-2.1", "thinking_off", false},
      {"meta-llama-Llama-3.1-8B-Instruct", "single_user", false},
      {"google-gemma-2-2b-it", "single_user", false},
      {"google-gemma-4-31B-it", "thinking_off", false},
      {"deepseek-ai-DeepSeek-V4", "thinking_off", false},
  };
  for (const Row& row : rows) {
    const std::string prompt = testing::Rendering(row.template_name, row.case_name);
    ASSERT_FALSE(prompt.empty()) << row.template_name << " " << row.case_name;
    EXPECT_EQ(PromptOpensReasoning(DetectOutputFormat(testing::TemplateSource(row.template_name)), prompt), row.opens)
        << row.template_name << " " << row.case_name;
  }
}

TEST(FormatDetectionTest, PromptOpensReasoningByFormat) {
  EXPECT_TRUE(PromptOpensReasoning(OutputFormat::kHermes, "<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(PromptOpensReasoning(OutputFormat::kHermes, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(PromptOpensReasoning(OutputFormat::kNone, "<think>\n"));
  EXPECT_TRUE(PromptOpensReasoning(OutputFormat::kHarmony, "<|start|>assistant<|channel|>analysis<|message|>"));
  EXPECT_FALSE(PromptOpensReasoning(OutputFormat::kHarmony, "<|start|>assistant"));
  EXPECT_FALSE(PromptOpensReasoning(OutputFormat::kThink, ""));
  EXPECT_TRUE(PromptOpensReasoning(OutputFormat::kGemma4, "<|turn>model\n<|channel>thought\n"));
  EXPECT_FALSE(PromptOpensReasoning(OutputFormat::kGemma4, "<|turn>model\n<|channel>thought\n<channel|>"));
}

}  // namespace
}  // namespace cairn::chat::output
