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
// Locks: every sequence has a mutex, held by engine calls on it, by a
// PrefillJob from StartPrefill to Finish and by a SequenceHold. A prefill
// copying another live sequence (the prefix index's kOtherSequence reuse)
// only try_locks that sequence and skips it when busy, so no thread ever
// blocks on a sequence's mutex while holding another one's, except a caller
// that takes several (a scheduler holding its PrefillJobs and SequenceHolds
// for one batched Forward) - and nobody waits for it while holding one.
// The engine's own mutex is taken last and held briefly (nothing is locked
// under it). Hence no cycle: order sequence mutexes -> engine mutex.
#ifndef CAIRN_CHECKPOINT_ENGINE_H_
#define CAIRN_CHECKPOINT_ENGINE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/backend.h"
#include "backends/memory.h"
#include "checkpoint/options.h"
#include "checkpoint/policy.h"
#include "checkpoint/prefix_index.h"
#include "checkpoint/prompt.h"
#include "checkpoint/store.h"

namespace cairn::checkpoint {

struct PrefillStats {
  size_t prompt_symbols = 0;
  Pos prompt_positions = 0;
  Pos reused = 0;            // positions not run through Forward
  Pos recomputed = 0;        // positions run through Forward
  ReuseKind source = ReuseKind::kLive;
  Pos restored_pos = -1;     // position of the restored snapshot; -1: none
  bool logits_from_checkpoint = false;  // no forward pass at all
  int32_t captured = 0;      // checkpoints captured during this call
  size_t captured_bytes = 0;
  int32_t forward_calls = 0;
  double restore_seconds = 0;
  double capture_seconds = 0;
  double forward_seconds = 0;
};

struct PrefillResult {
  std::vector<float> logits;  // the last prompt row's, n_vocab values
  PrefillStats stats;
};

struct PrefillControl {
  // Checked between forward chunks: when set the call stops with CANCELLED;
  // the sequence then holds the prompt prefix absorbed so far (consistent).
  const std::atomic<bool>* cancel = nullptr;
};

struct EngineStats {
  uint64_t prompts = 0;
  int64_t prompt_positions = 0;
  int64_t reused = 0;
  int64_t recomputed = 0;
  uint64_t captures = 0;
  uint64_t capture_failures = 0;  // did not fit the budget (reuse lost, not an error)
  uint64_t capture_bytes = 0;
  uint64_t restores = 0;
  uint64_t restore_failures = 0;  // fell back to another candidate
  double capture_seconds = 0;
  double restore_seconds = 0;
  double forward_seconds = 0;
};

class CheckpointEngine;
class PrefillJob;
class SequenceHold;

// One live sequence (a session's conversation): its memory and the symbols
// it absorbed. Owned by the caller; used by one thread at a time (engine
// calls lock it; other sequences may copy from it concurrently). Must be
// destroyed before its engine.
class Sequence {
 public:
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  const std::string& tenant() const;
  // Whether CheckpointEngine::Isolate made its state private.
  bool isolated() const;
  // Symbols absorbed; valid while no engine call runs on this sequence.
  const SymbolPath& history() const;
  Pos next_pos() const;
  // For a batched decode by the service: while holding a SequenceHold on
  // this sequence, run Forward on this memory, then call
  // SequenceHold::Append with the tokens absorbed. (Without the hold,
  // another thread's prefill may copy this memory while Forward writes it.)
  SequenceMemory* memory();

 private:
  friend class CheckpointEngine;
  friend class PrefillJob;
  friend class SequenceHold;
  struct State;
  Sequence(CheckpointEngine* engine, std::shared_ptr<State> state);
  CheckpointEngine* engine_;
  std::shared_ptr<State> state_;
};

// A prompt being processed on one sequence step by step, so that a
// scheduler can put its runs into the same Forward batch as other
// sequences' decode rows (CheckpointEngine::Prefill is the same loop for one
// sequence). Created by CheckpointEngine::StartPrefill, which already chose
// and applied the reuse. Holds the sequence (engine calls on it wait) until
// Finish or destruction. Not thread-safe; must not outlive its engine.
class PrefillJob {
 public:
  ~PrefillJob();  // finishes as cancelled when Finish was not called
  PrefillJob(const PrefillJob&) = delete;
  PrefillJob& operator=(const PrefillJob&) = delete;

