// The memory of one sequence of an interleaved sliding-window model (gemma3,
// gemma2): global layers keep a full F32 K/V row per position (a KvMemory);
// local layers keep a ring of the last R = W - 1 + slack positions, where W
// is the window (a query at p sees keys p - W + 1 .. p) and `slack` is how far
// the sequence can be cut back without a checkpoint.
//
// Rollback: after absorbing [0, n) the rings hold positions [oldest, n).
// Truncate(p) needs the W - 1 keys before p, so it succeeds iff p == 0 or
// oldest <= max(0, p - (W - 1)); caps().rollback_window is n minus the
// smallest such p. It equals n until a ring wraps, then `slack` right after
// a Forward, and shrinks by what a Truncate takes.
//
// Slots: attention slots [0, n_global) are the global layers, slots
// [n_global, n_global + n_local) the local layers' rings (KvRows::ring).
//
// Snapshots: kCheckpoint holds the rings' valid rows and the positions
// (bounded by R rows per local layer whatever the context length); restoring
// it cuts the global K/V back to the snapshot's position. kFull also holds
// every global row. Both restore bit for bit, rollback reach included.
#ifndef CAIRN_BACKENDS_MEMORY_SWA_MEMORY_H_
#define CAIRN_BACKENDS_MEMORY_SWA_MEMORY_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/memory.h"
#include "backends/memory/kv_memory.h"
#include "backends/memory/layer_memory.h"

namespace cairn {

struct SwaGeometry {
  std::vector<KvWidth> global;  // layers with a full K/V cache: their row widths
  std::vector<KvWidth> local;   // sliding-window layers (a ring each)
  int32_t window = 0;           // W >= 1
  Pos ring_rows = 0;            // R >= W - 1: positions a ring holds
  Pos capacity = 0;             // maximum positions of a sequence
  uint64_t layout = 0;          // fingerprint of model + geometry (Snapshot::layout)

  int32_t n_global() const { return static_cast<int32_t>(global.size()); }
  int32_t n_local() const { return static_cast<int32_t>(local.size()); }
};

class SwaMemory final : public LayerMemory {
 public:
  SwaMemory(const SwaGeometry& geometry, const void* owner);

  MemoryCapabilities caps() const override;
  Pos next_pos() const override { return next_pos_; }
  absl::Status Truncate(Pos p) override;
  absl::StatusOr<Snapshot> Capture(SnapshotScope scope) const override;
  absl::Status Restore(const Snapshot& snapshot) override;
  size_t Bytes(SnapshotScope scope) const override;

  // LayerMemory (rows are positions: no embedding chunks).
  absl::Status Reserve(Pos end, int64_t end_rows) override;
  KvRows kv(int32_t slot) override;
  void Commit(Pos span, int64_t rows, bool chunk) override;

  // --- Direct access (tests, and the LayerMemory methods above). ---
  const SwaGeometry& geometry() const { return geometry_; }
  // The oldest position the rings still hold.
  Pos oldest() const { return oldest_; }
  // Makes room for positions [0, end) in the global cache and the rings.
  // RESOURCE_EXHAUSTED beyond the capacity or when allocation fails; never
  // changes what is absorbed.
  absl::Status Reserve(Pos end);
  // Global layer g's rows: K of position p at global_k(g) + p * its K width.
  float* global_k(int32_t g) { return global_.k(g); }
  float* global_v(int32_t g) { return global_.v(g); }
  // Ring row of position p of local layer l (valid for p below the last
  // Reserve; holds p's data only while oldest() <= p < next_pos()).
  float* ring_k(int32_t l, Pos p) { return ring_k_[l].data() + Slot(p) * geometry_.local[l].k; }
  float* ring_v(int32_t l, Pos p) { return ring_v_[l].data() + Slot(p) * geometry_.local[l].v; }
  const float* ring_k(int32_t l, Pos p) const { return ring_k_[l].data() + Slot(p) * geometry_.local[l].k; }
  const float* ring_v(int32_t l, Pos p) const { return ring_v_[l].data() + Slot(p) * geometry_.local[l].v; }
  // Marks [0, end) absorbed after the backend wrote the rows of
  // [next_pos(), end) (global rows, and ring rows of the last R positions).
  void Advance(Pos end);

 private:
  int64_t Slot(Pos p) const { return static_cast<int64_t>(p % geometry_.ring_rows); }
  // Smallest position Truncate can reach other than 0.
  Pos LowestTruncate() const;
  absl::Status ReserveRings(Pos end);
  // Calls fn(first position, count) for the runs of consecutive ring slots
  // that hold positions [begin, end) (end - begin <= ring_rows).
  void ForEachRingSegment(Pos begin, Pos end, const std::function<void(Pos, Pos)>& fn) const;

  SwaGeometry geometry_;
  int64_t local_row_floats_, global_row_floats_;  // K and V floats per position over the layers
  KvMemory global_;                               // n_global layers; its next_pos follows next_pos_
  Pos next_pos_ = 0;
  Pos oldest_ = 0;
  Pos ring_alloc_ = 0;  // rows allocated per ring (<= ring_rows)
  std::vector<std::vector<float>> ring_k_, ring_v_;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MEMORY_SWA_MEMORY_H_
