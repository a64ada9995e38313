// SequenceState: what the engine keeps of one live sequence (a Sequence's
// insides, shared by the parts of the engine that work on it), and the mutex
// that guards it. Internal to the checkpoint component.
//
// Thread safety: every field but `live_id` is guarded by `mu`. Engine calls
// on the sequence take it for their duration; a PrefillJob holds it from
// StartPrefill to Finish and a SequenceHold for its lifetime (both keep it
// in a std::unique_lock the analysis cannot follow, so their methods say so
// with AssertHeld); a prefill copying another live sequence only TryLocks
// that one. Lock order: sequence mutexes before every other mutex of the
// component (SequenceRegistry's, EngineCounters', the store's, the index's),
// which are taken briefly with nothing locked under them.
#ifndef CAIRN_CHECKPOINT_SEQUENCE_STATE_H_
#define CAIRN_CHECKPOINT_SEQUENCE_STATE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "backends/memory.h"
#include "checkpoint/policy.h"
#include "checkpoint/prompt.h"

namespace cairn::checkpoint {

// A std::mutex the clang thread-safety analysis sees (scripts/thread-safety.sh),
// with the standard lowercase names too, so std::unique_lock can keep it.
//
// Not absl::Mutex: a scheduler holds several sequences' mutexes at once, in
// no fixed order (its PrefillJobs and the SequenceHolds of one batched
// Forward). That is deadlock-free, because every other thread only TryLocks
// a sequence while it holds another (engine.h, "Locks"), but absl::Mutex's
// deadlock detector reports two orders of the same pair as a potential
// deadlock and aborts the process, even on one thread (a then b, later b
// then a). Debian's libabsl has the detector on whatever this build's NDEBUG
// says: a program doing just that dies with "dying due to potential deadlock".
class ABSL_LOCKABLE SequenceMutex final {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Tells the analysis that the mutex is held by an object it cannot follow
  // (a std::unique_lock kept in a PrefillJob or a SequenceHold). Not checked
  // at run time: std::mutex cannot tell whether it is locked.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  std::mutex mu_;
};

// Holds a SequenceMutex for a scope.
class ABSL_SCOPED_LOCKABLE SequenceLock final {
 public:
  explicit SequenceLock(SequenceMutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.Lock(); }
  ~SequenceLock() ABSL_UNLOCK_FUNCTION() { mu_.Unlock(); }
  SequenceLock(const SequenceLock&) = delete;
  SequenceLock& operator=(const SequenceLock&) = delete;

 private:
  SequenceMutex& mu_;
};

struct SequenceState {
  SequenceState(uint64_t id, std::string owner, std::unique_ptr<SequenceMemory> mem)
      : live_id(id), tenant(std::move(owner)), memory(std::move(mem)) {}

  SequenceMutex mu;
  // Its id in the prefix index (SequenceRegistry::kIdBase and up).
  const uint64_t live_id;
  std::string tenant ABSL_GUARDED_BY(mu);
  bool isolated ABSL_GUARDED_BY(mu) = false;  // see CheckpointEngine::Isolate
  const std::unique_ptr<SequenceMemory> memory ABSL_GUARDED_BY(mu);
  SymbolPath history ABSL_GUARDED_BY(mu);
  // Logits of the row before history position `logits_depth` (the end of
  // the last prompt); valid while the history keeps that prefix.
  std::vector<float> logits ABSL_GUARDED_BY(mu);
  size_t logits_depth ABSL_GUARDED_BY(mu) = 0;
  // Symbols at the newest checkpoint on the current history (for the value
  // of the next one: the recomputation it saves beyond that one).
  size_t newest_depth ABSL_GUARDED_BY(mu) = 0;
  // The checkpoint this sequence captured last, and why (0: none since the
  // last prompt began).
  uint64_t newest_id ABSL_GUARDED_BY(mu) = 0;
  CaptureReason newest_reason ABSL_GUARDED_BY(mu) = CaptureReason::kMessageBoundary;
  // Checkpoints that serve only the next turn (tail points of the last
  // message, points inside the reply), and the size of the latest prompt
  // (see Capturer::StartPrompt).
  std::vector<uint64_t> turn_ids ABSL_GUARDED_BY(mu);
  size_t turn_prompt_size ABSL_GUARDED_BY(mu) = 0;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_SEQUENCE_STATE_H_
