// The Generate path's stream messages (cairn.v1.GenerateResponse) as an
// OpenAI reply: server-sent-event chunks while they come (stream = true),
// or one JSON object at the end; errors in OpenAI's error shape with the
// HTTP status of their code.
#ifndef CAIRN_SERVICE_HTTP_OPENAI_REPLY_H_
#define CAIRN_SERVICE_HTTP_OPENAI_REPLY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends/model/tokenizer.h"
#include "cairn/v1/inference.pb.h"
#include "nlohmann/json.hpp"
#include "service/http/openai_request.h"

namespace cairn::service::http {

// The HTTP status of a Generate status code: 400 invalid input, 401, 403,
// 404, 409 (a busy session, a taken id), 429 (RESOURCE_EXHAUSTED), 499 (the
// client cancelled), 501, 503 (draining, unavailable), 504, else 500.
int HttpStatusOf(absl::StatusCode code);
// The same, but 400 for a prompt beyond the model's context
// (IsContextLengthExceeded), as OpenAI answers it, and for a request that
// alone needs more than the whole memory budget (ExceedsWholeBudget).
int HttpStatusOf(const absl::Status& status);
// Worth retrying after a moment (answered with Retry-After and
// x-should-retry: true): a session busy with another request (ABORTED, as
// gRPC), a full server (RESOURCE_EXHAUSTED but a prompt beyond the
// context or a request beyond the whole budget), draining. False for the
// rest, which the openai SDKs would otherwise retry by their status (409,
// 5xx) in vain (x-should-retry: false).
bool IsRetryable(const absl::Status& status);
// {"error": {"message", "type", "param": null, "code"}} for `status`; the
// code is the status code's name in lower case, or OpenAI's
// "context_length_exceeded", or "request_exceeds_memory_budget"; the type
// follows `http_status` (0: HttpStatusOf(status)), so an answer whose HTTP
// status is not the status code's own (httplib's 413) is typed by it.
std::string ErrorJson(const absl::Status& status, int http_status = 0);

// One reply, fed the call's messages in order. Not thread-safe.
class OpenAiReply final {
 public:
  // `tokenizer` (may be null) names the top log-probabilities' tokens.
  // `created`: the reply's Unix time.
  OpenAiReply(const OpenAiRequest& request, const std::string& model, const Tokenizer* tokenizer, int64_t created);

  // A stream message: the server-sent events it makes (`data: {...}\n\n`
  // each; may be empty). Without streaming the reply accumulates instead.
  std::string Add(const v1::GenerateResponse& message);
  // The stream's end after the Finished message: the usage chunk (with
  // include_usage) and `data: [DONE]`.
  std::string StreamEnd() const;
  // The whole reply (non-streaming), once Finished was added.
  std::string Body() const;
  // A stream that failed after it began: the error as an event.
  static std::string StreamError(const absl::Status& status);

 private:
  bool chat() const { return request_.endpoint == OpenAiEndpoint::kChatCompletions; }
  // The chunk skeleton: id, object, created, model, and one choice.
  nlohmann::json Chunk(nlohmann::json delta, const char* finish_reason) const;
  std::string Event(const nlohmann::json& chunk) const;
  void AddToken(const v1::TokenDelta& token, nlohmann::json* delta);
  void AddPieces(const google::protobuf::RepeatedPtrField<v1::OutputPiece>& pieces, const std::string& raw,
                 nlohmann::json* delta);
  nlohmann::json Usage() const;
  nlohmann::json Logprobs() const;

  const OpenAiRequest& request_;
  const std::string model_;
  const Tokenizer* const tokenizer_;
  const int64_t created_;
  const std::string id_;
  bool parsed_ = false;  // the reply is parsed (PromptInfo.output_format set)
  bool role_sent_ = false;
  std::string content_, reasoning_;
  nlohmann::json tool_calls_ = nlohmann::json::array();
  nlohmann::json logprobs_ = nlohmann::json::array();  // chat entries, or completions' per-token records
  std::vector<int32_t> token_ids_;                     // every generated token (return_token_ids)
  size_t token_ids_sent_ = 0;                          // of them, those a streamed chunk carried
  std::string finish_reason_;
  v1::Usage usage_;
};

}  // namespace cairn::service::http

#endif  // CAIRN_SERVICE_HTTP_OPENAI_REPLY_H_