  // True when nothing is left to run (Finish returns the logits).
  bool done() const;
  // The next run for Backend::Forward: up to max_tokens tokens or one whole
  // chunk; it asks for the last row's logits when it ends the prompt. Where
  // the backend snapshots inside a run (ModelInfo::snapshots_within_run)
  // the capture points inside it become its snapshot_rows; otherwise the
  // run ends at the next capture point. Valid until Absorbed or Finish.
  // Only while !done().
  SequenceRun NextRun(int32_t max_tokens);
  // After Forward absorbed NextRun's run (`logits`: its RunLogits, whose
  // snapshots are moved into the store): records it and keeps the due
  // checkpoints. FAILED_PRECONDITION when the memory did not advance by
  // that run.
  absl::Status Absorbed(RunLogits& logits);
  // Ends the job once: the result when done; otherwise `error` (CANCELLED
  // when OK), the sequence then holding the prompt prefix absorbed so far.
  absl::StatusOr<PrefillResult> Finish(absl::Status error = absl::OkStatus());

 private:
  friend class CheckpointEngine;
  PrefillJob() = default;
  void CaptureDue();

  CheckpointEngine* engine_ = nullptr;
  std::shared_ptr<Sequence::State> state_;
  std::unique_lock<std::mutex> lock_;
  Prompt prompt_;
  IndexMatch match_;
  std::vector<uint64_t> excluded_;
  std::vector<CapturePoint> points_;
  size_t next_point_ = 0;
  size_t i_ = 0;        // prompt symbols absorbed
  size_t run_end_ = 0;  // end of the run NextRun returned
  std::vector<TokenId> tokens_;
  std::vector<int32_t> snapshot_rows_;  // of that run, one per capture point inside it
  std::vector<CaptureReason> snapshot_reasons_;
  int32_t last_row_ = 0;
  std::chrono::steady_clock::time_point run_started_;
  PrefillResult result_;
  absl::Status error_;
  bool finished_ = false;
};

// Holds a sequence's lock for the caller's own Forward on its memory() (a
// scheduler's batched decode), so that no other thread reads or writes that
// memory meanwhile: engine calls on the sequence wait, and other sequences'
// prefills skip it as a copy source (busy). Take it before reading
// memory()->next_pos() for the run, record the absorbed tokens with Append
// (CheckpointEngine::Append would wait for this very lock), then Release or
// destroy it. Must not be taken on a sequence this thread already holds (an
// engine call or a PrefillJob on it). See the lock order above.
class SequenceHold {
 public:
  explicit SequenceHold(Sequence& seq);
  SequenceHold(SequenceHold&&) noexcept = default;
  SequenceHold& operator=(SequenceHold&&) noexcept = default;
  ~SequenceHold() = default;

  // As CheckpointEngine::Append, under this hold. FAILED_PRECONDITION as
  // there, or when the hold was released.
  absl::Status Append(std::span<const TokenId> tokens);
  void Release();

 private:
  CheckpointEngine* engine_;
  std::shared_ptr<Sequence::State> state_;
  std::unique_lock<std::mutex> lock_;
};

// Thread-safe: calls on different sequences may run concurrently (Forward
// calls are serialized by the backend as it documents).
class CheckpointEngine final {
 public:
  friend class Sequence;
  friend class PrefillJob;
  friend class SequenceHold;
  // `backend` must outlive the engine. `store` may be shared by the engines
  // of several models (one budget); null only when options.enabled is false.
  // Every engine has its own prefix index. With a store that has a disk
  // tier, checkpoints adopted from disk are indexed again. INVALID_ARGUMENT
  // for a null backend, a missing store or a bad option.
  static absl::StatusOr<std::unique_ptr<CheckpointEngine>> Create(
      Backend* backend, std::shared_ptr<CheckpointStore> store, const CheckpointOptions& options);
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
  absl::StatusOr<PrefillResult> Prefill(Sequence& seq, const Prompt& prompt,
                                        const PrefillControl& control = {});

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
  absl::StatusOr<std::unique_ptr<Sequence>> Import(const Exported& exported,
                                                   const std::string& tenant = "");

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
  struct Plan;
  CheckpointEngine(Backend* backend, std::shared_ptr<CheckpointStore> store,
                   std::unique_ptr<PrefixIndex> index, const CheckpointOptions& options);
  bool enabled() const { return options_.enabled && store_ != nullptr; }

