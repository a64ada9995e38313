#include "service/api/prompt_builder.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/model/tokenizer.h"
#include "chat/chat_template.h"
#include "nlohmann/json.hpp"
#include "service/api/status.h"
#include "service/sessions/history_proto.h"

namespace cairn::service {
namespace {

// A prompt of more than the context's positions, refused as soon as its
// tokens are counted (each takes a position): before they are kept, so a
// request of millions of tokens never holds them (the exact count of a
// prompt that fits is checked once it is whole).
absl::Status CheckFits(const ServedModel& model, size_t tokens) {
  const auto context = static_cast<size_t>(model.context_length());
  if (tokens < context) return absl::OkStatus();
  return ContextLengthExceeded(absl::StrCat("prompt of ", tokens == context ? "" : "more than ", context,
                                            " positions does not fit the context of ", context));
}

// Appends the tokens of `text` (a BOS first when `first` and the model wants
// one); special tokens in the text stay text. `tokens`: the prompt's tokens
// so far, this text's added.
absl::Status AddText(const ServedModel& model, const std::string& text, bool first, History* out, size_t* tokens) {
  const Tokenizer* tok = model.tokenizer.get();
  if (tok == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model.name, "' has no tokenizer: send token ids"));
  }
  TokenizeOptions opt;
  opt.add_special = false;
  opt.parse_special = false;
  const std::vector<TokenId> ids = tok->Tokenize(text, opt);
  const bool bos = first && tok->add_bos() && tok->special_tokens().bos >= 0;
  *tokens += ids.size() + (bos ? 1 : 0);
  if (absl::Status st = CheckFits(model, *tokens); !st.ok()) return st;
  if (bos) out->AddToken(tok->special_tokens().bos);
  for (TokenId t : ids) out->AddToken(t);
  return absl::OkStatus();
}

absl::Status AddParts(const ServedModel& model, const ServiceLimits& limits, const v1::GenerateRequest& req,
                      bool at_start, History* h) {
  // What the parts hold, bounded before any of it is tokenized or kept.
  size_t text_bytes = 0, token_ids = 0;
  for (const v1::PromptPart& p : req.parts()) {
    if (p.has_text()) text_bytes += p.text().size();
    if (p.has_tokens()) token_ids += static_cast<size_t>(p.tokens().ids_size());
  }
  if (text_bytes > static_cast<size_t>(limits.max_text_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("text parts longer than ", limits.max_text_bytes, " bytes"));
  }
  if (absl::Status st = CheckFits(model, token_ids); !st.ok()) return st;
  size_t tokens = 0;
  for (int i = 0; i < req.parts_size(); ++i) {
    const v1::PromptPart& p = req.parts(i);
    switch (p.part_case()) {
      case v1::PromptPart::kText:
        if (absl::Status st = AddText(model, p.text(), at_start && h->empty(), h, &tokens); !st.ok()) return st;
        break;
      case v1::PromptPart::kTokens:
        tokens += static_cast<size_t>(p.tokens().ids_size());
        if (absl::Status st = CheckFits(model, tokens); !st.ok()) return st;
        for (int32_t id : p.tokens().ids()) {
          if (absl::Status st = CheckToken(model, id); !st.ok()) return st;
          h->AddToken(id);
        }
        break;
      case v1::PromptPart::kEmbeddings: {
        auto c = ToChunk(model, p.embeddings());
        if (!c.ok()) return c.status();
        h->AddChunk(std::move(*c));
        break;
      }
      case v1::PromptPart::kMessageBoundary:
        h->EndMessage();
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("prompt part ", i, " is empty"));
    }
  }
  return absl::OkStatus();
}

// The JSON syntax check of a tool call's arguments (the template needs
// them parsed; nlohmann-json accepts exactly JSON).
bool IsJson(const std::string& text) { return nlohmann::json::accept(text); }

absl::StatusOr<ChatMessage> ToChatMessage(const v1::ChatMessage& m, int index, size_t* bytes) {
  ChatMessage out;
  out.role = m.role();
  // Absent content is None only where it means something (a turn of tool
  // calls): a client unaware of presence sends "" as absent.
  if (m.has_content() || m.tool_calls_size() == 0) out.content = m.content();
  if (m.has_reasoning_content()) out.reasoning_content = m.reasoning_content();
  if (m.has_tool_call_id()) out.tool_call_id = m.tool_call_id();
  if (m.has_name()) out.name = m.name();
  *bytes += m.content().size() + m.reasoning_content().size() + m.tool_call_id().size() + m.name().size();
  for (int j = 0; j < m.tool_calls_size(); ++j) {
    const v1::ToolCall& call = m.tool_calls(j);
    if (!IsJson(call.arguments())) {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", index, "].tool_calls[", j, "] (", call.name(), "): arguments are not JSON text"));
    }
    out.tool_calls.push_back({call.id(), call.name(), call.arguments()});
    *bytes += call.id().size() + call.name().size() + call.arguments().size();
  }
  return out;
}

