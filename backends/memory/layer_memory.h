// The side of a sequence memory that a forward pass writes into.
//
// SequenceMemory (backends/memory.h) is what the checkpoint component sees:
// positions, truncation, snapshots. A backend's Forward also needs the
// storage itself: the K/V rows of each attention layer and the state of each
// recurrent layer. Layers address it by slot, the index of a layer among the
// layers of its kind (the architecture numbers them, the family sizes the
// memory for that many). Every memory in backends/memory/ implements this
// interface, and the shared forward pass (backends/layers/forward_pass.h)
// uses nothing else, so families differ only in which memory they create.
//
// Protocol of one Forward call on one sequence: Reserve (the only step that
// can fail; it never changes what is absorbed), then writes through kv() and
// recurrent() (and, for checkpoints inside the run, into snapshots from
// AllocateCheckpointAhead through recurrent_in()), then Commit. Not
// thread-safe as a whole (one Forward at a time per memory, as
// SequenceMemory says); different rows and slots may be written from
// different threads in between.
#ifndef CAIRN_BACKENDS_MEMORY_LAYER_MEMORY_H_
#define CAIRN_BACKENDS_MEMORY_LAYER_MEMORY_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "backends/memory.h"

namespace cairn {

// Where one attention layer of one sequence keeps its K/V rows. Row j (a
// stored-row index, see LayerMemory::stored_rows) is at k + j * k_stride and
// v + j * v_stride. A sliding-window ring (ring > 0) is indexed by position
// instead: position p at row p % ring, holding only the last `ring`
// positions absorbed.
struct KvRows {
  float* k = nullptr;
  float* v = nullptr;
  int64_t k_stride = 0;  // floats
  int64_t v_stride = 0;
  Pos ring = 0;
};

// The row widths of one attention layer, in floats: n_head_kv * head_dim of
// its keys and of its values. Layers of one model may differ (files declare
// attention.head_count_kv per layer).
struct KvWidth {
  int64_t k = 0;
  int64_t v = 0;
};

// `n_layers` layers of one width.
inline std::vector<KvWidth> UniformKvWidths(int32_t n_layers, int64_t k, int64_t v) {
  return std::vector<KvWidth>(static_cast<size_t>(n_layers), KvWidth{k, v});
}

// The floats one position takes over `layers` (K and V rows).
inline int64_t KvRowFloats(std::span<const KvWidth> layers) {
  int64_t n = 0;
  for (const KvWidth& w : layers) n += w.k + w.v;
  return n;
}

// The state of one recurrent layer of one sequence: the last d_conv - 1
// convolution inputs and the recurrent state proper (an SSM state or a
// DeltaNet matrix per head), in the layer's own layout.
struct RecurrentState {
  float* conv = nullptr;
  float* state = nullptr;
};

class LayerMemory : public SequenceMemory {
 public:
  // `owner` identifies the backend whose Forward may use this memory.
  explicit LayerMemory(const void* owner) : owner_(owner) {}
  const void* owner() const { return owner_; }

  // Rows the attention layers store so far: next_pos(), unless embedding
  // chunks stored more rows than the positions they advanced (M-RoPE).
  virtual int64_t stored_rows() const { return next_pos(); }

  // Makes room for a run that ends at position `end` with `end_rows` rows
  // stored. RESOURCE_EXHAUSTED beyond the capacity or when allocation fails;
  // never changes what is absorbed.
  virtual absl::Status Reserve(Pos end, int64_t end_rows) = 0;

  // The K/V rows of attention slot `slot`, valid up to the last Reserve.
  // A memory without attention layers returns an empty KvRows.
  virtual KvRows kv(int32_t slot) {
    (void)slot;
    return {};
  }

  // The state of recurrent slot `slot`. A memory without recurrent layers
  // returns an empty RecurrentState.
  virtual RecurrentState recurrent(int32_t slot) {
    (void)slot;
    return {};
  }

  // For a checkpoint inside a token run starting at next_pos(): a
  // kCheckpoint snapshot at `pos` (> next_pos()) that is complete but for
  // the recurrent states, which the forward pass writes through
  // recurrent_in(*state, slot) after the run's row pos - 1. The pointer is
  // valid while the Snapshot's data is neither resized nor moved from.
  // Memories without recurrent state cannot take such snapshots (the
  // family says so in ModelInfo::snapshots_within_run); they return an
  // empty Snapshot and a null state.
  virtual Snapshot AllocateCheckpointAhead(Pos pos, uint8_t** state) const {
    (void)pos;
    *state = nullptr;
    return {};
  }
  // Recurrent slot `slot` inside a state buffer from AllocateCheckpointAhead.
  virtual RecurrentState recurrent_in(uint8_t* state, int32_t slot) const {
    (void)state;
    (void)slot;
    return {};
  }

  // Records a run the forward pass absorbed: `span` positions, `rows` rows
  // stored (more than span only for an embedding chunk, `chunk`). The pass
  // has written the K/V rows and advanced the recurrent states.
  virtual void Commit(Pos span, int64_t rows, bool chunk) = 0;

 private:
  const void* owner_;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MEMORY_LAYER_MEMORY_H_
