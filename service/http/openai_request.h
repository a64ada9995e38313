// An OpenAI request body (POST /v1/chat/completions, POST /v1/completions)
// as the cairn.v1.GenerateRequest the Generate path runs, so the HTTP door
// validates nothing twice and generates nothing its own way: what the body
// can say in cairn's terms is translated, what it cannot is refused here
// with a precise INVALID_ARGUMENT (the HTTP door's 400) instead of being
// silently ignored. Fields that change nothing in a reply (`user`,
// `metadata`, `store`, ...) are accepted and ignored. Pure functions.
#ifndef CAIRN_SERVICE_HTTP_OPENAI_REQUEST_H_
#define CAIRN_SERVICE_HTTP_OPENAI_REQUEST_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "cairn/v1/inference.pb.h"

namespace cairn::service::http {

enum class OpenAiEndpoint { kChatCompletions, kCompletions };

// A translated request and what shapes its HTTP reply.
struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kChatCompletions;
  v1::GenerateRequest generate;
  bool stream = false;         // server-sent events
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
  bool logprobs = false;       // report log-probabilities in the reply
  // vLLM's extension `return_token_ids`: each choice also carries the ids
  // of its generated tokens (`token_ids`), so a client that resends the
  // conversation as token ids sends exactly what the model produced.
  bool return_token_ids = false;
};

// `body`: the request's JSON. `session`: the X-Cairn-Session header's value
// ("" when absent): the request then runs on that session, created when
// new, with the whole conversation (the server finds where it diverges).
// INVALID_ARGUMENT for malformed JSON, a missing or mistyped field, n != 1,
// a value out of range, or an option cairn does not implement (named).
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, std::string_view body,
                                                 std::string_view session);

}  // namespace cairn::service::http

#endif  // CAIRN_SERVICE_HTTP_OPENAI_REQUEST_H_
