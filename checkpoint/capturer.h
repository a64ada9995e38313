// Capturer: the engine's capture decisions and what follows from them. It
// decides where a prompt gets checkpoints (from the policy's placement and
// what the index already holds on the prompt's path), when a reply does
// (inside it, at its end), when a history about to be cut away or dropped is
// kept whole (branch preservation, parking), and when earlier turns' short-
// lived checkpoints go stale. It takes the snapshots, puts them in the store
// (which may decline them: its retention policy) and indexes them at their
// sequence's history; it takes them out of the index again when the store
// drops them (Forget) and re-indexes those adopted from a disk tier.
//
// Thread safety: thread-safe as far as its own state goes (none beyond the
// collaborators it was given, each thread-safe); the methods that work on a
// sequence require that sequence's mutex (ABSL_EXCLUSIVE_LOCKS_REQUIRED).
// Errors: a checkpoint the store would not admit is RESOURCE_EXHAUSTED,
// errors from Capture and the index are returned as they are; callers treat
// a failed capture as lost reuse, never as a failed request.
#ifndef CAIRN_CHECKPOINT_CAPTURER_H_
#define CAIRN_CHECKPOINT_CAPTURER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "backends/memory.h"
#include "checkpoint/engine_stats.h"
#include "checkpoint/policy.h"
#include "checkpoint/prefix_index.h"
#include "checkpoint/prompt.h"
#include "checkpoint/sequence_registry.h"
#include "checkpoint/sequence_state.h"
#include "checkpoint/store.h"

namespace cairn::checkpoint {

class Capturer final {
 public:
  // Everything given must outlive the capturer. `store` is null only when
  // checkpointing is off (`enabled` false): then nothing is captured.
  Capturer(CheckpointStore* store, PrefixIndex& index, const CheckpointPolicy& policy, SequenceRegistry& live,
           EngineCounters& counters, bool enabled)
      : store_(store), index_(index), policy_(policy), live_(live), counters_(counters), enabled_(enabled) {}

  // Whether checkpoints are taken at all (a store was given).
  bool enabled() const { return enabled_ && store_ != nullptr; }

  // A prompt of `prompt_size` symbols starts on the sequence, which now
  // holds its first history().size() symbols: restored at `restored_depth`
  // symbols from a snapshot, or (nullopt) cut back from its own memory. Sets
  // the newest checkpoint on its path (the base of the next one's value) and
  // retires the turn checkpoints of the prompt before when this one goes on
  // past it (a new turn, not an edit or a regenerate).
  void StartPrompt(SequenceState& s, size_t prompt_size, const IndexMatch& match, std::optional<size_t> restored_depth)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  // Where to capture while the rest of `prompt` (past `start` symbols) is
  // computed: the policy's points, without those the index holds on this
  // path already (`match`, minus the `excluded` ids that failed to restore),
  // a point where the prompt leaves the index's deepest path, tail points
  // and the spaced points of an unmarked prompt spaced for the store's
  // budget, none inside the window an SWA ring can cut back. `live_common`: symbols the sequence's history shared with
  // the prompt before its restore.
  std::vector<CapturePoint> PlanPrefill(SequenceState& s, const Prompt& prompt, size_t start, const IndexMatch& match,
                                        std::span<const uint64_t> excluded, size_t live_common) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  // Whether a spaced point fits its prompt's share of the RAM budget after
  // `used` bytes of the prompt's spaced points (checkpoint scope). The plan
  // spaces them for the state's size when the prompt starts; a state that
  // grows during the prompt (an SWA ring filling) is held to the same share
  // here, at capture time.
  bool SpacedPointFits(SequenceState& s, size_t used) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Whether the store would admit a snapshot of `bytes` (with its logits)
  // described so: otherwise the copy is not worth taking.
  bool WorthCapturing(SnapshotScope scope, size_t bytes, Pos pos, const PutInfo& info) const {
    return store_->WouldAdmit(bytes, scope, pos, info);
  }
  // Captures the sequence now (full scope when `force_full`, else what the
  // policy prefers) and keeps it at its history. `logits`: the last row's,
  // kept with it (may be null). `cost`: the positions a restore saves.
  // `stats`: the prompt's, when one runs (may be null).
  absl::Status CaptureAt(SequenceState& s, CaptureReason reason, bool force_full, const std::vector<float>* logits,
                         double cost, PrefillStats* stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Stores `snapshot` of the sequence at its current history and indexes it
  // there (CaptureAt's second half; snapshots taken inside a run come here
  // directly). `started`: when the capture began, for the timing stats.
  absl::Status Keep(SequenceState& s, CaptureReason reason, Snapshot snapshot, const std::vector<float>* logits,
                    double cost, PrefillStats* stats, std::chrono::steady_clock::time_point started)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  // After generated tokens were absorbed: a checkpoint every
  // PolicyOptions::generation_every positions (widened under a small
  // budget). Failures are counted, not returned: they only cost reuse.
  void DuringGeneration(SequenceState& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // After a reply: a reply that ended on a point taken inside it makes that
  // point the conversation's end; otherwise a checkpoint at the end when
  // the policy says so and the index has none there. Failures are counted.
  void AfterGeneration(SequenceState& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Before the sequence is cut back to `keep_symbols`: a full snapshot of
  // the history about to be abandoned when it is long enough to be worth it
  // (PolicyOptions::min_branch_preserve), or a reclassification of the one
  // kept there already.
  absl::Status PreserveBranch(SequenceState& s, size_t keep_symbols) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Keeps a full snapshot of the sequence's state (see
  // CheckpointEngine::Park), unless the index has one at its history; then
  // drops the checkpoint-scope ones there. OK when the store declines it.
  absl::Status Park(SequenceState& s, CaptureReason reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  // Takes a checkpoint out of the index (after the store dropped it, or
  // before it is erased) and re-values the checkpoints below it, whose
  // nearest shallower checkpoint it was.
  void Forget(uint64_t id);
  // Indexes again the store's checkpoints of this model (`layout`) that
  // carry a tag this capturer wrote: those adopted from a disk tier.
  void ReindexRecovered(uint64_t layout);

 private:
  // What the store's retention policy is told of a checkpoint of the
  // sequence at its current history.
  PutInfo Describe(const SequenceState& s, CaptureReason reason, double cost) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // The turn checkpoints of the sequence's earlier turns (tail points,
  // points inside replies), once a prompt continues past the one they were
  // taken for: an edit of that prompt's last message or a re-sent cut reply
  // is now less likely. Marked stale for the retention policy to weigh
  // (PolicyOptions::keep_turn_checkpoints), or erased.
  void RetireTurnCheckpoints(SequenceState& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // The tag persisted with a checkpoint (tenant, path, whether logits come
  // with it), from which ReindexRecovered indexes it again after a restart;
  // empty without a disk tier.
  std::string EncodeTag(const std::string& tenant, std::span<const SymbolKey> path, bool has_logits) const;

  CheckpointStore* const store_;
  PrefixIndex& index_;
  const CheckpointPolicy& policy_;
  SequenceRegistry& live_;
  EngineCounters& counters_;
  const bool enabled_;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_CAPTURER_H_
