// The output formats of chat models: how a model writes reasoning and tool
// calls in its generated text, each with a stable name (for a server flag
// that forces one). What each format parses is documented in
// chat/output/output_parser.h; picking one from a chat template is
// chat/output/format_detection.h.
#ifndef CAIRN_CHAT_OUTPUT_OUTPUT_FORMAT_H_
#define CAIRN_CHAT_OUTPUT_OUTPUT_FORMAT_H_

#include <optional>
#include <string_view>
#include <vector>

namespace cairn::chat::output {

enum class OutputFormat {
  kNone,         // "none": everything is content, passed through untouched
  kThink,        // "think": <think> reasoning, then content; no tool calls
  kHermes,       // "hermes": Qwen2.5 / Qwen3 / QwQ / Hermes / granite 4.0
  kQwenXml,      // "qwen-xml": Qwen3.5 / Qwen3-Coder / Nemotron 3 Nano
  kLlama3,       // "llama3": Llama 3.x JSON calls and <|python_tag|>
  kHarmony,      // "harmony": gpt-oss channels
  kNemotron,     // "nemotron": Nemotron Nano v2 <TOOLCALL>[...]</TOOLCALL>
  kGranite,      // "granite": granite 3.x <|tool_call|>[...]
  kLfm2,         // "lfm2": LFM2 <|tool_call_start|>[name(arg=value)]<|tool_call_end|>
  kDeepSeek,     // "deepseek": DeepSeek R1 and V3.1 <｜tool▁calls▁begin｜>
  kKimiK2,       // "kimi-k2": Kimi K2 <|tool_calls_section_begin|>
  kMistral,      // "mistral": Mistral / Devstral [TOOL_CALLS]
  kFunctionary,  // "functionary": functionary v3.1 <function=NAME>{...}</function>
  kGlm,          // "glm": GLM 4.5-4.7 <tool_call>NAME<arg_key>..</arg_key><arg_value>..</arg_value>
  kApriel,       // "apriel": Apriel reasoning steps, [BEGIN FINAL RESPONSE], <tool_calls>[...]
  kCohere,       // "cohere": Command R7B / A <|START_THINKING|>, <|START_ACTION|>[...]
  kMiniMax,      // "minimax-m2": MiniMax-M2 <minimax:tool_call><invoke name=...>
  kDeepSeekV4,   // "deepseek-v4": DeepSeek V4 <｜DSML｜tool_calls><｜DSML｜invoke name=...>
  kGemma4,       // "gemma4": Gemma 4 <|channel>thought, <|tool_call>call:N{...}<tool_call|>
};

// Every format, in declaration order.
const std::vector<OutputFormat>& AllOutputFormats();

// The format's name ("qwen-xml", ...).
std::string_view OutputFormatName(OutputFormat format);

// The format named `name` (exactly as OutputFormatName spells it); nullopt
// for an unknown name.
std::optional<OutputFormat> OutputFormatFromName(std::string_view name);

}  // namespace cairn::chat::output

#endif  // CAIRN_CHAT_OUTPUT_OUTPUT_FORMAT_H_
