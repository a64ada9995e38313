// CheckpointEngine: what the service calls to process a prompt with the most
// reuse. Given a Backend, a prompt (tokens, whole multimodal chunks, message
// boundaries) and a live Sequence, it finds the best reuse (cutting the
// sequence back, restoring a checkpoint, copying a shared prefix from the
// index), applies it, runs only the rest through Backend::Forward in chunks,
// capturing checkpoints where the policy says, and returns the last row's
// logits with statistics.
//
// Contract the tests enforce: the logits equal those of the same prompt
// computed from scratch on a fresh sequence.
//
// Generation (sampling) is the service's: it decodes through Decode (or its
// own batched Forward on Sequence::memory() under a SequenceHold, followed by
// SequenceHold::Append) and calls EndGeneration when a reply is complete.
//
// The engine is the entry point; its parts each own one concern (README.md
// in this folder walks through a request):
//   sequence.h           Sequence, SequenceHold: a live sequence, holding it
//   sequence_state.h     what a sequence holds, its mutex
//   sequence_registry.h  the live sequences: ids, registry, index entries
//   reuse_planner.h      what a prompt can reuse; restoring it
//   capturer.h           where and when to capture; keeping and forgetting
//                        checkpoints in the store and the index
//   prefill_job.h        the prompt's remaining runs, step by step
//   engine_stats.h       what is counted
// and its collaborators: policy.h (pure decisions), store.h (the snapshot
// bytes, RAM and disk), prefix_index.h (paths to checkpoints and sequences).
//
// Locks: every sequence has a mutex (SequenceMutex, sequence_state.h), held
// by engine calls on it, by a PrefillJob from StartPrefill to Finish and by
// a SequenceHold. A prefill copying another live sequence (the prefix
// index's kOtherSequence reuse) only TryLocks that sequence and skips it
// when busy, so no thread ever blocks on a sequence's mutex while holding
// another one's, except a caller that takes several (a scheduler holding its
// PrefillJobs and SequenceHolds for one batched Forward) - and nobody waits
// for it while holding one. The other mutexes (SequenceRegistry's,
// EngineCounters', the store's and the index's) are taken after sequence
// mutexes and held briefly. Hence no cycle: sequence mutexes -> the others.
#ifndef CAIRN_CHECKPOINT_ENGINE_H_
#define CAIRN_CHECKPOINT_ENGINE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/memory.h"
#include "checkpoint/engine_stats.h"
#include "checkpoint/options.h"
#include "checkpoint/policy.h"
#include "checkpoint/prefill_job.h"
#include "checkpoint/prefix_index.h"
#include "checkpoint/prompt.h"
#include "checkpoint/sequence.h"
#include "checkpoint/sequence_state.h"
#include "checkpoint/store.h"

namespace cairn::checkpoint {

struct PrefillControl {
  // Checked between forward chunks: when set the call stops with CANCELLED;
  // the sequence then holds the prompt prefix absorbed so far (consistent).
  const std::atomic<bool>* cancel = nullptr;
};

class Capturer;
class SequenceRegistry;
class ReusePlanner;

// Thread-safe: calls on different sequences may run concurrently (Forward
// calls are serialized by the backend as it documents).
class CheckpointEngine final {
 public:
  friend class Sequence;
  friend class SequenceHold;
  // `backend` must outlive the engine. `store` may be shared by the engines
  // of several models (one budget); null only when options.enabled is false.
  // Every engine has its own prefix index. With a store that has a disk
  // tier, checkpoints adopted from disk are indexed again. INVALID_ARGUMENT
  // for a null backend, a missing store or a bad option.
  static absl::StatusOr<std::unique_ptr<CheckpointEngine>> Create(Backend* backend,
                                                                  std::shared_ptr<CheckpointStore> store,
                                                                  const CheckpointOptions& options);
  ~CheckpointEngine();

  // A new empty sequence. `tenant` partitions the shared prefix index
  // (sequences only reuse checkpoints and sequences of their own tenant).
  // RESOURCE_EXHAUSTED from the backend.
  absl::StatusOr<std::unique_ptr<Sequence>> NewSequence(const std::string& tenant = "");

  // A copy of `source` (its memory, history and logits) for the same
  // tenant; checkpoints are shared through the index.
  absl::StatusOr<std::unique_ptr<Sequence>> Fork(Sequence& source);

