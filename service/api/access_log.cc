#include "service/api/access_log.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "service/host/log.h"

namespace cairn::service {
namespace {

std::string Ms(double seconds) { return absl::StrFormat("%.1f", seconds * 1e3); }

// " code=... duration_ms=...[ error=...]": how every line ends.
std::string Outcome(const absl::Status& status, double seconds) {
  std::string out = absl::StrCat(" code=", absl::StatusCodeToString(status.code()), " duration_ms=", Ms(seconds));
  if (!status.ok()) absl::StrAppend(&out, " error=", LogValue(status.message()));
  return out;
}

}  // namespace

void RecordGenerate(Metrics* metrics, const v1::GenerateRequest& req, const GenerateTrace& trace,
                    const absl::Status& status, double seconds) {
  if (metrics != nullptr) {
    metrics->CountRequest(trace.method, trace.model, status.code(), /*generation=*/true);
    metrics->request_duration->Observe(seconds);
    if (trace.timings.has_value()) {
      metrics->queue_wait->Observe(trace.timings->queue_seconds());
      metrics->prefill_duration->Observe(trace.timings->prefill_seconds());
    }
  }
  if (!LogEnabled(LogLevel::kInfo)) return;
  // The model as named by a served model, else as the client sent it.
  const std::string& model = trace.model.empty() ? req.model() : trace.model;
  std::string line = absl::StrCat("access method=", trace.method, " model=", LogValue(model),
                                  " session=", req.session_id().empty() ? "-" : LogValue(req.session_id()));
  if (trace.prefilled) {
    absl::StrAppend(&line, " prompt=", trace.stats.prompt_symbols, " reused=", trace.stats.reused,
                    " recomputed=", trace.stats.recomputed);
  }
  absl::StrAppend(&line, " tokens=", trace.tokens);
  if (trace.timings.has_value()) {
    if (trace.tokens > 0) absl::StrAppend(&line, " ttft_ms=", Ms(trace.timings->time_to_first_token_seconds()));
    absl::StrAppend(&line, " queue_ms=", Ms(trace.timings->queue_seconds()),
                    " prefill_ms=", Ms(trace.timings->prefill_seconds()));
  }
  LogLine(LogLevel::kInfo, line + Outcome(status, seconds));
}

void RecordSessionControl(Metrics* metrics, const v1::SessionRequest& req, const absl::Status& status, double seconds) {
  if (metrics != nullptr) metrics->CountRequest("SessionControl", "", status.code());
  if (!LogEnabled(LogLevel::kInfo)) return;
  // The operation is the oneof's field name; every operation but list has a
  // session_id.
  std::string op = "none", session = "-";
  if (const google::protobuf::FieldDescriptor* f = req.GetDescriptor()->FindFieldByNumber(req.op_case())) {
    op = f->name();
    const google::protobuf::Message& m = req.GetReflection()->GetMessage(req, f);
    if (const google::protobuf::FieldDescriptor* id = m.GetDescriptor()->FindFieldByName("session_id");
        id != nullptr && id->type() == google::protobuf::FieldDescriptor::TYPE_STRING) {
      const std::string v = m.GetReflection()->GetString(m, id);
      if (!v.empty()) session = LogValue(v);
    }
  }
  LogLine(LogLevel::kInfo,
          absl::StrCat("access method=SessionControl op=", op, " session=", session, Outcome(status, seconds)));
}

}  // namespace cairn::service
