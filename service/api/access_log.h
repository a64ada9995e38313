// What the server records about each finished RPC: one access-log line (at
// info level; see log.h) and the request metrics (see metrics.h).
//
//   cairn: access method=Generate model=demo-chat session=- code=OK prompt=12 reused=0
//          recomputed=12 tokens=8 ttft_ms=3.1 queue_ms=0.1 prefill_ms=2.2 duration_ms=9.8
//   cairn: access method=POST/v1/chat/completions model=demo-chat session=- code=OK ...
//   cairn: access method=SessionControl op=rewind session=ab12 code=FAILED_PRECONDITION
//          duration_ms=0.1 error="cannot rewind to 99 tokens: the session has 20"
//
// (one line each). Values are logfmt: client text is quoted and escaped.
#ifndef CAIRN_SERVICE_API_ACCESS_LOG_H_
#define CAIRN_SERVICE_API_ACCESS_LOG_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "cairn/v1/inference.pb.h"
#include "checkpoint/engine.h"
#include "service/host/metrics.h"

namespace cairn::service {

// What one Generate call did, filled by the handler as far as the call got.
struct GenerateTrace {
  std::string method = "Generate";  // the transport's route (GenerateSink::Method)
  std::string model;                // the served model's name; "" when the call named none served
  bool prefilled = false;           // the prompt was processed (stats are valid)
  checkpoint::PrefillStats stats;
  int64_t tokens = 0;                  // token deltas written to the client
  std::optional<v1::Timings> timings;  // from the final message, when the call finished normally
};

// Logs the call and counts it (`metrics` may be null). `seconds`: the
// call's duration as the handler saw it.
void RecordGenerate(Metrics* metrics, const v1::GenerateRequest& req, const GenerateTrace& trace,
                    const absl::Status& status, double seconds);
void RecordSessionControl(Metrics* metrics, const v1::SessionRequest& req, const absl::Status& status, double seconds);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_ACCESS_LOG_H_
