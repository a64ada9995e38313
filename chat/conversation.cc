#include "chat/conversation.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "chat/jinja/json.h"
#include "nlohmann/json.hpp"

namespace cairn::chat_internal {

namespace {

using Json = nlohmann::ordered_json;

// Parsed JSON, or nullopt when `text` is not JSON.
std::optional<Json> ParseJson(const std::string& text) {
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return std::nullopt;
  return json;
}

// A message as transformers receives it from an OpenAI-style client.
Json MessageJson(const ChatMessage& m) {
  Json j = Json::object();
  j["role"] = m.role;
  if (m.tool_call_id.has_value()) j["tool_call_id"] = *m.tool_call_id;
  if (m.name.has_value()) j["name"] = *m.name;
  j["content"] = m.content.has_value() ? Json(*m.content) : Json(nullptr);
  if (m.reasoning_content.has_value()) j["reasoning_content"] = *m.reasoning_content;
  if (!m.tool_calls.empty()) {
    Json calls = Json::array();
    for (const ChatToolCall& call : m.tool_calls) {
      Json function = Json::object();
      function["name"] = call.name;
      // Arguments that are not JSON reach the template as the client's text.
      std::optional<Json> arguments = ParseJson(call.arguments);
      function["arguments"] = arguments.has_value() ? *std::move(arguments) : Json(call.arguments);
      Json entry = Json::object();
      entry["id"] = call.id;
      entry["type"] = "function";
      entry["function"] = std::move(function);
      calls.push_back(std::move(entry));
    }
    j["tool_calls"] = std::move(calls);
  }
  return j;
}

}  // namespace

absl::StatusOr<ConversationValues> ToValues(const ChatRequest& request) {
  ConversationValues out;
  Json messages = Json::array();
  for (const ChatMessage& m : request.messages) messages.push_back(MessageJson(m));
  auto values = jinja::FromJson(messages, /*client=*/true);
  if (!values.ok()) return values.status();
  out.messages = *std::move(values);
  out.tools = jinja::Value::None();
  if (!request.tools.empty()) {
    std::optional<Json> tools = ParseJson(request.tools);
    if (!tools.has_value() || !(tools->is_array() || tools->is_null())) {
      return absl::InvalidArgumentError("tools must be a JSON array of function schemas");
    }
    auto v = jinja::FromJson(*tools, /*client=*/true);
    if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat("tools: ", v.status().message()));
    out.tools = *std::move(v);
  }
  if (!request.template_arguments.empty()) {
    std::optional<Json> args = ParseJson(request.template_arguments);
    if (!args.has_value() || !args->is_object()) {
      return absl::InvalidArgumentError("template arguments must be a JSON object");
    }
    for (const auto& [key, value] : args->items()) {
      for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt"}) {
        if (key == reserved) {
          return absl::InvalidArgumentError(
              absl::StrCat("template argument '", key, "' names a variable the request itself sets"));
        }
      }
      auto v = jinja::FromJson(value, /*client=*/true);
      if (!v.ok())
        return absl::InvalidArgumentError(absl::StrCat("template argument '", key, "': ", v.status().message()));
      out.arguments.emplace_back(key, *std::move(v));
    }
  }
  return out;
}

std::vector<size_t> MessageStarts(const jinja::Text& text, size_t count, size_t end) {
  std::vector<size_t> starts(count, std::numeric_limits<size_t>::max());
  for (const jinja::ObjectMark& mark : text.marks()) {
    if (mark.object >= 0 && static_cast<size_t>(mark.object) < count) {
      starts[mark.object] = std::min(starts[mark.object], mark.offset);
    }
  }
  size_t next = end;
  for (size_t i = count; i-- > 0;) {
    starts[i] = std::min(starts[i], next);
    next = starts[i];
  }
  return starts;
}

RenderedChat ToRenderedChat(const jinja::Text& text, std::vector<size_t> message_starts,
                            size_t generation_prompt_start) {
  const std::string& bytes = text.bytes();
  std::vector<size_t> cuts = message_starts;
  cuts.push_back(generation_prompt_start);
  for (const jinja::ClientSpan& span : text.client_spans()) {
    cuts.push_back(span.begin);
    cuts.push_back(span.end);
  }
  cuts.push_back(0);
  cuts.push_back(bytes.size());
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  RenderedChat chat;
  size_t span = 0;
  for (size_t k = 0; k + 1 < cuts.size() && cuts[k + 1] <= bytes.size(); ++k) {
    const size_t begin = cuts[k];
    const size_t end = cuts[k + 1];
    while (span < text.client_spans().size() && text.client_spans()[span].end <= begin) ++span;
    const bool client = span < text.client_spans().size() && text.client_spans()[span].begin <= begin;
    int message = message_starts.empty() ? -1 : 0;
    for (size_t i = 0; i < message_starts.size(); ++i) {
      if (message_starts[i] <= begin) message = static_cast<int>(i);
    }
    if (begin >= generation_prompt_start) message = -1;
    chat.parts.push_back({bytes.substr(begin, end - begin), !client, message});
  }
  chat.message_starts = std::move(message_starts);
  chat.generation_prompt_start = generation_prompt_start;
  return chat;
}

}  // namespace cairn::chat_internal
