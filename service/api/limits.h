// The bounds the API puts on one request's size (what a client may make the
// server parse, hold or match), and on Generate calls at once.
#ifndef CAIRN_SERVICE_API_LIMITS_H_
#define CAIRN_SERVICE_API_LIMITS_H_

#include <cstdint>

namespace cairn::service {

struct ServiceLimits {
  int32_t max_concurrent_generate = 256;
  int32_t max_prompt_parts = 4096;  // also chat messages
  int32_t max_stop_strings = 16;
  int32_t max_stop_string_bytes = 256;
  int32_t max_stop_tokens = 64;
  int32_t max_text_bytes = 4 << 20;  // all the text parts, or all the messages' contents
  // Tokens a Generate produces when stop.max_tokens is unset
  // (--max-tokens-default), and the most one may produce
  // (--max-tokens-limit): a larger max_tokens is capped to it, and the reply
  // then ends with FINISH_REASON_LENGTH. The limit is the server's own bound
  // on the tokens a stream generates ahead of a client that stopped
  // reading: a server stream has no read acknowledgement, and gRPC completes
  // writes as long as the client's HTTP/2 window takes them, which default
  // clients grow to megabytes (see inference.proto, Inference.Generate).
  int32_t default_max_tokens = 256;
  int32_t max_tokens_limit = 16384;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_LIMITS_H_