// Renders the messages with the model's chat template and appends them,
// with a message boundary where each message after the first starts and
// where the generation prompt starts.
absl::Status AddMessages(const ServedModel& model, const ServiceLimits& limits, const v1::GenerateRequest& req,
                         bool at_start, History* h, PromptRendering* rendering) {
  const Tokenizer* tok = model.tokenizer.get();
  if (tok == nullptr || !model.chat_template.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", model.name, "' has no tokenizer: messages cannot be rendered; send token ids"));
  }
  const bool gen = !req.has_add_generation_prompt() || req.add_generation_prompt();
  auto request = ToChatRequest(limits, req.messages(), req.tools(), req.template_args(), gen);
  if (!request.ok()) return request.status();
  auto rendered = model.chat_template->Render(*request);
  if (!rendered.ok()) return rendered.status();
  if (rendering != nullptr) {
    rendering->rendered = true;
    rendering->text = rendered->Text();
    rendering->with_tools = !req.tools().empty();
  }
  TokenizedChat chat = TokenizeChat(*tok, *rendered);
  if (absl::Status st = CheckFits(model, chat.tokens.size()); !st.ok()) return st;
  // Appended to a conversation: no second BOS.
  size_t skip = 0;
  if (!at_start && !chat.tokens.empty() && chat.tokens[0] == tok->special_tokens().bos) skip = 1;
  std::vector<size_t> ends(chat.message_starts.begin() + (chat.message_starts.empty() ? 0 : 1),
                           chat.message_starts.end());
  ends.push_back(chat.generation_prompt_start);
  size_t next = 0;
  for (size_t i = skip; i < chat.tokens.size(); ++i) {
    while (next < ends.size() && ends[next] <= i) {
      if (ends[next] == i) h->EndMessage();
      ++next;
    }
    h->AddToken(chat.tokens[i]);
  }
  while (next < ends.size()) {
    if (ends[next] == chat.tokens.size()) h->EndMessage();
    ++next;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChatRequest> ToChatRequest(const ServiceLimits& limits,
                                          const google::protobuf::RepeatedPtrField<v1::ChatMessage>& messages,
                                          const std::string& tools, const std::string& template_args,
                                          bool add_generation_prompt) {
  if (messages.size() > limits.max_prompt_parts) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", limits.max_prompt_parts, " messages"));
  }
  ChatRequest out;
  size_t bytes = tools.size() + template_args.size();
  for (int i = 0; i < messages.size(); ++i) {
    auto m = ToChatMessage(messages[i], i, &bytes);
    if (!m.ok()) return m.status();
    out.messages.push_back(*std::move(m));
  }
  if (bytes > static_cast<size_t>(limits.max_text_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("messages longer than ", limits.max_text_bytes, " bytes"));
  }
  out.tools = tools;
  out.template_arguments = template_args;
  out.add_generation_prompt = add_generation_prompt;
  return out;
}

absl::StatusOr<History> BuildPrompt(const ServedModel& model, const ServiceLimits& limits,
                                    const v1::GenerateRequest& req, bool at_start, PromptRendering* rendering) {
  if (req.parts_size() > 0 && req.messages_size() > 0) {
    return absl::InvalidArgumentError("give either parts or messages, not both");
  }
  if (req.parts_size() > limits.max_prompt_parts || req.messages_size() > limits.max_prompt_parts) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", limits.max_prompt_parts, " prompt parts"));
  }
  History h;
  if (req.messages_size() == 0 && (!req.tools().empty() || !req.template_args().empty())) {
    return absl::InvalidArgumentError("tools and template_args go with messages");
  }
  absl::Status st = req.messages_size() > 0 ? AddMessages(model, limits, req, at_start, &h, rendering)
                                            : AddParts(model, limits, req, at_start, &h);
  if (!st.ok()) return st;
  return h;
}

}  // namespace cairn::service
