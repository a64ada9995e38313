#include "service/host/metrics.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "prometheus/text_serializer.h"

namespace cairn::service {
namespace {

prometheus::Counter* Counter(prometheus::Registry& r, const std::string& name, const std::string& help) {
  return &prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}
prometheus::Gauge* Gauge(prometheus::Registry& r, const std::string& name, const std::string& help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}
prometheus::Histogram* Histogram(prometheus::Registry& r, const std::string& name, const std::string& help,
                                 std::vector<double> buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, buckets);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Create(const std::string& listen) {
  std::unique_ptr<Metrics> m(new Metrics());
  m->registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Registry& r = *m->registry_;
  m->requests_ok = Counter(r, "cairn_requests_ok_total", "Generate requests that finished normally");
  m->requests_failed = Counter(r, "cairn_requests_failed_total",
                               "Generate requests refused or ended with an error, cancellation or deadline");
  m->scheduler.prompt_tokens = Counter(r, "cairn_prompt_positions_total", "Prompt positions received");
  m->scheduler.reused_tokens = Counter(r, "cairn_reused_positions_total", "Prompt positions served from cached state");
  m->scheduler.recomputed_tokens =
      Counter(r, "cairn_recomputed_positions_total", "Prompt positions run through the model");
  m->scheduler.generated_tokens = Counter(r, "cairn_generated_tokens_total", "Tokens generated and streamed");
  m->requests_by_code_ = &prometheus::BuildCounter()
                              .Name("cairn_requests_total")
                              .Help("RPCs by method, model (a served model's name, else empty) and status code")
                              .Register(r);
  m->checkpoints_captured = Counter(r, "cairn_checkpoints_captured_total", "Checkpoints captured (all models)");
  m->checkpoints_restored = Counter(r, "cairn_checkpoints_restored_total", "Checkpoints restored (all models)");
  m->checkpoints_evicted = Counter(r, "cairn_checkpoints_evicted_total", "Checkpoints evicted from RAM");
  m->store_ram_bytes = Gauge(r, "cairn_checkpoint_store_ram_bytes", "Checkpoint bytes held in RAM");
  m->store_disk_bytes = Gauge(r, "cairn_checkpoint_store_disk_bytes", "Checkpoint bytes on the disk tier");
  m->scheduler.queue_depth = Gauge(r, "cairn_queue_depth", "Requests waiting for prompt processing");
  m->scheduler.running_sequences = Gauge(r, "cairn_running_sequences", "Sequences decoding");
  m->sessions = Gauge(r, "cairn_sessions", "Live sessions");
  m->sequence_memory_bytes =
      Gauge(r, "cairn_sequence_memory_bytes", "Bytes of live sequence memory reserved (sessions and running requests)");
  m->memory_budget_bytes =
      Gauge(r, "cairn_memory_budget_bytes", "Bytes of live sequence memory allowed (--memory-budget; 0: unlimited)");
  m->compute_threads =
      Gauge(r, "cairn_compute_threads", "Compute threads per model (--threads, or the CPU quota and affinity)");
  m->scheduler.time_to_first_token =
      Histogram(r, "cairn_time_to_first_token_seconds", "Time from request to first token",
                {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30});
  m->scheduler.decode_tokens_per_second = Histogram(r, "cairn_decode_tokens_per_second", "Decode speed of one request",
                                                    {1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500});
  m->scheduler.batch_rows =
      Histogram(r, "cairn_decode_batch_rows", "Sequences per decode step", {1, 2, 4, 8, 16, 32, 64, 128});
  m->request_duration = Histogram(r, "cairn_request_duration_seconds", "Generate calls, start to status (any status)",
                                  {0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300});
  m->queue_wait = Histogram(r, "cairn_queue_wait_seconds", "Time a request waited before its prompt was processed",
                            {0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10});
  m->prefill_duration = Histogram(r, "cairn_prefill_seconds", "Prompt processing time of a request",
                                  {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30});
  m->scheduler.inter_token = Histogram(r, "cairn_inter_token_latency_seconds", "Time between two tokens of one request",
                                       {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1});
  if (!listen.empty()) {
    auto http = MetricsHttpServer::Create(
        listen, [registry = m->registry_] { return prometheus::TextSerializer().Serialize(registry->Collect()); });
    if (!http.ok()) return http.status();
    m->http_ = std::move(*http);
  }
  return m;
}

Metrics::~Metrics() = default;

void Metrics::CountRequest(const std::string& method, const std::string& model, absl::StatusCode code,
                           bool generation) {
  requests_by_code_->Add({{"method", method}, {"model", model}, {"code", absl::StatusCodeToString(code)}}).Increment();
  if (!generation) return;
  (code == absl::StatusCode::kOk ? requests_ok : requests_failed)->Increment();
}

void Metrics::AdvanceTo(prometheus::Counter* counter, double total) {
  const double delta = total - counter->Value();
  if (delta > 0) counter->Increment(delta);
}

int Metrics::port() const { return http_ == nullptr ? 0 : http_->port(); }

std::string Metrics::Render() const {
  prometheus::TextSerializer s;
  return s.Serialize(registry_->Collect());
}

}  // namespace cairn::service
