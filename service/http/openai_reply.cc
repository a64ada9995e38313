#include "service/http/openai_reply.h"

#include <random>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "service/api/status.h"
#include "service/host/memory_budget.h"

namespace cairn::service::http {
namespace {

using Json = nlohmann::json;

// OpenAI's error type for an HTTP status.
const char* ErrorType(int http_status) {
  switch (http_status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:  // a body beyond the limit: the request as sent can never pass
      return "invalid_request_error";
    case 409:
      return "conflict_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable";
    default:
      return "server_error";
  }
}

const char* FinishReasonName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
    case v1::FINISH_REASON_CONTEXT_FULL:
      return "length";
    case v1::FINISH_REASON_TOOL_CALLS:
      return "tool_calls";
    default:
      return "stop";
  }
}

// "chatcmpl-" or "cmpl-" and 24 random alphanumerics, as OpenAI's ids.
std::string ReplyId(bool chat) {
  static constexpr std::string_view kChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = chat ? "chatcmpl-" : "cmpl-";
  for (int i = 0; i < 24; ++i) id += kChars[rng() % kChars.size()];
  return id;
}

// A token's text for logprobs and its bytes (the text is dumped with
// invalid UTF-8 replaced, since JSON text must be UTF-8; `bytes` keeps them).
Json TokenEntry(std::string_view piece, float logprob) {
  Json bytes = Json::array();
  for (unsigned char c : piece) bytes.push_back(c);
  return Json{{"token", std::string(piece)}, {"logprob", logprob}, {"bytes", std::move(bytes)}};
}

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

namespace {

// RESOURCE_EXHAUSTED that no wait cures: the request as sent can never fit
// (a prompt beyond the context, or beyond the whole memory budget).
bool NeverFits(const absl::Status& status) { return IsContextLengthExceeded(status) || ExceedsWholeBudget(status); }

}  // namespace

int HttpStatusOf(const absl::Status& status) { return NeverFits(status) ? 400 : HttpStatusOf(status.code()); }

bool IsRetryable(const absl::Status& status) {
  const absl::StatusCode code = status.code();
  return code == absl::StatusCode::kAborted || code == absl::StatusCode::kUnavailable ||
         (code == absl::StatusCode::kResourceExhausted && !NeverFits(status));
}

std::string ErrorJson(const absl::Status& status, int http_status) {
  std::string code = IsContextLengthExceeded(status) ? "context_length_exceeded"
                     : ExceedsWholeBudget(status)    ? "request_exceeds_memory_budget"
                                                     : absl::AsciiStrToLower(absl::StatusCodeToString(status.code()));
  const Json error = {{"error",
                       {{"message", std::string(status.message())},
                        {"type", ErrorType(http_status != 0 ? http_status : HttpStatusOf(status))},
                        {"param", nullptr},
                        {"code", std::move(code)}}}};
  return Dump(error);
}

OpenAiReply::OpenAiReply(const OpenAiRequest& request, const std::string& model, const Tokenizer* tokenizer,
                         int64_t created)
    : request_(request), model_(model), tokenizer_(tokenizer), created_(created), id_(ReplyId(chat())) {}

