// ReusePlanner: what a new prompt can reuse, and bringing the sequence there.
// For a prompt and a sequence it lists every way to skip a prefix of the
// prompt (ReusePlan: the sequence's own memory cut back, a checkpoint-scope
// snapshot onto it, a full snapshot, another live sequence copied, a full
// base with a checkpoint on top, a state that continues differently cut
// back), lets the policy choose (CheckpointPolicy::ChooseRestore), applies
// the choice, and falls back to the next best when a snapshot is gone,
// corrupt, or another sequence busy or moved on. Then it tells the store's
// retention policy what the restore was worth, and which checkpoint it
// pushed out or refused would have served the prompt further.
//
// Thread safety: no state of its own beyond its thread-safe collaborators;
// the methods on a sequence require its mutex. A copy of another live
// sequence only TryLocks that one (never waits while holding this one).
#ifndef CAIRN_CHECKPOINT_REUSE_PLANNER_H_
#define CAIRN_CHECKPOINT_REUSE_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "checkpoint/capturer.h"
#include "checkpoint/engine_stats.h"
#include "checkpoint/policy.h"
#include "checkpoint/prefix_index.h"
#include "checkpoint/prompt.h"
#include "checkpoint/sequence_registry.h"
#include "checkpoint/sequence_state.h"
#include "checkpoint/store.h"

namespace cairn::checkpoint {

// One way to bring a sequence to a prefix of a prompt: the policy's view of
// it (`c`) and what to restore, in order: a base holding the whole state
// (none for kLive and kCheckpointOnLive), then a checkpoint-scope snapshot.
struct ReusePlan {
  ReuseCandidate c;
  EntryKind base_kind = EntryKind::kFull;  // kFull: store id; kLive: live sequence id
  uint64_t base_id = 0;
  size_t base_needs = 0;      // symbols of the prompt the base must hold
  uint64_t ckpt_id = 0;       // checkpoint-scope snapshot to restore (last)
  size_t restored_depth = 0;  // symbols of the restored state (on the prompt's path)
  Pos restored_pos = -1;
};

class ReusePlanner final {
 public:
  // Everything given must outlive the planner. `store` is null only when
  // checkpointing is off (`enabled` false): then only the sequence itself
  // is reused.
  ReusePlanner(const Backend& backend, CheckpointStore* store, SequenceRegistry& live, Capturer& capturer,
               EngineCounters& counters, bool enabled)
      : backend_(backend), store_(store), live_(live), capturer_(capturer), counters_(counters), enabled_(enabled) {}

  struct Restored {
    ReusePlan chosen;
    std::vector<ReusePlan> candidates;  // those it was chosen from
    std::vector<float> logits;          // the prompt's last row's, when the plan brought them
  };
  // Chooses the best reuse of the sequence for `prompt` (`match`: the
  // prompt's lookup in the index; `live_common`: symbols its history shares
  // with the prompt) and applies it. Before the first change to the
  // sequence, the history it abandons may be preserved (Capturer::
  // PreserveBranch). A plan that fails adds the id at fault to `excluded`
  // (and takes a gone or corrupt checkpoint out of the index) and the choice
  // is made again; after 4 failures the prompt starts from scratch, which
  // cannot fail. Afterwards the sequence holds the first history().size()
  // symbols of the prompt.
  Restored Restore(SequenceState& s, const Prompt& prompt, const IndexMatch& match, size_t live_common,
                   std::vector<uint64_t>& excluded) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Tells the store's retention policy what the restored checkpoint saved
  // beyond the best plan without it (its realized value). No-op when the
  // plan restored no stored checkpoint.
  void CreditRestored(const Restored& restored, const Prompt& prompt);
  // When the sequence resumes before the prompt's end: would a checkpoint
  // the store pushed out or refused have resumed it further? The store's
  // policy learns of it (CheckpointStore::NoteMissed).
  void NoteMissed(SequenceState& s, const Prompt& prompt, const IndexMatch& match, size_t live_common)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

 private:
  // Snapshots a plan restores, fetched before anything changes.
  struct Fetched;
  std::vector<ReusePlan> Candidates(SequenceState& s, const Prompt& prompt, const IndexMatch& match,
                                    const std::vector<uint64_t>& excluded) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Applies `plan`; on error sets `failed_id` to the snapshot or sequence at
  // fault (0: none), the sequence then holding a consistent prefix or a
  // state that no longer matches its history (the caller starts over).
  absl::Status Apply(SequenceState& s, const Prompt& prompt, const ReusePlan& plan, std::vector<float>* logits,
                     uint64_t* failed_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  absl::Status Fetch(const Prompt& prompt, const ReusePlan& plan, Fetched& fetched, uint64_t* failed_id);
  // A full snapshot of another live sequence whose history still holds the
  // first `depth` symbols of the prompt. NOT_FOUND when gone, UNAVAILABLE
  // when busy (never waited for), FAILED_PRECONDITION when it moved on.
  absl::StatusOr<Snapshot> CaptureOther(uint64_t live_id, const Prompt& prompt, size_t depth);

  const Backend& backend_;
  CheckpointStore* const store_;
  SequenceRegistry& live_;
  Capturer& capturer_;
  EngineCounters& counters_;
  const bool enabled_;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_REUSE_PLANNER_H_
