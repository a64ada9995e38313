#include "backends/model/chat_template.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace cairn {

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

}  // namespace

std::string RenderedChat::Text() const {
  std::string text;
  for (const Part& p : parts) text += p.text;
  return text;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromMetadata(const Metadata& metadata) {
  constexpr std::string_view kKey = "tokenizer.chat_template";
  if (!metadata.Has(kKey)) return ChatTemplate(ChatTemplateKind::kPlain);
  auto source = metadata.GetString(kKey);
  if (!source.ok()) return source.status();
  if (source->find("<|im_start|>") != std::string::npos) {
    return ChatTemplate(ChatTemplateKind::kChatML);
  }
  if (source->find("<|start_header_id|>") != std::string::npos &&
      source->find("<|end_header_id|>") != std::string::npos) {
    return ChatTemplate(ChatTemplateKind::kLlama3);
  }
  if (source->find("<start_of_turn>") != std::string::npos) {
    return ChatTemplate(ChatTemplateKind::kGemma);
  }
  return absl::UnimplementedError(
      "tokenizer.chat_template is not a ChatML, Llama 3 or Gemma template; cairn renders only "
      "those families (choose one by name)");
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromName(std::string_view name) {
  if (name == "chatml") return ChatTemplate(ChatTemplateKind::kChatML);
  if (name == "llama3") return ChatTemplate(ChatTemplateKind::kLlama3);
  if (name == "gemma") return ChatTemplate(ChatTemplateKind::kGemma);
  if (name == "plain") return ChatTemplate(ChatTemplateKind::kPlain);
  return absl::NotFoundError(absl::StrFormat(
      "no chat template named '%s' (known: chatml, llama3, gemma, plain)", name));
}

std::string_view ChatTemplate::name() const {
  switch (kind_) {
    case ChatTemplateKind::kPlain: return "plain";
    case ChatTemplateKind::kChatML: return "chatml";
    case ChatTemplateKind::kLlama3: return "llama3";
    case ChatTemplateKind::kGemma: return "gemma";
  }
  return "";
}

absl::StatusOr<RenderedChat> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                                  bool add_generation_prompt) const {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    const bool known = role == "system" || role == "user" || role == "assistant" ||
                       role == "tool" || (kind_ == ChatTemplateKind::kGemma && role == "model");
    if (!known) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "message %d: role '%s' is not one of system, user, assistant, tool", i, role));
    }
  }
  RenderedChat chat;
  Builder b(&chat);
  const int n = static_cast<int>(messages.size());
  switch (kind_) {
    case ChatTemplateKind::kPlain:
      for (int i = 0; i < n; ++i) {
        chat.message_starts.push_back(b.size());
        if (i > 0) b.Scaffold("\n", i);
        b.Content(messages[i].content, i);
      }
      break;
    case ChatTemplateKind::kChatML:
      for (int i = 0; i < n; ++i) {
        chat.message_starts.push_back(b.size());
        b.Scaffold("<|im_start|>" + messages[i].role + "\n", i);
        b.Content(messages[i].content, i);
        b.Scaffold("<|im_end|>\n", i);
      }
      if (add_generation_prompt) {
        chat.generation_prompt_start = b.size();
        b.Scaffold("<|im_start|>assistant\n", -1);
      }
      break;
    case ChatTemplateKind::kLlama3:
      for (int i = 0; i < n; ++i) {
        chat.message_starts.push_back(b.size());
        b.Scaffold("<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n", i);
        b.Content(Trim(messages[i].content), i);
        b.Scaffold("<|eot_id|>", i);
      }
      if (add_generation_prompt) {
        chat.generation_prompt_start = b.size();
        b.Scaffold("<|start_header_id|>assistant<|end_header_id|>\n\n", -1);
      }
      break;
    case ChatTemplateKind::kGemma: {
      std::string system;
      std::vector<int> pending_system;  // system messages waiting for a turn
      for (int i = 0; i < n; ++i) {
        const std::string& role = messages[i].role;
        if (role == "system") {
          system += Trim(messages[i].content);
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
        b.Content(Trim(messages[i].content), i);
        b.Scaffold("<end_of_turn>\n", i);
      }
      for (int s : pending_system) chat.message_starts[s] = b.size();
      if (add_generation_prompt) {
        chat.generation_prompt_start = b.size();
        b.Scaffold("<start_of_turn>model\n", -1);
      }
      break;
    }
  }
  if (!add_generation_prompt || kind_ == ChatTemplateKind::kPlain) {
    chat.generation_prompt_start = b.size();
  }
  return chat;
}

TokenizedChat TokenizeChat(const Tokenizer& tokenizer, const RenderedChat& chat) {
  std::vector<TextPart> parts;
  parts.reserve(chat.parts.size() + 1);
  for (const auto& p : chat.parts) parts.push_back({p.text, p.scaffold});
  // A trailing empty part locates the end (the generation prompt when absent).
  parts.push_back({std::string_view(), false});
  std::vector<size_t> starts;
  TokenizedChat out;
  out.tokens = tokenizer.TokenizeParts(parts, /*add_special=*/true, &starts);
  // Byte offset of every part, to map message and prompt offsets to parts.
  std::vector<size_t> offsets;
  size_t offset = 0;
  for (const auto& p : chat.parts) {
    offsets.push_back(offset);
    offset += p.text.size();
  }
  offsets.push_back(offset);
  auto token_at = [&](size_t byte) {
    for (size_t k = 0; k < offsets.size(); ++k) {
      if (offsets[k] >= byte) return starts[k];
    }
    return starts.back();
  };
  for (const size_t byte : chat.message_starts) out.message_starts.push_back(token_at(byte));
  out.generation_prompt_start = token_at(chat.generation_prompt_start);
  return out;
}

}  // namespace cairn
