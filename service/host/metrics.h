// Prometheus metrics of the service. The registry always exists (tests read
// it in process); the HTTP endpoint (metrics_http.h) is started only with
// --metrics-listen.
#ifndef CAIRN_SERVICE_HOST_METRICS_H_
#define CAIRN_SERVICE_HOST_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "service/host/metrics_http.h"
#include "service/scheduling/scheduler_metrics.h"

namespace cairn::service {

// Thread-safe (prometheus-cpp metrics are).
class Metrics final {
 public:
  // `listen` "host:port" starts an HTTP endpoint serving /metrics; empty:
  // none. UNAVAILABLE when the address cannot be bound (port in use),
  // INVALID_ARGUMENT when it is malformed.
  static absl::StatusOr<std::unique_ptr<Metrics>> Create(const std::string& listen);
  ~Metrics();

  // Bound port of the HTTP endpoint (0 without one).
  int port() const;
  std::string Render() const;  // text exposition format, for tests
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // One finished RPC: cairn_requests_total{method, model, code} (`model`
  // only a served model's name, "" otherwise, so clients cannot grow the
  // label set), and for a generation (Generate, or an HTTP route that runs
  // one) cairn_requests_ok_total or cairn_requests_failed_total.
  void CountRequest(const std::string& method, const std::string& model, absl::StatusCode code,
                    bool generation = false);
  // Sets a counter that mirrors a running total kept elsewhere (the
  // engines' checkpoint counts) to `total`; it never goes down.
  static void AdvanceTo(prometheus::Counter* counter, double total);

  // What the schedulers update (prompt, reuse and token counts, queue and
  // batch figures, token latencies).
  SchedulerMetrics scheduler;
  prometheus::Counter* requests_ok;
  prometheus::Counter* requests_failed;
  prometheus::Counter* checkpoints_captured;  // engine totals, refreshed periodically (AdvanceTo)
  prometheus::Counter* checkpoints_restored;
  prometheus::Counter* checkpoints_evicted;
  prometheus::Gauge* store_ram_bytes;
  prometheus::Gauge* store_disk_bytes;
  prometheus::Gauge* sessions;
  prometheus::Gauge* sequence_memory_bytes;  // reserved in the live-memory budget
  prometheus::Gauge* memory_budget_bytes;    // that budget (--memory-budget; 0: unlimited)
  prometheus::Gauge* compute_threads;        // per model (--threads, or the CPU quota and affinity)
  prometheus::Histogram* request_duration;   // Generate, from the call's start to its status
  prometheus::Histogram* queue_wait;         // request received -> prompt processing starts
  prometheus::Histogram* prefill_duration;   // prompt processing

 private:
  Metrics() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_by_code_ = nullptr;
  std::unique_ptr<MetricsHttpServer> http_;  // declared last: stopped first
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_HOST_METRICS_H_
