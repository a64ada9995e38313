#include "service/metrics.h"

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
prometheus::Histogram* Histogram(prometheus::Registry& r, const std::string& name,
                                 const std::string& help, std::vector<double> buckets) {
  return &prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, buckets);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Create(const std::string& listen) {
  std::unique_ptr<Metrics> m(new Metrics());
  m->registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Registry& r = *m->registry_;
  m->requests_ok = Counter(r, "cairn_requests_ok_total", "Generate requests that finished normally");
  m->requests_failed = Counter(r, "cairn_requests_failed_total", "Generate requests that ended with an error, cancellation or deadline");
  m->prompt_tokens = Counter(r, "cairn_prompt_positions_total", "Prompt positions received");
  m->reused_tokens = Counter(r, "cairn_reused_positions_total", "Prompt positions served from cached state");
  m->recomputed_tokens = Counter(r, "cairn_recomputed_positions_total", "Prompt positions run through the model");
  m->generated_tokens = Counter(r, "cairn_generated_tokens_total", "Tokens generated and streamed");
  m->checkpoints_captured = Gauge(r, "cairn_checkpoints_captured", "Checkpoints captured (all models)");
  m->checkpoints_restored = Gauge(r, "cairn_checkpoints_restored", "Checkpoints restored (all models)");
  m->checkpoints_evicted = Gauge(r, "cairn_checkpoints_evicted", "Checkpoints evicted from RAM");
  m->store_ram_bytes = Gauge(r, "cairn_checkpoint_store_ram_bytes", "Checkpoint bytes held in RAM");
  m->store_disk_bytes = Gauge(r, "cairn_checkpoint_store_disk_bytes", "Checkpoint bytes on the disk tier");
  m->queue_depth = Gauge(r, "cairn_queue_depth", "Requests waiting for prompt processing");
  m->running_sequences = Gauge(r, "cairn_running_sequences", "Sequences decoding");
  m->sessions = Gauge(r, "cairn_sessions", "Live sessions");
  m->sequence_memory_bytes = Gauge(r, "cairn_sequence_memory_bytes",
                                   "Bytes of live sequence memory reserved (sessions and running requests)");
  m->time_to_first_token = Histogram(r, "cairn_time_to_first_token_seconds", "Time from request to first token",
                                     {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30});
  m->decode_tokens_per_second = Histogram(r, "cairn_decode_tokens_per_second", "Decode speed of one request",
                                          {1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500});
  m->batch_rows = Histogram(r, "cairn_decode_batch_rows", "Sequences per decode step",
                            {1, 2, 4, 8, 16, 32, 64, 128});
  if (!listen.empty()) {
    auto http = MetricsHttpServer::Create(listen, [registry = m->registry_] {
      return prometheus::TextSerializer().Serialize(registry->Collect());
    });
    if (!http.ok()) return http.status();
    m->http_ = std::move(*http);
  }
  return m;
}

Metrics::~Metrics() = default;

int Metrics::port() const { return http_ == nullptr ? 0 : http_->port(); }

std::string Metrics::Render() const {
  prometheus::TextSerializer s;
  return s.Serialize(registry_->Collect());
}

}  // namespace cairn::service
