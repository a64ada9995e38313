#include "checkpoint/sequence.h"

#include <utility>

#include "checkpoint/engine.h"
#include "checkpoint/sequence_state.h"

namespace cairn::checkpoint {

Sequence::Sequence(CheckpointEngine* engine, std::shared_ptr<SequenceState> state)
    : engine_(engine), state_(std::move(state)) {}

Sequence::~Sequence() { engine_->Unregister(*state_); }

// Unlocked reads: the caller guarantees no other thread works on the
// sequence (see the header).
const std::string& Sequence::tenant() const { return ABSL_TS_UNCHECKED_READ(state_->tenant); }
bool Sequence::isolated() const { return ABSL_TS_UNCHECKED_READ(state_->isolated); }
const SymbolPath& Sequence::history() const { return ABSL_TS_UNCHECKED_READ(state_->history); }
Pos Sequence::next_pos() const { return ABSL_TS_UNCHECKED_READ(state_->memory)->next_pos(); }
SequenceMemory* Sequence::memory() { return ABSL_TS_UNCHECKED_READ(state_->memory).get(); }

SequenceHold::SequenceHold(Sequence& seq) : engine_(seq.engine_), state_(seq.state_), lock_(state_->mu) {}

absl::Status SequenceHold::Append(std::span<const TokenId> tokens) {
  if (!lock_.owns_lock()) return absl::FailedPreconditionError("sequence hold was released");
  SequenceState& s = *state_;
  s.mu.AssertHeld();  // lock_
  return engine_->AppendHeld(s, tokens);
}

void SequenceHold::Release() {
  if (lock_.owns_lock()) lock_.unlock();
}

}  // namespace cairn::checkpoint