  absl::Status Validate(const Prompt& prompt) const;
  std::vector<Plan> Candidates(Sequence::State& s, const Prompt& prompt, const IndexMatch& match,
                               const std::vector<uint64_t>& excluded) const;
  absl::Status Apply(Sequence::State& s, const Prompt& prompt, const Plan& plan,
                     std::vector<float>* logits, uint64_t* failed_id);
  absl::StatusOr<Snapshot> CaptureOther(uint64_t live_id, const Prompt& prompt, size_t depth);
  // Captures the sequence now and indexes it at its history.
  absl::Status CaptureAt(Sequence::State& s, CaptureReason reason, bool force_full,
                         const std::vector<float>* logits, double cost, PrefillStats* stats);
  // Stores `snapshot` of the sequence at its current history and indexes it
  // there (CaptureAt's second half; snapshots taken inside a run come here
  // directly). `started`: when the capture began, for the timing stats.
  absl::Status Keep(Sequence::State& s, CaptureReason reason, Snapshot snapshot, const std::vector<float>* logits,
                    double cost, PrefillStats* stats, std::chrono::steady_clock::time_point started);
  // What the store's retention policy is told of a checkpoint of the
  // sequence at its current history.
  PutInfo Describe(const Sequence::State& s, CaptureReason reason, double cost) const;
  // Whether the store would admit a snapshot of `bytes` (with its logits)
  // described so: otherwise the copy is not worth taking.
  bool WorthCapturing(SnapshotScope scope, size_t bytes, Pos pos, const PutInfo& info) const;
  // The short-lived checkpoints of the sequence's earlier turns (tail points,
  // points inside replies), once a prompt continues past the one they were
  // taken for: an edit of that prompt's last message or a re-sent cut reply
  // is now less likely. Marked stale for the retention policy to weigh
  // (PolicyOptions::keep_turn_checkpoints), or erased.
  void RetireTurnCheckpoints(Sequence::State& s);
  // After generated tokens were absorbed: a checkpoint every
  // PolicyOptions::generation_every positions. Failures only cost reuse.
  void CaptureDuringGeneration(Sequence::State& s);
  absl::Status PreserveIfUseful(Sequence::State& s, size_t keep_symbols);
  void Publish(Sequence::State& s);
  // Park with the sequence's lock held.
  absl::Status ParkLocked(Sequence::State& s, CaptureReason reason);
  // Takes a checkpoint out of the index (after the store dropped it, or
  // before the engine erases it) and re-values the checkpoints below it,
  // whose nearest shallower checkpoint it was.
  void Forget(uint64_t id);
  // A sequence going away: parked (PolicyOptions::park_dropped) unless busy,
  // then forgotten.
  void Unregister(Sequence::State& s);
  std::string EncodeTag(const std::string& tenant, std::span<const SymbolKey> path,
                        bool has_logits) const;
  void ReindexRecovered();

  Backend* const backend_;
  const std::shared_ptr<CheckpointStore> store_;
  const std::unique_ptr<PrefixIndex> index_;
  const CheckpointOptions options_;
  const CheckpointPolicy policy_;
  int listener_ = 0;
  int branch_counter_ = 0;

  mutable absl::Mutex mu_;
  std::map<uint64_t, std::weak_ptr<Sequence::State>> live_ ABSL_GUARDED_BY(mu_);
  uint64_t next_live_ ABSL_GUARDED_BY(mu_) = 1;
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_ENGINE_H_
