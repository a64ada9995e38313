// A full F32 key/value cache: one K row and one V row per position and
// layer. Truncatable anywhere; a kCheckpoint snapshot is empty (Truncate
// recovers everything), a kFull snapshot holds every absorbed row.
//
// The transformer family's memory, and the attention part of the sliding-
// window and hybrid memories. Attention slot l is layer slot l's rows, of
// that layer's own widths.
#ifndef CAIRN_BACKENDS_MEMORY_KV_MEMORY_H_
#define CAIRN_BACKENDS_MEMORY_KV_MEMORY_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/memory.h"
#include "backends/memory/layer_memory.h"

namespace cairn {

struct KvGeometry {
  std::vector<KvWidth> layers;  // per layer: floats per K row and V row
  Pos capacity = 0;             // maximum rows
  uint64_t layout = 0;          // fingerprint of model + geometry (see Snapshot::layout)

  int32_t n_layers() const { return static_cast<int32_t>(layers.size()); }
};

class KvMemory final : public LayerMemory {
 public:
  KvMemory(const KvGeometry& geometry, const void* owner);

  MemoryCapabilities caps() const override;
  Pos next_pos() const override { return next_pos_; }
  absl::Status Truncate(Pos p) override;
  absl::StatusOr<Snapshot> Capture(SnapshotScope scope) const override;
  absl::Status Restore(const Snapshot& snapshot) override;
  size_t Bytes(SnapshotScope scope) const override;

  // LayerMemory. Rows count positions here (a KvMemory on its own takes no
  // embedding chunks); Commit advances by `rows`.
  absl::Status Reserve(Pos end, int64_t end_rows) override;
  KvRows kv(int32_t slot) override;
  void Commit(Pos span, int64_t rows, bool chunk) override;

  // --- For the composite memories that embed this one. ---
  const KvGeometry& geometry() const { return geometry_; }
  // Makes room for rows [0, n). RESOURCE_EXHAUSTED beyond the capacity or
  // when allocation fails; never changes the absorbed content.
  absl::Status Reserve(Pos n);
  // Row storage of a layer: K row of position p at k(layer) + p * the
  // layer's K width.
  // Valid for positions below the last successful Reserve.
  float* k(int32_t layer) { return k_[layer].data(); }
  float* v(int32_t layer) { return v_[layer].data(); }
  const float* k(int32_t layer) const { return k_[layer].data(); }
  const float* v(int32_t layer) const { return v_[layer].data(); }
  // Marks [0, p) as absorbed after the backend wrote those rows (p <= reserved).
  void SetNextPos(Pos p) { next_pos_ = p; }

 private:
  KvGeometry geometry_;
  int64_t row_floats_;  // K and V floats per position over all layers
  Pos next_pos_ = 0;
  Pos reserved_ = 0;
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MEMORY_KV_MEMORY_H_
