// What the scheduler reports of one Generate request, in its own terms (no
// API types: service/api/generate_response.h spells them out as the API's
// messages).
#ifndef CAIRN_SERVICE_SCHEDULING_GENERATE_EVENTS_H_
#define CAIRN_SERVICE_SCHEDULING_GENERATE_EVENTS_H_

#include <cstdint>
#include <string>
#include <variant>

#include "checkpoint/engine.h"
#include "service/scheduling/sampler.h"

namespace cairn::service {

// The prompt is in the sequence: what was reused and what recomputed.
struct PromptProcessed {
  checkpoint::PrefillStats stats;
  std::string session_id;
};

// One sampled token, streamed as it is drawn.
struct TokenGenerated {
  SampledToken token;
  bool logprobs = false;  // the client asked for logprob or top_logprobs
  std::string text;       // the text it releases ("": none yet, or held back)
};

enum class FinishReason { kLength, kEndOfGeneration, kStopToken, kStopString, kContextFull };

// The request completed: why, what it cost and how long each part took.
struct GenerationFinished {
  FinishReason reason = FinishReason::kLength;
  std::string matched_stop;  // the stop string or stop token id that ended it
  std::string text;          // text held back until the end (stop-string lookahead)
  checkpoint::PrefillStats stats;
  int32_t completion_tokens = 0;
  double queue_seconds = 0;
  double prefill_seconds = 0;
  double time_to_first_token_seconds = 0;  // 0: no token
  double decode_seconds = 0;
  double decode_tokens_per_second = 0;  // 0: fewer than two tokens
};

using GenerateEvent = std::variant<PromptProcessed, TokenGenerated, GenerationFinished>;

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SCHEDULING_GENERATE_EVENTS_H_
