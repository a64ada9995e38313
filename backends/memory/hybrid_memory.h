// The memory of one sequence of a hybrid model (attention layers mixed with
// recurrent layers), composed from the existing memories rather than copied:
// a KvMemory holds the K/V rows of every attention layer, a RecurrentMemory
// the conv + recurrent state of every recurrent layer (Mamba-1/2, Gated
// DeltaNet, or a short convolution's conv inputs alone), and this class
// answers for both. Its attention slots are the KvMemory's, its recurrent
// slots the RecurrentMemory's.
//
// Positions and rows. A multimodal chunk of nx * ny embedding rows occupies
// max(nx, ny) positions (M-RoPE), so the attention part stores rows, not
// positions: the KvMemory's own "position" counts absorbed rows, and this
// memory keeps the list of absorbed chunks to map a position to its row
// count. A position strictly inside a chunk has no such row count: Truncate,
// Capture and Restore refuse it with FAILED_PRECONDITION.
#ifndef CAIRN_BACKENDS_MEMORY_HYBRID_MEMORY_H_
#define CAIRN_BACKENDS_MEMORY_HYBRID_MEMORY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/memory.h"
#include "backends/memory/kv_memory.h"
#include "backends/memory/layer_memory.h"
#include "backends/memory/recurrent_memory.h"

namespace cairn {

struct HybridGeometry {
  KvGeometry attention;  // n_layers = attention layers; capacity in rows
  int64_t recurrent_layers = 0;
  int64_t conv_floats = 0;   // per recurrent layer
  int64_t state_floats = 0;  // per recurrent layer
  uint64_t layout = 0;       // fingerprint of model + whole geometry
};

// An absorbed embedding chunk: positions [pos, pos + span), rows
// [row, row + n_rows).
struct ChunkExtent {
  Pos pos = 0;
  Pos span = 0;
  int64_t row = 0;
  int64_t n_rows = 0;
};

// Capabilities: not truncatable, rollback window 0, has checkpoint state (the
// recurrent part). Truncate(next_pos()) is a no-op, Truncate(0) resets both
// parts, anything else fails with FAILED_PRECONDITION and changes nothing.
// Capture(kCheckpoint) copies the recurrent states and the chunk list (the
// attention rows are recovered by cutting the KV part back); kFull adds every
// K/V row. Restore of a kCheckpoint snapshot at position p needs this memory
// to hold the same prefix [0, p) (same chunks) and cuts the attention part
// back to p's row count. Not thread-safe (one user at a time).
class HybridMemory final : public LayerMemory {
 public:
  // RESOURCE_EXHAUSTED when the recurrent state cannot be allocated,
  // INVALID_ARGUMENT for a geometry without recurrent layers.
  static absl::StatusOr<std::unique_ptr<HybridMemory>> Create(const HybridGeometry& geometry, const void* owner);

  MemoryCapabilities caps() const override;
  Pos next_pos() const override { return next_pos_; }
  absl::Status Truncate(Pos p) override;
  absl::StatusOr<Snapshot> Capture(SnapshotScope scope) const override;
  absl::Status Restore(const Snapshot& snapshot) override;
  size_t Bytes(SnapshotScope scope) const override;

  // LayerMemory: rows are the attention part's (chunks store more rows
  // than positions).
  int64_t stored_rows() const override { return kv_.next_pos(); }
  absl::Status Reserve(Pos end, int64_t end_rows) override;
  KvRows kv(int32_t slot) override { return kv_.kv(slot); }
  RecurrentState recurrent(int32_t slot) override { return rec_->recurrent(slot); }
  RecurrentState recurrent_in(uint8_t* state, int32_t slot) const override { return rec_->recurrent_in(state, slot); }

  // --- Direct access (tests). ---
  const HybridGeometry& geometry() const { return geometry_; }
  KvMemory& attention() { return kv_; }
  RecurrentMemory& recurrent_part() { return *rec_; }
  const std::vector<ChunkExtent>& chunks() const { return chunks_; }
  // For a snapshot the backend takes inside a token run starting at
  // next_pos() (SequenceRun::snapshot_rows): a kCheckpoint snapshot at `pos`
  // (> next_pos(), no chunk in between) complete but for its recurrent
  // state, which the backend writes at *recurrent_state in RecurrentMemory's
  // encoding (through recurrent_in). The pointer is valid
  // while the returned Snapshot's data is neither resized nor moved from.
  Snapshot AllocateCheckpointAhead(Pos pos, uint8_t** recurrent_state) const override;
  // Records a run the backend absorbed: `n_rows` rows spanning `span`
  // positions; `chunk` says whether it was an embedding chunk. The backend
  // has written the K/V rows and advanced the recurrent states.
  void Commit(Pos span, int64_t n_rows, bool chunk) override;

 private:
  HybridMemory(const HybridGeometry& geometry, const void* owner, std::unique_ptr<RecurrentMemory> rec);
  // Rows absorbed at position p, or FAILED_PRECONDITION when p is inside a
  // chunk. p must be within [0, next_pos_].
  absl::StatusOr<int64_t> RowsAt(Pos p) const;
  size_t HeaderBytes(size_t n_chunks) const;

  HybridGeometry geometry_;
  KvMemory kv_;
  std::unique_ptr<RecurrentMemory> rec_;
  std::vector<ChunkExtent> chunks_;
  Pos next_pos_ = 0;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MEMORY_HYBRID_MEMORY_H_
