// The built-in chat template families (internal to chat_template.cc): what
// cairn renders without the interpreter, as llama.cpp's built-in templates
// do, when a model has no template (plain) or its template cannot run.
//   ChatML (Qwen ...):  <|im_start|>{role}\n{content}<|im_end|>\n ...
//                       generation prompt <|im_start|>assistant\n
//   Llama 3:            <|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>
//                       generation prompt <|start_header_id|>assistant<|end_header_id|>\n\n
//                       (BOS comes from the tokenizer's add_bos)
//   Gemma:              <start_of_turn>{user|model}\n{content, trimmed}<end_of_turn>\n
//                       system messages are prepended (+ "\n\n") to the next user turn;
//                       generation prompt <start_of_turn>model\n
//   Plain: the contents joined by "\n", no roles, no generation prompt: the
//   model simply continues the text.
// They render role and content only (no tools, reasoning or tool calls).
#ifndef CAIRN_CHAT_BUILTIN_TEMPLATES_H_
#define CAIRN_CHAT_BUILTIN_TEMPLATES_H_

#include <optional>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "chat/chat_template.h"

namespace cairn::chat_internal {

// The family whose markers `source` uses, if any.
std::optional<ChatTemplateKind> FamilyOfSource(std::string_view source);
// "chatml", "llama3", "gemma", "plain".
std::string_view FamilyName(ChatTemplateKind kind);
std::optional<ChatTemplateKind> FamilyNamed(std::string_view name);

// INVALID_ARGUMENT for an empty role or one the family does not know.
absl::StatusOr<RenderedChat> RenderFamily(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                          bool add_generation_prompt);

}  // namespace cairn::chat_internal

#endif  // CAIRN_CHAT_BUILTIN_TEMPLATES_H_
