// Choosing a model's output format from its chat template, and whether the
// generation prompt left the model inside reasoning.
#ifndef CAIRN_CHAT_OUTPUT_FORMAT_DETECTION_H_
#define CAIRN_CHAT_OUTPUT_FORMAT_DETECTION_H_

#include <string_view>

#include "chat/output/output_format.h"

namespace cairn::chat::output {

// The output format a chat template's source text implies, from the markers
// it writes for tool calls and reasoning (a template renders the model's
// earlier replies the way the model writes them); kNone when nothing
// matches. Pure; any text is accepted.
OutputFormat DetectOutputFormat(std::string_view template_source);

// Whether `prompt` (the rendered conversation with its generation prompt)
// ends inside an opened reasoning block, so the reply starts in reasoning:
// it ends with "<think>" (trailing whitespace aside) for the <think>
// formats, "<|START_THINKING|>" for kCohere, "<|channel>thought" for
// kGemma4, an analysis header
// "<|channel|>analysis<|message|>" for kHarmony. Always false for kNone;
// kApriel's replies always start in reasoning whatever this says.
bool PromptOpensReasoning(OutputFormat format, std::string_view prompt);

}  // namespace cairn::chat::output

#endif  // CAIRN_CHAT_OUTPUT_FORMAT_DETECTION_H_