  // Brings `seq` to the state after `prompt` and returns the last row's
  // logits. Errors: INVALID_ARGUMENT (empty prompt, token id out of range,
  // a chunk for a backend without embeddings, a chunk of another width),
  // RESOURCE_EXHAUSTED (beyond the model's context, or from Forward),
  // CANCELLED (see PrefillControl). On INVALID_ARGUMENT and a context error
  // the sequence is unchanged; on other errors it holds a consistent prefix
  // of the prompt (history() says which).
  absl::StatusOr<PrefillResult> Prefill(Sequence& seq, const Prompt& prompt, const PrefillControl& control = {});

  // The same, step by step for a batching scheduler (see PrefillJob): the
  // reuse is chosen and applied here. Errors as Prefill's before any Forward.
  absl::StatusOr<std::unique_ptr<PrefillJob>> StartPrefill(Sequence& seq, const Prompt& prompt);

  // Absorbs one generated token and returns the logits after it.
  // INVALID_ARGUMENT for an id out of range; errors from Forward.
  absl::StatusOr<std::vector<float>> Decode(Sequence& seq, TokenId token);

  // Records tokens the caller absorbed into seq.memory() with its own
  // Forward. FAILED_PRECONDITION when the memory did not advance by exactly
  // tokens.size() positions. A Forward running concurrently with other
  // engine users must be under a SequenceHold and use its Append instead.
  absl::Status Append(Sequence& seq, std::span<const TokenId> tokens);

  // After a reply: captures a checkpoint when the policy says so and
  // publishes the sequence in the prefix index. A capture that fails (over
  // budget) is counted in stats, not returned: it only costs reuse later.
  absl::Status EndGeneration(Sequence& seq);

  // A portable copy of a sequence (SessionControl export): its full
  // snapshot and the symbols it absorbed. Errors from Capture.
  struct Exported {
    Snapshot snapshot;
    SymbolPath history;
  };
  absl::StatusOr<Exported> Export(Sequence& seq);
  // A new sequence from an export. INVALID_ARGUMENT for a snapshot of
  // another model or a history that does not end at the snapshot's
  // position; the sequence is not created then.
  absl::StatusOr<std::unique_ptr<Sequence>> Import(const Exported& exported, const std::string& tenant = "");

  // Makes the sequence's state private to it and its future forks: they
  // move to a partition of the prefix index of their own (a fresh tenant
  // nobody else can name), so nothing derived from this state (the live
  // sequence, its checkpoints, a park) ever serves another sequence. For
  // state the caller cannot vouch for, e.g. an unauthenticated import: call
  // it before that state enters the memory. Irreversible (a later prompt
  // may still build on the state). Checkpoints captured before stay shared.
  void Isolate(Sequence& seq);

  // Keeps a full snapshot of the sequence's state in the store and index
  // (e.g. before a sessionless request's sequence is dropped), unless one
  // exists; a checkpoint-scope snapshot at the same place is then dropped
  // (the full one serves everything it did). No-op when checkpointing is off
  // or when the store declines it (too big, or worth less than what it
  // holds: its retention policy).
  // A sequence destroyed without it is parked anyway when
  // PolicyOptions::park_dropped and the store admits it.
  absl::Status Park(Sequence& seq);

  const CheckpointPolicy& policy() const { return policy_; }
  const CheckpointOptions& options() const { return options_; }
  CheckpointStore* store() const { return store_.get(); }
  const PrefixIndex& index() const { return *index_; }
  Backend& backend() const { return *backend_; }
  EngineStats stats() const;
  // Live sequences of this engine (they share the store's budget).
  size_t LiveSequences() const;

 private:
  CheckpointEngine(Backend* backend, std::shared_ptr<CheckpointStore> store, std::unique_ptr<PrefixIndex> index,
                   const CheckpointOptions& options);
  bool enabled() const { return options_.enabled && store_ != nullptr; }

  absl::Status Validate(const Prompt& prompt) const;
  // Records tokens absorbed into the sequence's memory under its lock
  // (Append, SequenceHold::Append).
  absl::Status AppendHeld(SequenceState& s, std::span<const TokenId> tokens) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // A sequence going away: parked (PolicyOptions::park_dropped) unless busy,
  // then forgotten.
  void Unregister(SequenceState& s);
  // Indexes the checkpoints adopted from the store's disk tier.
  void ReindexRecovered();

  Backend* const backend_;
  const std::shared_ptr<CheckpointStore> store_;
  const std::unique_ptr<PrefixIndex> index_;
  const CheckpointOptions options_;
  const CheckpointPolicy policy_;
  EngineCounters counters_;
  const std::unique_ptr<SequenceRegistry> live_;
  const std::unique_ptr<Capturer> capturer_;
  const std::unique_ptr<ReusePlanner> planner_;
  int listener_ = 0;
  int branch_counter_ = 0;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_ENGINE_H_
