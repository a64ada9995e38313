// EvictionMemory: what the checkpoint store remembers of the checkpoints it
// pushed out or refused, so that its retention policy learns of the uses they
// would have had (a policy learning only from what it kept never sees the
// worth of what it keeps leaving out). Each remembered checkpoint ends in
// exactly one outcome told to the policy: kMissed (a prompt would have
// resumed from it) or kForgotten (none did within kMissHorizon prompts, or
// it was pushed out of this memory's bound).
//
// Keyed by path key (PathKey(tenant, symbols)): one per path, the older one
// (what a store that had kept it would hold). Not thread-safe: the store
// guards it with its own mutex, and calls the policy, as every policy call,
// under that lock.
#ifndef CAIRN_CHECKPOINT_EVICTION_MEMORY_H_
#define CAIRN_CHECKPOINT_EVICTION_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <utility>

#include "checkpoint/retention.h"

namespace cairn::checkpoint {

class EvictionMemory final {
 public:
  // Prompts (RetentionClock::request) a checkpoint is remembered: a use later
  // than that is no longer told as a miss, and the policy hears it was
  // forgotten (unused this long). Short, because a miss is told at once and a
  // forgetting only this late: with a long memory the misses would outweigh
  // the forgettings still to come.
  static constexpr uint64_t kMissHorizon = 8;
  // At most this many are remembered; the oldest beyond it are forgotten.
  static constexpr size_t kCapacity = 4096;

  // `policy` is told the outcomes; it must outlive this memory.
  explicit EvictionMemory(RetentionPolicy& policy) : policy_(policy) {}

  // Remembers a checkpoint pushed out or refused, when the policy
  // wants_misses(), it has a path key and none on its path is remembered
  // already; then sets f.remembered (before the policy hears of its
  // removal or refusal) and forgets what is too old at `now`.
  void Remember(RetentionFacts& f, const RetentionClock& now);
  // Forgets (kForgotten) the ones kMissHorizon prompts old at `now`, and the
  // oldest beyond kCapacity.
  void ForgetOld(const RetentionClock& now);
  // A new checkpoint on `path_key`: the remembered one's outcome is
  // unknowable now, so it is dropped without one.
  void Drop(uint64_t path_key) { ghosts_.erase(path_key); }
  bool empty() const { return ghosts_.empty(); }
  // `path_keys`: PathKey of each prefix of a prompt past the point where its
  // restore resumed, deepest first; at the first `full_only` of them only a
  // full snapshot could have served. The first remembered one that could
  // have served is told as kMissed and forgotten.
  void NoteMissed(std::span<const uint64_t> path_keys, size_t full_only, const RetentionClock& now);

 private:
  struct Ghost {
    RetentionFacts facts;
    RetentionClock gone;
    uint64_t serial = 0;
  };
  // Tells the policy the remembered one on `path_key` is forgotten and
  // forgets it; no-op when none.
  void Forget(uint64_t path_key, const RetentionClock& now);

  RetentionPolicy& policy_;
  std::unordered_map<uint64_t, Ghost> ghosts_;
  // (path key, serial), oldest first; an entry whose serial is no longer its
  // key's was forgotten (or replaced) already.
  std::deque<std::pair<uint64_t, uint64_t>> order_;
  uint64_t serial_ = 0;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_EVICTION_MEMORY_H_
