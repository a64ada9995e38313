// The instruments a scheduler updates. They belong to the server's metrics
// (service/host/metrics.h), which hands the schedulers this view of them,
// so that scheduling depends on prometheus' instrument types and on nothing
// else of the host.
#ifndef CAIRN_SERVICE_SCHEDULING_SCHEDULER_METRICS_H_
#define CAIRN_SERVICE_SCHEDULING_SCHEDULER_METRICS_H_

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"

namespace cairn::service {

// Borrowed pointers, all set (a scheduler without metrics has no
// SchedulerMetrics at all). prometheus-cpp instruments are thread-safe.
struct SchedulerMetrics {
  prometheus::Counter* prompt_tokens = nullptr;  // prompt positions, reused or not
  prometheus::Counter* reused_tokens = nullptr;
  prometheus::Counter* recomputed_tokens = nullptr;
  prometheus::Counter* generated_tokens = nullptr;
  prometheus::Gauge* queue_depth = nullptr;        // admitted requests waiting
  prometheus::Gauge* running_sequences = nullptr;  // decoding
  prometheus::Histogram* time_to_first_token = nullptr;
  prometheus::Histogram* decode_tokens_per_second = nullptr;
  prometheus::Histogram* batch_rows = nullptr;   // decode rows per step
  prometheus::Histogram* inter_token = nullptr;  // between two tokens of one request
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SCHEDULING_SCHEDULER_METRICS_H_
