#include "service/http/openai_request.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace cairn::service::http {
namespace {

using Json = nlohmann::json;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("'", field, "' ", what));
}

// The field, or null when absent or JSON null (OpenAI clients send null for
// "not set").
const Json* Field(const Json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::optional<double>> Number(const Json& body, const char* name, double lo, double hi) {
  const Json* v = Field(body, name);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return Invalid(name, "must be a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) return Invalid(name, absl::StrCat("must be in [", lo, ", ", hi, "]"));
  return std::optional<double>(x);
}

absl::StatusOr<std::optional<int64_t>> Integer(const Json& body, const char* name, int64_t lo, int64_t hi) {
  const Json* v = Field(body, name);
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_number_integer()) return Invalid(name, "must be an integer");
  // Unsigned values above int64's range read as negative here: refused.
  const int64_t x =
      v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi) ? hi + 1 : v->get<int64_t>();
  if (x < lo || x > hi) return Invalid(name, absl::StrCat("must be in [", lo, ", ", hi, "]"));
  return std::optional<int64_t>(x);
}

absl::StatusOr<bool> Bool(const Json& body, const char* name) {
  const Json* v = Field(body, name);
  if (v == nullptr) return false;
  if (!v->is_boolean()) return Invalid(name, "must be true or false");
  return v->get<bool>();
}

// Options a reply would silently differ without: refused unless they keep
// their default meaning.
absl::Status RefuseUnsupported(const Json& body) {
  if (auto n = Integer(body, "n", 1, 1); !n.ok()) return Invalid("n", "must be 1 (one choice per request)");
  if (auto best = Integer(body, "best_of", 1, 1); !best.ok()) return Invalid("best_of", "must be 1");
  for (const char* name : {"frequency_penalty", "logit_bias", "suffix", "functions", "function_call", "audio",
                           "prediction", "modalities", "parallel_tool_calls"}) {
    const Json* v = Field(body, name);
    if (v == nullptr) continue;
    const bool harmless = (v->is_number() && v->get<double>() == 0) || (v->is_object() && v->empty()) ||
                          (std::string_view(name) == "parallel_tool_calls" && v->is_boolean());
    if (!harmless) return Invalid(name, "is not supported by this server");
  }
  if (auto echo = Bool(body, "echo"); !echo.ok() || *echo) return Invalid("echo", "is not supported by this server");
  if (const Json* f = Field(body, "response_format"); f != nullptr) {
    const Json* type = f->is_object() ? Field(*f, "type") : nullptr;
    if (type == nullptr || !type->is_string() || type->get<std::string>() != "text") {
      return Invalid("response_format", "supports only {\"type\": \"text\"} (no constrained decoding)");
    }
  }
  return absl::OkStatus();
}

