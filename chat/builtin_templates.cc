#include "chat/builtin_templates.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace cairn::chat_internal {

namespace {

constexpr std::string_view kWhitespace = " \t\n\r\f\v";

std::string Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kWhitespace);
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(kWhitespace);
  return std::string(s.substr(b, e - b + 1));
}

class Builder {
 public:
  explicit Builder(RenderedChat* chat) : chat_(chat) {}
  void Scaffold(std::string text, int message) { Add(std::move(text), true, message); }
  void Content(std::string text, int message) { Add(std::move(text), false, message); }
  size_t size() const { return size_; }

 private:
  void Add(std::string text, bool scaffold, int message) {
    if (text.empty()) return;
    size_ += text.size();
    chat_->parts.push_back({std::move(text), scaffold, message});
  }
  RenderedChat* chat_;
  size_t size_ = 0;
};

std::string ContentOf(const ChatMessage& m) { return m.content.value_or(""); }

void RenderGemma(std::span<const ChatMessage> messages, Builder& b, RenderedChat& chat) {
  std::string system;
  std::vector<int> pending_system;  // system messages waiting for a turn
  for (int i = 0; i < static_cast<int>(messages.size()); ++i) {
    const std::string& role = messages[i].role;
    if (role == "system") {
      system += Trim(ContentOf(messages[i]));
      pending_system.push_back(i);
      chat.message_starts.push_back(0);  // set when its turn starts
      continue;
    }
    const std::string turn_role = role == "assistant" ? "model" : role;
    chat.message_starts.push_back(b.size());
    b.Scaffold("<start_of_turn>" + turn_role + "\n", i);
    if (!system.empty() && turn_role != "model") {
      for (int s : pending_system) chat.message_starts[s] = chat.message_starts[i];
      pending_system.clear();
      b.Content(system, i);
      b.Scaffold("\n\n", i);
      system.clear();
    }
    b.Content(Trim(ContentOf(messages[i])), i);
    b.Scaffold("<end_of_turn>\n", i);
  }
  for (int s : pending_system) chat.message_starts[s] = b.size();
}

}  // namespace

std::optional<ChatTemplateKind> FamilyOfSource(std::string_view source) {
  if (source.find("<|im_start|>") != std::string_view::npos) return ChatTemplateKind::kChatML;
  if (source.find("<|start_header_id|>") != std::string_view::npos &&
      source.find("<|end_header_id|>") != std::string_view::npos) {
    return ChatTemplateKind::kLlama3;
  }
  if (source.find("<start_of_turn>") != std::string_view::npos) return ChatTemplateKind::kGemma;
  return std::nullopt;
}

std::string_view FamilyName(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kPlain:
      return "plain";
    case ChatTemplateKind::kChatML:
      return "chatml";
    case ChatTemplateKind::kLlama3:
      return "llama3";
    case ChatTemplateKind::kGemma:
      return "gemma";
    case ChatTemplateKind::kJinja:
      return "jinja";
  }
  return "";
}

std::optional<ChatTemplateKind> FamilyNamed(std::string_view name) {
  for (ChatTemplateKind kind :
       {ChatTemplateKind::kChatML, ChatTemplateKind::kLlama3, ChatTemplateKind::kGemma, ChatTemplateKind::kPlain}) {
    if (name == FamilyName(kind)) return kind;
  }
  return std::nullopt;
}

absl::StatusOr<RenderedChat> RenderFamily(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                          bool add_generation_prompt) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    const bool known = role == "system" || role == "user" || role == "assistant" || role == "tool" ||
                       (kind == ChatTemplateKind::kGemma && role == "model");
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrFormat("message %d: role '%s' is not one of system, user, assistant, tool", i, role));
    }
  }
  RenderedChat chat;
  Builder b(&chat);
  const int n = static_cast<int>(messages.size());
  std::string prompt;
  switch (kind) {
    case ChatTemplateKind::kPlain:
      for (int i = 0; i < n; ++i) {
        chat.message_starts.push_back(b.size());
        if (i > 0) b.Scaffold("\n", i);
        b.Content(ContentOf(messages[i]), i);
      }
      break;
    case ChatTemplateKind::kChatML:
      for (int i = 0; i < n; ++i) {
        chat.message_starts.push_back(b.size());
        b.Scaffold("<|im_start|>" + messages[i].role + "\n", i);
        b.Content(ContentOf(messages[i]), i);
        b.Scaffold("<|im_end|>\n", i);
      }
      prompt = "<|im_start|>assistant\n";
      break;
    case ChatTemplateKind::kLlama3:
      for (int i = 0; i < n; ++i) {
        chat.message_starts.push_back(b.size());
        b.Scaffold("<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n", i);
        b.Content(Trim(ContentOf(messages[i])), i);
        b.Scaffold("<|eot_id|>", i);
      }
      prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatTemplateKind::kGemma:
      RenderGemma(messages, b, chat);
      prompt = "<start_of_turn>model\n";
      break;
    case ChatTemplateKind::kJinja:
      return absl::InternalError("a Jinja template is no built-in family");
  }
  chat.generation_prompt_start = b.size();
  if (add_generation_prompt && !prompt.empty()) b.Scaffold(prompt, -1);
  return chat;
}

}  // namespace cairn::chat_internal
