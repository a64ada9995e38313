// Sequence and SequenceHold: the public face of a live sequence (a session's
// conversation) and of holding one for a batched Forward. A Sequence is
// created, forked, exported, imported, isolated and parked through its
// CheckpointEngine (engine.h); its state lives in a SequenceState
// (sequence_state.h) shared with the engine's parts, registered with the
// engine's SequenceRegistry while it lives.
#ifndef CAIRN_CHECKPOINT_SEQUENCE_H_
#define CAIRN_CHECKPOINT_SEQUENCE_H_

#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "backends/memory.h"
#include "checkpoint/prompt.h"

namespace cairn::checkpoint {

class CheckpointEngine;
class SequenceMutex;
struct SequenceState;

// One live sequence: its memory and the symbols it absorbed. Owned by the
// caller; used by one thread at a time (engine calls lock it; other
// sequences may copy from it concurrently). Must be destroyed before its
// engine; destroying it may park its state (PolicyOptions::park_dropped).
class Sequence {
 public:
  ~Sequence();
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  // The accessors below read without the sequence's lock: valid while no
  // engine call, PrefillJob or SequenceHold of another thread works on it.
  const std::string& tenant() const;
  // Whether CheckpointEngine::Isolate made its state private.
  bool isolated() const;
  // Symbols absorbed.
  const SymbolPath& history() const;
  Pos next_pos() const;
  // For a batched decode by the service: while holding a SequenceHold on
  // this sequence, run Forward on this memory, then call
  // SequenceHold::Append with the tokens absorbed. (Without the hold,
  // another thread's prefill may copy this memory while Forward writes it.)
  SequenceMemory* memory();

 private:
  friend class CheckpointEngine;
  friend class SequenceHold;
  Sequence(CheckpointEngine* engine, std::shared_ptr<SequenceState> state);
  CheckpointEngine* engine_;
  std::shared_ptr<SequenceState> state_;
};

// Holds a sequence's lock for the caller's own Forward on its memory() (a
// scheduler's batched decode), so that no other thread reads or writes that
// memory meanwhile: engine calls on the sequence wait, and other sequences'
// prefills skip it as a copy source (busy). Take it before reading
// memory()->next_pos() for the run, record the absorbed tokens with Append
// (CheckpointEngine::Append would wait for this very lock), then Release or
// destroy it. Must not be taken on a sequence this thread already holds (an
// engine call or a PrefillJob on it). See the lock order in engine.h.
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
  std::shared_ptr<SequenceState> state_;
  std::unique_lock<SequenceMutex> lock_;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_SEQUENCE_H_
