// The memory of one sequence of a recurrent model: per layer, the last
// d_conv - 1 convolution inputs and the SSM state (none for a short
// convolution layer), all F32, in one contiguous buffer so that a snapshot
// is a single copy. The recurrent
// family's memory, and the recurrent part of the hybrid memory. Recurrent
// slot l is layer slot l's state.
#ifndef CAIRN_BACKENDS_MEMORY_RECURRENT_MEMORY_H_
#define CAIRN_BACKENDS_MEMORY_RECURRENT_MEMORY_H_

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "backends/memory.h"
#include "backends/memory/layer_memory.h"

namespace cairn {

// Not truncatable, no rollback window: a recurrent state has absorbed every
// token. Truncate(next_pos()) is a no-op, Truncate(0) resets to the empty
// state, any other position fails with FAILED_PRECONDITION. Capture copies
// the whole state for either scope (for this memory the checkpoint part is
// everything); Restore copies it back exactly. Not thread-safe (one user at
// a time, as SequenceMemory says).
class RecurrentMemory final : public LayerMemory {
 public:
  // `owner` identifies the backend that may use this memory in Forward;
  // `layout` is the fingerprint of model + geometry that snapshots carry.
  // Each of the n_layers layers holds conv_floats then ssm_floats values;
  // either may be 0 (a short convolution has no recurrent state), not both.
  // RESOURCE_EXHAUSTED when the state cannot be allocated, INVALID_ARGUMENT
  // for negative or empty sizes.
  static absl::StatusOr<std::unique_ptr<RecurrentMemory>> Create(const void* owner, uint64_t layout, int64_t n_layers,
                                                                 int64_t conv_floats, int64_t ssm_floats);

  MemoryCapabilities caps() const override;
  Pos next_pos() const override { return pos_; }
  absl::Status Truncate(Pos p) override;
  absl::StatusOr<Snapshot> Capture(SnapshotScope scope) const override;
  absl::Status Restore(const Snapshot& snapshot) override;
  size_t Bytes(SnapshotScope scope) const override;

  // For composite memories (hybrids) that embed this state in their own
  // snapshots: the raw state (Bytes() bytes, the Capture encoding) without an
  // intermediate Snapshot copy, and its exact inverse. RestoreState fails
  // with INVALID_ARGUMENT (changing nothing) on a size mismatch or a
  // negative position.
  std::span<const uint8_t> state_bytes_view() const {
    return {reinterpret_cast<const uint8_t*>(data_.get()), state_bytes()};
  }
  absl::Status RestoreState(Pos pos, std::span<const uint8_t> bytes);

  // LayerMemory: no attention rows, no capacity.
  absl::Status Reserve(Pos end, int64_t end_rows) override;
  RecurrentState recurrent(int32_t slot) override { return {conv_state(slot), ssm_state(slot)}; }
  Snapshot AllocateCheckpointAhead(Pos pos, uint8_t** state) const override;
  RecurrentState recurrent_in(uint8_t* state, int32_t slot) const override {
    return {conv_state_in(state, slot), ssm_state_in(state, slot)};
  }
  void Commit(Pos span, int64_t rows, bool chunk) override;

  // --- Direct access (tests, composite memories). ---
  uint64_t layout() const { return layout_; }
  float* conv_state(int64_t layer) { return data_.get() + layer * (conv_floats_ + ssm_floats_); }
  float* ssm_state(int64_t layer) { return conv_state(layer) + conv_floats_; }
  // For snapshots the owning backend takes inside a run (SequenceRun::
  // snapshot_rows): a Snapshot of this layout at `pos` with room for the
  // whole state, which the backend fills through conv_state_in/ssm_state_in.
  Snapshot AllocateSnapshot(Pos pos) const;
  // Where layer `layer`'s states are in a state encoding (state_bytes_view's
  // layout, e.g. a Snapshot's data); `state` must hold Bytes() bytes.
  float* conv_state_in(uint8_t* state, int64_t layer) const {
    return reinterpret_cast<float*>(state) + layer * (conv_floats_ + ssm_floats_);
  }
  float* ssm_state_in(uint8_t* state, int64_t layer) const { return conv_state_in(state, layer) + conv_floats_; }
  // Records that `n` more positions were absorbed (the caller checked that
  // next_pos() + n does not overflow).
  void Advance(Pos n) { pos_ += n; }

 private:
  RecurrentMemory(const void* owner, uint64_t layout, int64_t n_layers, int64_t conv_floats, int64_t ssm_floats,
                  std::unique_ptr<float[]> data);
  size_t state_bytes() const { return static_cast<size_t>(n_floats_) * sizeof(float); }

  uint64_t layout_;
  int64_t n_layers_;
  int64_t conv_floats_;
  int64_t ssm_floats_;
  int64_t n_floats_;
  std::unique_ptr<float[]> data_;
  Pos pos_ = 0;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MEMORY_RECURRENT_MEMORY_H_
