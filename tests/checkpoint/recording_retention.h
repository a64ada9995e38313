// A retention policy for tests of what the checkpoint store tells its
// policy: least recently used first, refuses tail points, asks for misses,
// and records every event. The store calls it under its own lock, so it
// needs none; read `seen` only between store calls.
#ifndef CAIRN_TESTS_CHECKPOINT_RECORDING_RETENTION_H_
#define CAIRN_TESTS_CHECKPOINT_RECORDING_RETENTION_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/retention.h"

namespace cairn::checkpoint {

class RecordingRetention final : public RetentionPolicy {
 public:
  struct Seen {
    RetentionEvent event;
    uint64_t path_key;
    bool remembered;
    uint64_t request;
  };
  std::string name() const override { return "recording"; }
  double Score(const RetentionFacts& e, const RetentionClock& now) const override {
    (void)now;
    return static_cast<double>(e.last_use.tick);
  }
  bool Admit(const RetentionFacts& incoming, std::span<const RetentionFacts> victims,
             const RetentionClock& now) const override {
    (void)victims;
    (void)now;
    return incoming.reason != CaptureReason::kTail;
  }
  bool wants_misses() const override { return wants_misses_; }
  void Observe(RetentionEvent event, const RetentionFacts& e, const RetentionClock& now) override {
    seen.push_back({event, e.path_key, e.remembered, now.request});
  }
  // The events of `event` so far.
  std::vector<Seen> Of(RetentionEvent event) const {
    std::vector<Seen> out;
    for (const Seen& s : seen) {
      if (s.event == event) out.push_back(s);
    }
    return out;
  }

  bool wants_misses_ = true;
  std::vector<Seen> seen;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_TESTS_CHECKPOINT_RECORDING_RETENTION_H_