Json OpenAiReply::Chunk(Json delta, const char* finish_reason) const {
  Json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (finish_reason != nullptr) choice["finish_reason"] = finish_reason;
  if (chat()) {
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = delta.value("content", "");
  }
  return {{"id", id_},
          {"object", chat() ? "chat.completion.chunk" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", Json::array({std::move(choice)})}};
}

std::string OpenAiReply::Event(const Json& chunk) const { return absl::StrCat("data: ", Dump(chunk), "\n\n"); }

void OpenAiReply::AddPieces(const google::protobuf::RepeatedPtrField<v1::OutputPiece>& pieces, const std::string& raw,
                            Json* delta) {
  std::string content, reasoning;
  if (parsed_ && chat()) {
    for (const v1::OutputPiece& p : pieces) (p.kind() == v1::OUTPUT_KIND_REASONING ? reasoning : content) += p.text();
  } else {
    content = raw;
  }
  content_ += content;
  reasoning_ += reasoning;
  if (!content.empty()) (*delta)["content"] = content;
  if (!reasoning.empty()) (*delta)["reasoning_content"] = reasoning;
}

void OpenAiReply::AddToken(const v1::TokenDelta& token, Json* delta) {
  AddPieces(token.pieces(), token.text(), delta);
  if (!request_.logprobs || !token.has_logprob()) return;
  auto piece = [&](int32_t id) -> std::string {
    return tokenizer_ != nullptr ? tokenizer_->TokenPiece(id, true) : absl::StrCat("<", id, ">");
  };
  Json entry = TokenEntry(token.text(), token.logprob());
  Json top = Json::array();
  for (const v1::TopLogprob& t : token.top_logprobs()) top.push_back(TokenEntry(piece(t.id()), t.logprob()));
  entry["top_logprobs"] = std::move(top);
  logprobs_.push_back(std::move(entry));
}

std::string OpenAiReply::Add(const v1::GenerateResponse& message) {
  Json delta = Json::object();
  const char* finish = nullptr;
  const size_t logprobs_before = logprobs_.size();
  switch (message.event_case()) {
    case v1::GenerateResponse::kPrompt:
      parsed_ = !message.prompt().output_format().empty();
      if (!chat() || role_sent_) return "";
      role_sent_ = true;
      delta = {{"role", "assistant"}, {"content", ""}};
      break;
    case v1::GenerateResponse::kToken:
      AddToken(message.token(), &delta);
      token_ids_.push_back(message.token().id());
      // A token whose text is held back (an unfinished character) still
      // streams its id when ids are asked for.
      if (delta.empty() && logprobs_.size() == logprobs_before && !request_.return_token_ids) return "";
      break;
    case v1::GenerateResponse::kToolCall: {
      const v1::ToolCall& call = message.tool_call();
      Json entry = {{"index", tool_calls_.size()},
                    {"id", call.id()},
                    {"type", "function"},
                    {"function", {{"name", call.name()}, {"arguments", call.arguments()}}}};
      tool_calls_.push_back(entry);
      delta["tool_calls"] = Json::array({std::move(entry)});
      break;
    }
    case v1::GenerateResponse::kFinished:
      AddPieces(message.finished().pieces(), message.finished().text(), &delta);
      finish_reason_ = FinishReasonName(message.finished().reason());
      finish = finish_reason_.c_str();
      usage_ = message.finished().usage();
      break;
    default:
      return "";
  }
  if (!request_.stream) return "";
  Json chunk = Chunk(std::move(delta), finish);
  if (request_.return_token_ids) {
    chunk["choices"][0]["token_ids"] =
        std::vector<int32_t>(token_ids_.begin() + static_cast<std::ptrdiff_t>(token_ids_sent_), token_ids_.end());
    token_ids_sent_ = token_ids_.size();
  }
  if (logprobs_.size() > logprobs_before) {
    Json step = Json::array({logprobs_.back()});
    chunk["choices"][0]["logprobs"] = chat() ? Json{{"content", step}} : Json::object();
    if (!chat()) {
      const Json& e = logprobs_.back();
      Json top = Json::object();
      for (const Json& t : e["top_logprobs"]) top[t["token"].get<std::string>()] = t["logprob"];
      chunk["choices"][0]["logprobs"] = {
          {"tokens", {e["token"]}}, {"token_logprobs", {e["logprob"]}}, {"top_logprobs", {top}}};
    }
  }
  return Event(chunk);
}

Json OpenAiReply::Usage() const {
  return {{"prompt_tokens", usage_.prompt_tokens()},
          {"completion_tokens", usage_.completion_tokens()},
          {"total_tokens", usage_.prompt_tokens() + usage_.completion_tokens()},
          {"prompt_tokens_details", {{"cached_tokens", usage_.reused_tokens()}}}};
}

Json OpenAiReply::Logprobs() const {
  if (!request_.logprobs) return nullptr;
  if (chat()) return {{"content", logprobs_}};
  Json tokens = Json::array(), values = Json::array(), tops = Json::array();
  for (const Json& e : logprobs_) {
    tokens.push_back(e["token"]);
    values.push_back(e["logprob"]);
    Json top = Json::object();
    for (const Json& t : e["top_logprobs"]) top[t["token"].get<std::string>()] = t["logprob"];
    tops.push_back(std::move(top));
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}};
}

std::string OpenAiReply::StreamEnd() const {
  std::string out;
  if (request_.include_usage) {
    Json chunk = Chunk(Json::object(), nullptr);
    chunk["choices"] = Json::array();
    chunk["usage"] = Usage();
    out = Event(chunk);
  }
  return out + "data: [DONE]\n\n";
}

std::string OpenAiReply::Body() const {
  Json choice = {{"index", 0}, {"logprobs", Logprobs()}, {"finish_reason", finish_reason_}};
  if (chat()) {
    Json message = {{"role", "assistant"}, {"content", content_}};
    if (!reasoning_.empty()) message["reasoning_content"] = reasoning_;
    if (!tool_calls_.empty()) {
      Json calls = tool_calls_;
      for (Json& c : calls) c.erase("index");
      message["tool_calls"] = std::move(calls);
      // OpenAI's shape: a turn that only calls tools has null content.
      if (content_.empty()) message["content"] = nullptr;
    }
    choice["message"] = std::move(message);
  } else {
    choice["text"] = content_;
  }
  if (request_.return_token_ids) choice["token_ids"] = token_ids_;
  const Json body = {{"id", id_},
                     {"object", chat() ? "chat.completion" : "text_completion"},
                     {"created", created_},
                     {"model", model_},
                     {"choices", Json::array({std::move(choice)})},
                     {"usage", Usage()}};
  return Dump(body);
}

std::string OpenAiReply::StreamError(const absl::Status& status) {
  return absl::StrCat("data: ", ErrorJson(status), "\n\n");
}

}  // namespace cairn::service::http
