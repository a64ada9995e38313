// A conversation as Jinja templates see it, and a template's output as a
// RenderedChat (internal to chat_template.cc).
#ifndef CAIRN_CHAT_CONVERSATION_H_
#define CAIRN_CHAT_CONVERSATION_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/chat_template.h"
#include "chat/jinja/value.h"

namespace cairn::chat_internal {

// The template variables a request brings. Everything in them is client
// text (role, contents, tool schemas and arguments, argument values).
struct ConversationValues {
  // One dict per message, shaped as cases.json shapes them; each one's
  // identity is tracked, so the output marks where its rendering starts.
  jinja::Value messages;
  jinja::Value tools;  // a list, or None
  std::vector<std::pair<std::string, jinja::Value>> arguments;
};

// INVALID_ARGUMENT for tools that are not a JSON array, template arguments
// that are not a JSON object or that name a variable the renderer sets
// (messages, tools, documents, add_generation_prompt), or JSON nested too
// deep.
absl::StatusOr<ConversationValues> ToValues(const ChatRequest& request);

// Where each of `count` messages starts: the first mark of a loop bound to
// it (template.h); a message with none starts where the next one does, the
// last ones at `end`; non-decreasing.
std::vector<size_t> MessageStarts(const jinja::Text& text, size_t count, size_t end);

// The output as parts: client text apart from template text, split at every
// message start and at the generation prompt.
RenderedChat ToRenderedChat(const jinja::Text& text, std::vector<size_t> message_starts,
                            size_t generation_prompt_start);

}  // namespace cairn::chat_internal

#endif  // CAIRN_CHAT_CONVERSATION_H_
