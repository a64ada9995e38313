// SequenceRegistry: an engine's live sequences. It gives each its id (in the
// prefix index's id space, apart from the store's ids), finds one by id for a
// prefill that copies it (ReusePlanner), counts them (they share the store's
// budget), and publishes each in the prefix index at its history, so that
// other sequences of its tenant can start from it.
//
// Thread-safe: one internal mutex for the registry, taken after any sequence
// mutex and held briefly (nothing is locked under it); Publish runs under the
// published sequence's mutex.
#ifndef CAIRN_CHECKPOINT_SEQUENCE_REGISTRY_H_
#define CAIRN_CHECKPOINT_SEQUENCE_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "backends/memory.h"
#include "checkpoint/prefix_index.h"
#include "checkpoint/sequence_state.h"

namespace cairn::checkpoint {

class SequenceRegistry final {
 public:
  // Live sequence ids share the index's id space with store ids (which count
  // up from 1): the top bits keep them apart.
  static constexpr uint64_t kIdBase = uint64_t{1} << 62;
  static bool IsLiveId(uint64_t id) { return id >= kIdBase; }

  // `index` must outlive this. `publish`: whether sequences enter the index
  // at all (checkpointing on).
  SequenceRegistry(PrefixIndex& index, bool publish) : index_(index), publish_(publish) {}

  // A new sequence of `tenant` on `memory`, with its id, registered.
  std::shared_ptr<SequenceState> Add(const std::string& tenant, std::unique_ptr<SequenceMemory> memory);
  // Takes the sequence out of the registry and the index.
  void Remove(uint64_t live_id);
  // The live sequence with this id; null when gone.
  std::shared_ptr<SequenceState> Find(uint64_t live_id) const;
  size_t size() const;

  // Enters the sequence in the index at its history (replacing its earlier
  // entry), when publishing and its history is not empty.
  void Publish(SequenceState& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Takes the sequence's entry out of the index (it stays registered).
  void Unpublish(uint64_t live_id) { index_.Remove(live_id); }

 private:
  PrefixIndex& index_;
  const bool publish_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, std::weak_ptr<SequenceState>> live_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_SEQUENCE_REGISTRY_H_
