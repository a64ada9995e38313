// OfflineRetention: the offline reference of bench/pressure, a retention
// policy that knows the future (Belady's MIN, adapted to checkpoints of
// different sizes and values). It is given the reference stream of an
// unlimited store: for every checkpoint path, the prompts whose prefill
// restored it when nothing was ever evicted (recorded by ReferenceRecorder on
// a first run of the same trace with the same placement). Then it admits a
// checkpoint only if its path is restored again later, and evicts first the
// one whose next restore is furthest away per unit of value per byte:
//   score = cost / (bytes * (next restore - now)).
// Not a proof of optimality (MIN is optimal for equal sizes and for a fixed
// reference stream; sizes differ here, and a store that lacks a checkpoint
// makes the engine fall back to a shallower one the stream never named), but
// a policy with perfect knowledge of which paths are needed and when.
#ifndef CAIRN_BENCH_OFFLINE_RETENTION_H_
#define CAIRN_BENCH_OFFLINE_RETENTION_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/retention.h"

namespace cairn::bench {

// path key -> ascending request clocks (CheckpointStore::BeginRequest counts)
// at which a checkpoint of that path was restored.
using ReferenceStream = std::map<uint64_t, std::vector<uint64_t>>;

// What happened to the checkpoints of one capture reason in a run.
struct ReasonTally {
  uint64_t added = 0;
  double added_bytes = 0;
  uint64_t uses = 0;
  double credited = 0;  // positions the uses saved beyond the best plan without them
  uint64_t removed_unused = 0;
  uint64_t missed = 0;  // prompts that would have restored one pushed out or refused
};

// Wraps a policy and records every restore into a ReferenceStream, and what
// happened per capture reason.
class ReferenceRecorder final : public checkpoint::RetentionPolicy {
 public:
  explicit ReferenceRecorder(std::shared_ptr<checkpoint::RetentionPolicy> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  double Score(const checkpoint::RetentionFacts& e, const checkpoint::RetentionClock& now) const override {
    return inner_->Score(e, now);
  }
  size_t ChooseVictim(std::span<const checkpoint::RetentionFacts> candidates,
                      const checkpoint::RetentionClock& now) const override {
    return inner_->ChooseVictim(candidates, now);
  }
  bool Admit(const checkpoint::RetentionFacts& incoming, std::span<const checkpoint::RetentionFacts> victims,
             const checkpoint::RetentionClock& now) const override {
    return inner_->Admit(incoming, victims, now);
  }
  bool wants_branches() const override { return inner_->wants_branches(); }
  bool wants_misses() const override { return inner_->wants_misses(); }
  void Observe(checkpoint::RetentionEvent event, const checkpoint::RetentionFacts& e,
               const checkpoint::RetentionClock& now) override;

  const ReferenceStream& stream() const { return stream_; }
  // The working set: the most bytes ever held at once by checkpoints that
  // were still to be restored (from their capture to their last restore).
  size_t NeededPeak() const;
  const std::array<ReasonTally, checkpoint::kCaptureReasons>& tally() const { return tally_; }

 private:
  std::shared_ptr<checkpoint::RetentionPolicy> inner_;
  ReferenceStream stream_;
  std::array<ReasonTally, checkpoint::kCaptureReasons> tally_{};
  struct Lifetime {
    uint64_t added = 0, last_use = 0;  // request clocks
    size_t bytes = 0;
    bool used = false;
  };
  std::map<checkpoint::CheckpointId, Lifetime> lifetimes_;
};

class OfflineRetention final : public checkpoint::RetentionPolicy {
 public:
  explicit OfflineRetention(std::shared_ptr<const ReferenceStream> future) : future_(std::move(future)) {}
  std::string name() const override { return "offline"; }
  double Score(const checkpoint::RetentionFacts& e, const checkpoint::RetentionClock& now) const override;
  bool Admit(const checkpoint::RetentionFacts& incoming, std::span<const checkpoint::RetentionFacts> victims,
             const checkpoint::RetentionClock& now) const override;

 private:
  // The first restore of `path_key` after `now`; 0 when there is none.
  uint64_t NextReference(uint64_t path_key, uint64_t now) const;

  std::shared_ptr<const ReferenceStream> future_;
};

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_OFFLINE_RETENTION_H_