// temperature, top_p, seed, presence_penalty, max_tokens, stop, and the
// extensions vLLM and llama.cpp accept (top_k, min_p, repetition_penalty,
// ignore_eos).
absl::Status ParseSampling(const Json& body, bool chat, v1::GenerateRequest* out) {
  v1::SamplingParams* sp = out->mutable_sampling();
  auto temperature = Number(body, "temperature", 0, 2);
  if (!temperature.ok()) return temperature.status();
  if (*temperature) sp->set_temperature(static_cast<float>(**temperature));
  auto top_p = Number(body, "top_p", 0, 1);
  if (!top_p.ok()) return top_p.status();
  if (*top_p) sp->set_top_p(static_cast<float>(**top_p));
  auto presence = Number(body, "presence_penalty", -2, 2);
  if (!presence.ok()) return presence.status();
  if (*presence) sp->set_presence_penalty(static_cast<float>(**presence));
  auto top_k = Integer(body, "top_k", -1, std::numeric_limits<int32_t>::max());
  if (!top_k.ok()) return top_k.status();
  if (*top_k && **top_k > 0) sp->set_top_k(static_cast<int32_t>(**top_k));
  auto min_p = Number(body, "min_p", 0, 1);
  if (!min_p.ok()) return min_p.status();
  if (*min_p) sp->set_min_p(static_cast<float>(**min_p));
  auto repetition = Number(body, "repetition_penalty", 0, 10);
  if (!repetition.ok()) return repetition.status();
  if (*repetition) sp->set_repetition_penalty(static_cast<float>(**repetition));
  auto seed = Integer(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  if (!seed.ok()) return seed.status();
  if (*seed) sp->set_seed(static_cast<uint64_t>(**seed));

  // max_completion_tokens is the chat API's current name; /v1/completions
  // defaults to 16 tokens as OpenAI's does.
  const char* max_name =
      chat && Field(body, "max_completion_tokens") != nullptr ? "max_completion_tokens" : "max_tokens";
  auto max_tokens = Integer(body, max_name, 0, std::numeric_limits<int32_t>::max());
  if (!max_tokens.ok()) return max_tokens.status();
  if (*max_tokens) {
    out->mutable_stop()->set_max_tokens(static_cast<int32_t>(**max_tokens));
  } else if (!chat) {
    out->mutable_stop()->set_max_tokens(16);
  }
  // vLLM's extension: generate through end-of-generation tokens.
  auto ignore_eos = Bool(body, "ignore_eos");
  if (!ignore_eos.ok()) return ignore_eos.status();
  if (*ignore_eos) out->mutable_stop()->set_ignore_eos(true);
  if (const Json* stop = Field(body, "stop"); stop != nullptr) {
    if (stop->is_string()) {
      out->mutable_stop()->add_stop_strings(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (const Json& s : *stop) {
        if (!s.is_string()) return Invalid("stop", "must be a string or an array of strings");
        out->mutable_stop()->add_stop_strings(s.get<std::string>());
      }
    } else {
      return Invalid("stop", "must be a string or an array of strings");
    }
  }
  return absl::OkStatus();
}

// A message's content: a string, or an array of text parts (joined).
absl::StatusOr<std::optional<std::string>> Content(const Json& message, size_t index) {
  const Json* c = Field(message, "content");
  if (c == nullptr) return std::optional<std::string>();
  if (c->is_string()) return std::optional<std::string>(c->get<std::string>());
  const std::string where = absl::StrCat("messages[", index, "].content");
  if (!c->is_array()) return Invalid(where, "must be a string or an array of text parts");
  std::string text;
  for (const Json& part : *c) {
    const Json* type = part.is_object() ? Field(part, "type") : nullptr;
    const Json* t = part.is_object() ? Field(part, "text") : nullptr;
    if (type == nullptr || !type->is_string() || type->get<std::string>() != "text" || t == nullptr ||
        !t->is_string()) {
      return Invalid(where, "supports only text parts ({\"type\": \"text\", \"text\": ...})");
    }
    text += t->get<std::string>();
  }
  return std::optional<std::string>(std::move(text));
}

absl::Status ParseToolCalls(const Json& calls, size_t index, v1::ChatMessage* out) {
  const std::string where = absl::StrCat("messages[", index, "].tool_calls");
  if (!calls.is_array()) return Invalid(where, "must be an array");
  for (const Json& call : calls) {
    const Json* fn = call.is_object() ? Field(call, "function") : nullptr;
    const Json* name = fn != nullptr && fn->is_object() ? Field(*fn, "name") : nullptr;
    const Json* args = fn != nullptr && fn->is_object() ? Field(*fn, "arguments") : nullptr;
    const Json* id = call.is_object() ? Field(call, "id") : nullptr;
    if (name == nullptr || !name->is_string() || (args != nullptr && !args->is_string()) ||
        (id != nullptr && !id->is_string())) {
      return Invalid(where,
                     "entries must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    }
    v1::ToolCall* tc = out->add_tool_calls();
    if (id != nullptr) tc->set_id(id->get<std::string>());
    tc->set_name(name->get<std::string>());
    tc->set_arguments(args != nullptr ? args->get<std::string>() : "{}");
  }
  return absl::OkStatus();
}

absl::Status ParseMessages(const Json& body, v1::GenerateRequest* out) {
  const Json* messages = Field(body, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    return Invalid("messages", "must be a non-empty array");
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const Json* role = m.is_object() ? Field(m, "role") : nullptr;
    if (role == nullptr || !role->is_string()) return Invalid(absl::StrCat("messages[", i, "].role"), "is required");
    v1::ChatMessage* msg = out->add_messages();
    // OpenAI's newer name for the system role; templates know "system".
    msg->set_role(role->get<std::string>() == "developer" ? "system" : role->get<std::string>());
    auto content = Content(m, i);
    if (!content.ok()) return content.status();
    if (*content) msg->set_content(**content);
    for (const char* name : {"reasoning_content", "tool_call_id", "name"}) {
      const Json* v = Field(m, name);
      if (v == nullptr) continue;
      if (!v->is_string()) return Invalid(absl::StrCat("messages[", i, "].", name), "must be a string");
      const std::string s = v->get<std::string>();
      if (std::string_view(name) == "reasoning_content") msg->set_reasoning_content(s);
      if (std::string_view(name) == "tool_call_id") msg->set_tool_call_id(s);
      if (std::string_view(name) == "name") msg->set_name(s);
    }
    if (const Json* calls = Field(m, "tool_calls"); calls != nullptr) {
      if (absl::Status st = ParseToolCalls(*calls, i, msg); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

// tools (function tools only) and tool_choice ("auto"; "none" renders the
// conversation without them); chat_template_kwargs as template arguments.
absl::Status ParseTools(const Json& body, v1::GenerateRequest* out) {
  bool use_tools = true;
  if (const Json* choice = Field(body, "tool_choice"); choice != nullptr) {
    const std::string c = choice->is_string() ? choice->get<std::string>() : "";
    if (c != "auto" && c != "none") {
      return Invalid("tool_choice", "supports \"auto\" and \"none\" only (no forced tool calls)");
    }
    use_tools = c == "auto";
  }
  if (const Json* tools = Field(body, "tools"); tools != nullptr) {
    if (!tools->is_array()) return Invalid("tools", "must be an array");
    for (const Json& t : *tools) {
      const Json* type = t.is_object() ? Field(t, "type") : nullptr;
      if (type == nullptr || !type->is_string() || type->get<std::string>() != "function") {
        return Invalid("tools", "supports only {\"type\": \"function\", \"function\": {...}} entries");
      }
    }
    if (use_tools && !tools->empty()) out->set_tools(tools->dump());
  }
  if (const Json* args = Field(body, "chat_template_kwargs"); args != nullptr) {
    if (!args->is_object()) return Invalid("chat_template_kwargs", "must be an object");
    out->set_template_args(args->dump());
  }
  return absl::OkStatus();
}

// The completions prompt: text, or token ids (one prompt only).
absl::Status ParsePrompt(const Json& body, v1::GenerateRequest* out) {
  const Json* prompt = Field(body, "prompt");
  if (prompt == nullptr) return Invalid("prompt", "is required");
  const Json* one = prompt;
  // A batch of one prompt ([...] of strings, or of arrays of ids) is that prompt.
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    one = &(*prompt)[0];
  }
  if (one->is_string()) {
    out->add_parts()->set_text(one->get<std::string>());
    return absl::OkStatus();
  }
  if (!one->is_array() || one->empty()) {
    return Invalid("prompt", "must be a string or a non-empty array of token ids (one prompt per request)");
  }
  v1::TokenIds* ids = out->add_parts()->mutable_tokens();
  for (const Json& id : *one) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return Invalid("prompt", "token ids must be integers in [0, n_vocab) (one prompt per request)");
    }
    ids->add_ids(static_cast<int32_t>(id.get<int64_t>()));
  }
  return absl::OkStatus();
}

// logprobs: the chat API's boolean plus top_logprobs (0..20), or the
// completions API's integer (the number of top log-probabilities, 0..5).
absl::Status ParseLogprobs(const Json& body, bool chat, OpenAiRequest* out) {
  if (chat) {
    auto on = Bool(body, "logprobs");
    if (!on.ok()) return on.status();
    auto top = Integer(body, "top_logprobs", 0, 20);
    if (!top.ok()) return top.status();
    if (*top && !*on) return Invalid("top_logprobs", "needs \"logprobs\": true");
    out->logprobs = *on;
    out->generate.set_top_logprobs(top->value_or(0));
  } else {
    auto top = Integer(body, "logprobs", 0, 5);
    if (!top.ok()) return top.status();
    out->logprobs = top->has_value();
    out->generate.set_top_logprobs(top->value_or(0));
  }
  out->generate.set_logprobs(out->logprobs);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, std::string_view body,
                                                 std::string_view session) {
  const Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError("the request body is not valid JSON");
  if (!json.is_object()) return absl::InvalidArgumentError("the request body must be a JSON object");
  const bool chat = endpoint == OpenAiEndpoint::kChatCompletions;
  OpenAiRequest out;
  out.endpoint = endpoint;
  const Json* model = Field(json, "model");
  if (model == nullptr || !model->is_string() || model->get<std::string>().empty()) {
    return Invalid("model", "is required (a name from GET /v1/models)");
  }
  out.generate.set_model(model->get<std::string>());
  if (absl::Status st = RefuseUnsupported(json); !st.ok()) return st;
  absl::Status st = chat ? ParseMessages(json, &out.generate) : ParsePrompt(json, &out.generate);
  if (st.ok() && chat) st = ParseTools(json, &out.generate);
  if (st.ok()) st = ParseSampling(json, chat, &out.generate);
  if (st.ok()) st = ParseLogprobs(json, chat, &out);
  if (!st.ok()) return st;
  auto stream = Bool(json, "stream");
  if (!stream.ok()) return stream.status();
  out.stream = *stream;
  auto token_ids = Bool(json, "return_token_ids");
  if (!token_ids.ok()) return token_ids.status();
  out.return_token_ids = *token_ids;
  if (const Json* options = Field(json, "stream_options"); options != nullptr) {
    if (!options->is_object()) return Invalid("stream_options", "must be an object");
    auto usage = Bool(*options, "include_usage");
    if (!usage.ok()) return Invalid("stream_options.include_usage", "must be true or false");
    out.include_usage = *usage;
  }
  if (!session.empty()) {
    out.generate.set_session_id(std::string(session));
    out.generate.set_create_session(true);
  }
  return out;
}

}  // namespace cairn::service::http
