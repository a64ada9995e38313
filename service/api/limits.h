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
  int32_t max_text_bytes = 4 << 20;  // a text part, or all the messages' contents
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_LIMITS_H_
