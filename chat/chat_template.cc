#include "chat/chat_template.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "chat/builtin_templates.h"
#include "chat/conversation.h"
#include "chat/jinja/error.h"

namespace cairn {

namespace {

constexpr char kTemplateKey[] = "tokenizer.chat_template";
constexpr char kToolUseKey[] = "tokenizer.chat_template.tool_use";

// The vocabulary's texts of its BOS and EOS tokens (empty when it has none).
ChatSpecialTokens SpecialTokensOf(const Metadata& metadata) {
  ChatSpecialTokens tokens;
  auto texts = metadata.GetStringArrayRef("tokenizer.ggml.tokens");
  if (!texts.ok()) return tokens;
  const auto text_of = [&](const char* key) -> std::string {
    auto id = metadata.GetInt(key);
    if (!id.ok() || *id < 0 || static_cast<size_t>(*id) >= (*texts)->size()) return "";
    return (**texts)[*id];
  };
  tokens.bos = text_of("tokenizer.ggml.bos_token_id");
  tokens.eos = text_of("tokenizer.ggml.eos_token_id");
  return tokens;
}

size_t CommonPrefix(const std::string& a, const std::string& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + std::min(a.size(), b.size()), b.begin()).first -
                             a.begin());
}

}  // namespace

struct ChatTemplate::JinjaState {
  std::shared_ptr<const jinja::Template> main;
  std::shared_ptr<const jinja::Template> tool_use;
  std::string source;           // of main
  std::string tool_use_source;  // of tool_use, when there is one
  std::string name;
  ChatSpecialTokens tokens;
  ChatTemplateOptions options;
  // For a built-in family: why the model's own template is not used.
  absl::Status fallback;
  std::string note;

  absl::StatusOr<jinja::Text> Run(const jinja::Template& tmpl, const chat_internal::ConversationValues& values,
                                  bool add_generation_prompt, std::vector<size_t>* write_offsets = nullptr) const;
  absl::StatusOr<RenderedChat> Render(const ChatRequest& request) const;
};

absl::StatusOr<jinja::Text> ChatTemplate::JinjaState::Run(const jinja::Template& tmpl,
                                                          const chat_internal::ConversationValues& values,
                                                          bool add_generation_prompt,
                                                          std::vector<size_t>* write_offsets) const {
  jinja::RenderInput input;
  input.variables = {
      {"messages", values.messages},
      {"tools", values.tools},
      {"documents", jinja::Value::None()},
      {"add_generation_prompt", jinja::Value::Bool(add_generation_prompt)},
      {"bos_token", jinja::Value::String(tokens.bos)},
      {"eos_token", jinja::Value::String(tokens.eos)},
  };
  for (const auto& arg : values.arguments) input.variables.push_back(arg);
  input.tracked = values.messages.items();
  input.now = options.now;
  input.limits = options.limits;
  return tmpl.Render(input, write_offsets);
}

absl::StatusOr<RenderedChat> ChatTemplate::JinjaState::Render(const ChatRequest& request) const {
  auto values = chat_internal::ToValues(request);
  if (!values.ok()) return values.status();
  const jinja::Template& tmpl = tool_use != nullptr && !values->tools.is_none() ? *tool_use : *main;
  std::vector<size_t> writes;
  auto text = Run(tmpl, *values, request.add_generation_prompt, &writes);
  if (!text.ok()) return text.status();
  // The generation prompt is where the rendering departs from the one
  // without it, moved back to the write it falls in (so that a cut there
  // never splits what the template wrote at once, a special token's text).
  size_t prompt_start = text->size();
  if (request.add_generation_prompt) {
    auto without = Run(tmpl, *values, false);
    if (without.ok()) {
      prompt_start = CommonPrefix(text->bytes(), without->bytes());
      auto write = std::upper_bound(writes.begin(), writes.end(), prompt_start);
      if (prompt_start < text->size() && write != writes.begin()) prompt_start = *(write - 1);
    }
  }
  std::vector<size_t> starts = chat_internal::MessageStarts(*text, request.messages.size(), prompt_start);
  if (!starts.empty()) prompt_start = std::max(prompt_start, starts.back());
  return chat_internal::ToRenderedChat(*text, std::move(starts), prompt_start);
}

ChatTemplate::ChatTemplate(ChatTemplateKind kind, std::shared_ptr<const JinjaState> jinja)
    : kind_(kind), jinja_(std::move(jinja)) {}

