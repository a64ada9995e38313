// Chat templates: a conversation (role, content messages) rendered into the
// text a model was trained on, with where each message starts, and its
// tokenization with special tokens parsed only in the template's own text.
//
// Built-in families, chosen from the GGUF's tokenizer.chat_template by the
// markers it uses (the Jinja source itself is not executed), rendering as
// llama.cpp's built-in templates do:
//   ChatML (Qwen ...):  <|im_start|>{role}\n{content}<|im_end|>\n ...
//                       generation prompt <|im_start|>assistant\n
//   Llama 3:            <|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>
//                       generation prompt <|start_header_id|>assistant<|end_header_id|>\n\n
//                       (BOS comes from the tokenizer's add_bos)
//   Gemma:              <start_of_turn>{user|model}\n{content, trimmed}<end_of_turn>\n
//                       system messages are prepended (+ "\n\n") to the next user turn;
//                       generation prompt <start_of_turn>model\n
//   Plain (fallback for a model without tokenizer.chat_template, e.g.
//   stories260K): the contents joined by "\n", no roles, no generation
//   prompt: the model simply continues the text.
#ifndef CAIRN_BACKENDS_MODEL_CHAT_TEMPLATE_H_
#define CAIRN_BACKENDS_MODEL_CHAT_TEMPLATE_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/model/metadata.h"
#include "backends/model/tokenizer.h"

namespace cairn {

struct ChatMessage {
  std::string role;  // system, user, assistant or tool (Gemma: also model)
  std::string content;
};

// A rendered conversation as consecutive parts: the template's own text
// (special tokens parsed) and message contents (never parsed, so client text
// cannot inject control tokens).
struct RenderedChat {
  struct Part {
    std::string text;
    bool scaffold = false;  // template text: special tokens are parsed
    int message = -1;       // index of the message it renders; -1: generation prompt
  };
  std::vector<Part> parts;
  // Byte offset in Text() where each message's rendering starts (a Gemma
  // system message: where the turn it is merged into starts).
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

enum class ChatTemplateKind { kPlain, kChatML, kLlama3, kGemma };

// Immutable; thread-safe.
class ChatTemplate final {
 public:
  // The template of a model: the family whose markers
  // tokenizer.chat_template uses; kPlain when the key is absent.
  // UNIMPLEMENTED for a template of another family (the caller may then pick
  // one with FromName); INVALID_ARGUMENT when the key is not a string.
  static absl::StatusOr<ChatTemplate> FromMetadata(const Metadata& metadata);
  // "chatml", "llama3", "gemma" or "plain"; NOT_FOUND otherwise.
  static absl::StatusOr<ChatTemplate> FromName(std::string_view name);

  ChatTemplateKind kind() const { return kind_; }
  std::string_view name() const;

  // Renders `messages` (and, when asked, the prompt that opens the
  // assistant's reply). INVALID_ARGUMENT for an unknown or empty role.
  absl::StatusOr<RenderedChat> Render(std::span<const ChatMessage> messages,
                                      bool add_generation_prompt) const;

 private:
  explicit ChatTemplate(ChatTemplateKind kind) : kind_(kind) {}
  ChatTemplateKind kind_;
};

// Tokenizes a rendered conversation: BOS/EOS as the vocabulary asks, special
// tokens matched in scaffolding only, and the token index where each message
// starts (for checkpoint placement).
TokenizedChat TokenizeChat(const Tokenizer& tokenizer, const RenderedChat& chat);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MODEL_CHAT_TEMPLATE_H_
