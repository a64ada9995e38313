// Prompt building: a Generate request's prompt (its parts: text, token ids,
// embedding chunks and message boundaries; or its chat messages, rendered
// with the model's chat template) as history items of one model, with the
// checks client input needs. Special tokens are parsed in the template's
// own text only, never in text parts or message contents, so a client
// cannot inject control tokens.
#ifndef CAIRN_SERVICE_API_PROMPT_BUILDER_H_
#define CAIRN_SERVICE_API_PROMPT_BUILDER_H_

#include <string>

#include "absl/status/statusor.h"
#include "cairn/v1/inference.pb.h"
#include "chat/chat_template.h"
#include "service/api/limits.h"
#include "service/host/models.h"
#include "service/scheduling/history.h"

namespace cairn::service {

// A request's conversation as the chat template takes it (messages, tools,
// template arguments). INVALID_ARGUMENT for more than limits.max_prompt_parts
// messages, more than limits.max_text_bytes of text in all (contents,
// reasoning, arguments, tools, template arguments), or a tool call whose
// arguments are not JSON (naming the message and the call). Tools and
// template arguments are checked when rendered (ChatTemplate::Render).
absl::StatusOr<ChatRequest> ToChatRequest(const ServiceLimits& limits,
                                          const google::protobuf::RepeatedPtrField<v1::ChatMessage>& messages,
                                          const std::string& tools, const std::string& template_args,
                                          bool add_generation_prompt);

// What rendering messages gave besides the tokens: the reply's parsing
// follows the template that rendered them (reply_parser.h).
struct PromptRendering {
  bool rendered = false;    // the prompt came from messages
  std::string text;         // the rendered conversation
  bool with_tools = false;  // tools were given (a tool_use variant renders)
};

// The request's new prompt items. `at_start`: they begin a conversation (a
// text part first gets the model's BOS when it wants one; rendered messages
// keep theirs), otherwise they are appended to one. Messages end at message
// boundaries: where each message after the first starts and where the
// generation prompt starts.
//
// INVALID_ARGUMENT for parts and messages together, more than
// limits.max_prompt_parts of either, more than limits.max_text_bytes of text
// in a part or in the messages, an empty part, a token id out of the
// model's vocabulary, or an embedding chunk the model does not take
// (history_proto.h), text or messages on a model without a tokenizer (or
// chat template); ToChatRequest's errors; the
// template's rendering errors (INVALID_ARGUMENT with its message when it
// refuses the conversation). `rendering`, when given, receives what the
// messages rendered to. Thread-safe (reads the model only).
absl::StatusOr<History> BuildPrompt(const ServedModel& model, const ServiceLimits& limits,
                                    const v1::GenerateRequest& req, bool at_start,
                                    PromptRendering* rendering = nullptr);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_PROMPT_BUILDER_H_
