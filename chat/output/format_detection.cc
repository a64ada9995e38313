#include "chat/output/format_detection.h"

#include <string_view>

namespace cairn::chat::output {
namespace {

bool Has(std::string_view text, std::string_view marker) { return text.find(marker) != std::string_view::npos; }

}  // namespace

OutputFormat DetectOutputFormat(std::string_view t) {
  // The most specific markers first: several families share <tool_call>
  // and <function=, and most write <think>.
  if (Has(t, "<|channel|>") && Has(t, "<|message|>")) return OutputFormat::kHarmony;
  if (Has(t, "<|tool_calls_section_begin|>")) return OutputFormat::kKimiK2;
  if (Has(t, "｜DSML｜")) return OutputFormat::kDeepSeekV4;  // a variable the template joins to "<"
  if (Has(t, "<minimax:tool_call>")) return OutputFormat::kMiniMax;
  if (Has(t, "<|tool_call>") && Has(t, "<|channel>")) return OutputFormat::kGemma4;
  if (Has(t, "<｜tool▁calls▁begin｜>")) return OutputFormat::kDeepSeek;
  if (Has(t, "<TOOLCALL>")) return OutputFormat::kNemotron;
  if (Has(t, "<function=") && Has(t, "<parameter=")) return OutputFormat::kQwenXml;
  if (Has(t, "<arg_key>")) return OutputFormat::kGlm;
  if (Has(t, "<function=")) return OutputFormat::kFunctionary;
  if (Has(t, "[TOOL_CALLS]")) return OutputFormat::kMistral;
  // LFM2 lists tools between <|tool_list_start|> markers; LFM2.5 writes
  // the same "List of tools: " without them.
  if (Has(t, "<|tool_call_start|>") || Has(t, "<|tool_list_start|>") || Has(t, "List of tools: ")) {
    return OutputFormat::kLfm2;
  }
  if (Has(t, "<|tool_call|>")) return OutputFormat::kGranite;
  if (Has(t, "<tool_calls>") || Has(t, "[BEGIN FINAL RESPONSE]")) return OutputFormat::kApriel;
  if (Has(t, "<|START_ACTION|>")) return OutputFormat::kCohere;
  if (Has(t, "<tool_call>")) return OutputFormat::kHermes;
  if (Has(t, "<|python_tag|>") || (Has(t, "<|start_header_id|>") && Has(t, "\"parameters\""))) {
    return OutputFormat::kLlama3;
  }
  if (Has(t, "<think>") || Has(t, "</think>")) return OutputFormat::kThink;
  return OutputFormat::kNone;
}

bool PromptOpensReasoning(OutputFormat format, std::string_view prompt) {
  const size_t last = prompt.find_last_not_of(" \t\n\r");
  const std::string_view trimmed = last == std::string_view::npos ? std::string_view() : prompt.substr(0, last + 1);
  switch (format) {
    case OutputFormat::kNone:
      return false;
    case OutputFormat::kHarmony:
      return trimmed.ends_with("<|channel|>analysis<|message|>");
    case OutputFormat::kCohere:
      return trimmed.ends_with("<|START_THINKING|>");
    case OutputFormat::kGemma4:
      return trimmed.ends_with("<|channel>thought");
    case OutputFormat::kApriel:
      return true;
    default:
      return trimmed.ends_with("<think>");
  }
}

}  // namespace cairn::chat::output