std::string RenderedChat::Text() const {
  std::string text;
  for (const Part& p : parts) text += p.text;
  return text;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromSource(std::string_view source, std::string name,
                                                      const ChatSpecialTokens& tokens,
                                                      const ChatTemplateOptions& options,
                                                      std::optional<std::string_view> tool_use_source) {
  auto state = std::make_shared<JinjaState>();
  auto main = jinja::Template::Create(source);
  if (!main.ok()) return main.status();
  state->main = *std::move(main);
  if (tool_use_source.has_value()) {
    auto tool_use = jinja::Template::Create(*tool_use_source);
    if (!tool_use.ok()) return tool_use.status();
    state->tool_use = *std::move(tool_use);
    state->tool_use_source = std::string(*tool_use_source);
  }
  state->source = std::string(source);
  state->name = std::move(name);
  state->tokens = tokens;
  state->options = options;
  state->options.override_source.reset();
  // A template that cannot render a greeting cannot serve (a feature cairn
  // lacks, or limits it exceeds); one that refuses it still can.
  ChatRequest hello;
  hello.messages.push_back({"user", "Hello"});
  auto smoke = state->Render(hello);
  if (!smoke.ok() && smoke.status().code() != absl::StatusCode::kInvalidArgument) return smoke.status();
  return ChatTemplate(ChatTemplateKind::kJinja, std::move(state));
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromMetadata(const Metadata& metadata, const ChatTemplateOptions& options) {
  const ChatSpecialTokens tokens = SpecialTokensOf(metadata);
  if (options.override_source.has_value()) {
    return FromSource(*options.override_source, options.override_name, tokens, options);
  }
  if (!metadata.Has(kTemplateKey)) return ChatTemplate(ChatTemplateKind::kPlain, nullptr);
  auto source = metadata.GetString(kTemplateKey);
  if (!source.ok()) return source.status();
  std::optional<std::string> tool_use;
  if (metadata.Has(kToolUseKey)) {
    auto text = metadata.GetString(kToolUseKey);
    if (!text.ok()) return text.status();
    tool_use = *std::move(text);
  }
  const std::string name = absl::StrCat("gguf:", kTemplateKey);
  auto jinja = FromSource(*source, name, tokens, options, tool_use);
  if (!jinja.ok() && tool_use.has_value()) {
    // A broken tool_use variant leaves the main template serving.
    const absl::Status variant = jinja.status();
    jinja = FromSource(*source, name, tokens, options);
    if (jinja.ok()) {
      auto state = std::make_shared<JinjaState>(*jinja->jinja_);
      state->note = absl::StrCat(" (", kToolUseKey, " unusable: ", jinja::DescribeError(variant), ")");
      return ChatTemplate(ChatTemplateKind::kJinja, std::move(state));
    }
  }
  if (jinja.ok()) return jinja;
  const std::optional<ChatTemplateKind> family = chat_internal::FamilyOfSource(*source);
  if (!family.has_value()) {
    return absl::UnimplementedError(absl::StrCat(kTemplateKey, " cannot run (", jinja::DescribeError(jinja.status()),
                                                 ") and is not a ChatML, Llama 3 or Gemma template"));
  }
  auto state = std::make_shared<JinjaState>();
  state->fallback = jinja.status();
  return ChatTemplate(*family, std::move(state));
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromName(std::string_view name) {
  const std::optional<ChatTemplateKind> kind = chat_internal::FamilyNamed(name);
  if (!kind.has_value()) {
    return absl::NotFoundError(
        absl::StrFormat("no chat template named '%s' (known: chatml, llama3, gemma, plain)", name));
  }
  return ChatTemplate(*kind, nullptr);
}

std::string_view ChatTemplate::name() const {
  if (kind_ == ChatTemplateKind::kJinja) return jinja_->name;
  return chat_internal::FamilyName(kind_);
}

std::string ChatTemplate::description() const {
  if (kind_ == ChatTemplateKind::kJinja) {
    return absl::StrCat(jinja_->name, jinja_->tool_use != nullptr ? absl::StrCat(" (+ ", kToolUseKey, ")") : "",
                        jinja_->note);
  }
  std::string out = absl::StrCat("builtin:", std::string(chat_internal::FamilyName(kind_)));
  if (!fallback_reason().ok()) absl::StrAppend(&out, " (fallback: ", jinja::DescribeError(fallback_reason()), ")");
  return out;
}

std::string_view ChatTemplate::source(bool with_tools) const {
  if (kind_ != ChatTemplateKind::kJinja) return {};
  return with_tools && jinja_->tool_use != nullptr ? jinja_->tool_use_source : jinja_->source;
}

const absl::Status& ChatTemplate::fallback_reason() const {
  static const absl::Status* ok = new absl::Status();
  return jinja_ != nullptr ? jinja_->fallback : *ok;
}

absl::StatusOr<RenderedChat> ChatTemplate::Render(const ChatRequest& request) const {
  if (kind_ == ChatTemplateKind::kJinja) return jinja_->Render(request);
  return chat_internal::RenderFamily(kind_, request.messages, request.add_generation_prompt);
}

absl::StatusOr<RenderedChat> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                                  bool add_generation_prompt) const {
  ChatRequest request;
  request.messages.assign(messages.begin(), messages.end());
  request.add_generation_prompt = add_generation_prompt;
  return Render(request);
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
  // A template that writes BOS itself gets no second one from add_bos.
  const TokenId bos = tokenizer.special_tokens().bos;
  if (tokenizer.add_bos() && bos >= 0 && out.tokens.size() >= 2 && out.tokens[0] == bos && out.tokens[1] == bos &&
      !chat.parts.empty() && chat.parts[0].scaffold) {
    out.tokens.erase(out.tokens.begin());
    for (size_t& s : starts) s = s > 0 ? s - 1 : 0;
  }
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
