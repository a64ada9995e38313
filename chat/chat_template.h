// Chat templates: a conversation (messages with reasoning, tool calls and
// tool results; the tools offered; template arguments) rendered into the
// text a model was trained on, with where each message starts, and its
// tokenization with special tokens parsed only in the template's own text.
//
// Which template renders (FromMetadata):
//   1. an override source (the service's --chat-template=NAME=FILE), executed by
//      cairn's Jinja interpreter (chat/jinja/template.h);
//   2. the GGUF's tokenizer.chat_template, executed the same way, with the
//      named alternative tokenizer.chat_template.tool_use chosen, as Hugging
//      Face does, when tools are given;
//   3. only when the interpreter cannot parse or run that template: the
//      built-in family its markers show (ChatML, Llama 3, Gemma; see
//      builtin_templates.h), with fallback_reason() saying why;
//   4. a model without a template: plain (the contents joined by "\n").
//
// The template sees what transformers' apply_chat_template passes: messages
// (dicts as cases.json shapes them: role, tool_call_id, name, content (None
// when absent), reasoning_content, tool_calls [{id, type: "function",
// function: {name, arguments}}] with arguments parsed from their JSON, or
// the text when it is not JSON), tools (or None), documents (None),
// add_generation_prompt, bos_token and eos_token (the vocabulary's texts),
// the template arguments, raise_exception and strftime_now.
#ifndef CAIRN_CHAT_CHAT_TEMPLATE_H_
#define CAIRN_CHAT_CHAT_TEMPLATE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"
#include "backends/model/metadata.h"
#include "backends/model/tokenizer.h"
#include "chat/jinja/template.h"

namespace cairn {

struct ChatToolCall {
  std::string id;
  std::string name;
  // The arguments as the client sent them: JSON text (an object, usually).
  std::string arguments;
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role, std::optional<std::string> content)
      : role(std::move(role)), content(std::move(content)) {}

  std::string role;                    // system, user, assistant, tool (templates may know others)
  std::optional<std::string> content;  // absent: None (an assistant turn of tool calls)
  std::optional<std::string> reasoning_content;
  std::vector<ChatToolCall> tool_calls;
  std::optional<std::string> tool_call_id;  // a tool result: the call it answers
  std::optional<std::string> name;          // a tool result: the tool's name
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  // JSON array of OpenAI-style function schemas; empty: no tools (None).
  std::string tools;
  // JSON object of extra template variables ({"enable_thinking": false});
  // empty: none.
  std::string template_arguments;
  bool add_generation_prompt = true;
};

// A rendered conversation as consecutive parts: the template's own text
// (special tokens parsed) and client text (never parsed, so a client cannot
// inject control tokens). Parts break at every message start and at the
// generation prompt.
struct RenderedChat {
  struct Part {
    std::string text;
    bool scaffold = false;  // template text: special tokens are parsed
    int message = -1;       // index of the message it renders; -1: generation prompt
  };
  std::vector<Part> parts;
  // Byte offset in Text() where each message's rendering starts;
  // non-decreasing. A template's loop over the messages places them (see
  // MessageStarts in conversation.h); a message the loop does not render
  // (a system prompt written before it) starts where the next one does.
  std::vector<size_t> message_starts;
  // Byte offset of the generation prompt (Text().size() when there is none).
  size_t generation_prompt_start = 0;

  std::string Text() const;
};

struct TokenizedChat {
  std::vector<TokenId> tokens;
  // Index in `tokens` of the token holding each message's first byte.
  std::vector<size_t> message_starts;
  // Index of the generation prompt's first token (tokens.size() when none).
  size_t generation_prompt_start = 0;
};

enum class ChatTemplateKind { kPlain, kChatML, kLlama3, kGemma, kJinja };

struct ChatTemplateOptions {
  // Source that replaces the model's template (--chat-template=FILE's
  // content), and what names it ("file:PATH").
  std::optional<std::string> override_source;
  std::string override_name = "override";
  // strftime_now's clock (local civil time); unset: the machine's.
  std::function<absl::CivilSecond()> now;
  jinja::Limits limits;
};

// The vocabulary's texts templates see as bos_token and eos_token.
struct ChatSpecialTokens {
  std::string bos;
  std::string eos;
};

// Immutable; copies share the parsed template; thread-safe.
class ChatTemplate final {
 public:
  // The template of a model (the order above). INVALID_ARGUMENT when
  // tokenizer.chat_template is not a string, or the override does not parse
  // (TemplateSyntaxError with its line); UNIMPLEMENTED when the model's
  // template neither runs nor shows a built-in family (the status says why).
  static absl::StatusOr<ChatTemplate> FromMetadata(const Metadata& metadata,
                                                   const ChatTemplateOptions& options = ChatTemplateOptions());
  // A built-in: "chatml", "llama3", "gemma" or "plain"; NOT_FOUND otherwise.
  static absl::StatusOr<ChatTemplate> FromName(std::string_view name);
  // A Jinja template (`name` says where it came from, e.g. "file:x.jinja");
  // `tool_use_source`, when given, renders requests that offer tools.
  // INVALID_ARGUMENT / UNIMPLEMENTED / RESOURCE_EXHAUSTED as Template::Create.
  static absl::StatusOr<ChatTemplate> FromSource(std::string_view source, std::string name,
                                                 const ChatSpecialTokens& tokens,
                                                 const ChatTemplateOptions& options = ChatTemplateOptions(),
                                                 std::optional<std::string_view> tool_use_source = std::nullopt);

  ChatTemplateKind kind() const { return kind_; }
  // What renders: "gguf:tokenizer.chat_template", "file:...", or a
  // built-in's name ("chatml", "plain").
  std::string_view name() const;
  // name() and, for a fallback, why: "builtin:chatml (fallback: ...)".
  std::string description() const;
  // Why the model's own template is not the one in use (OK when it is).
  const absl::Status& fallback_reason() const;
  // The Jinja source that renders a request with tools (`with_tools`) or
  // without: the tool_use variant or the main template; "" for a built-in
  // family (what chat/output's DetectOutputFormat reads).
  std::string_view source(bool with_tools) const;

  // Renders the conversation. INVALID_ARGUMENT when the template refuses it
  // (raise_exception or an error Jinja2's sandbox raises: the template's
  // message), for malformed tools / template arguments, or a role a built-in
  // family does not know; RESOURCE_EXHAUSTED past the render limits;
  // UNIMPLEMENTED for what the interpreter does not support.
  absl::StatusOr<RenderedChat> Render(const ChatRequest& request) const;
  absl::StatusOr<RenderedChat> Render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

 private:
  struct JinjaState;
  ChatTemplate(ChatTemplateKind kind, std::shared_ptr<const JinjaState> jinja);

  ChatTemplateKind kind_;
  std::shared_ptr<const JinjaState> jinja_;  // kJinja, and the reason of a fallback
};

// Tokenizes a rendered conversation: special tokens matched in scaffolding
// only; BOS as the vocabulary asks unless the template wrote it already;
// the token index where each message starts (for checkpoint placement).
TokenizedChat TokenizeChat(const Tokenizer& tokenizer, const RenderedChat& chat);

}  // namespace cairn

#endif  // CAIRN_CHAT_CHAT_TEMPLATE_H_
