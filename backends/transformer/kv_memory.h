// A full F32 key/value cache: one K row and one V row per position and
// layer. Truncatable anywhere; a kCheckpoint snapshot is empty (Truncate
// recovers everything), a kFull snapshot holds every absorbed row.
//
// Families that own attention layers (transformer, hybrids) use it as their
// attention memory; `owner` lets a backend recognize its own memories.
#ifndef CAIRN_BACKENDS_TRANSFORMER_KV_MEMORY_H_
#define CAIRN_BACKENDS_TRANSFORMER_KV_MEMORY_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/memory.h"
#include "backends/model/gguf.h"

namespace cairn {

// Fingerprint of a model file: tensor names, types, shapes and samples of
// their bytes (FNV-1a). Families mix in their memory geometry with
// FingerprintMix to build a Snapshot::layout.
uint64_t ModelFingerprint(const ModelFile& model);
uint64_t FingerprintMix(uint64_t h, const void* data, size_t n);
inline uint64_t FingerprintMix(uint64_t h, int64_t v) { return FingerprintMix(h, &v, sizeof v); }

struct KvGeometry {
  int32_t n_layers = 0;
  int64_t k_dim = 0;      // floats per K row (n_head_kv * head_dim_k)
  int64_t v_dim = 0;      // floats per V row
  Pos capacity = 0;       // maximum positions
  uint64_t layout = 0;    // fingerprint of model + geometry (see Snapshot::layout)
};

class KvMemory final : public SequenceMemory {
 public:
  KvMemory(const KvGeometry& geometry, const void* owner);

  MemoryCapabilities caps() const override;
  Pos next_pos() const override { return next_pos_; }
  absl::Status Truncate(Pos p) override;
  absl::StatusOr<Snapshot> Capture(SnapshotScope scope) const override;
  absl::Status Restore(const Snapshot& snapshot) override;
  size_t Bytes(SnapshotScope scope) const override;

  // --- For the owning backend. ---
  const void* owner() const { return owner_; }
  const KvGeometry& geometry() const { return geometry_; }
  // Makes room for positions [0, n). RESOURCE_EXHAUSTED beyond the capacity
  // or when allocation fails; never changes the absorbed content.
  absl::Status Reserve(Pos n);
  // Row storage of a layer: K row of position p at k(layer) + p * k_dim.
  // Valid for positions below the last successful Reserve.
  float* k(int32_t layer) { return k_[layer].data(); }
  float* v(int32_t layer) { return v_[layer].data(); }
  const float* k(int32_t layer) const { return k_[layer].data(); }
  const float* v(int32_t layer) const { return v_[layer].data(); }
  // Marks [0, p) as absorbed after the backend wrote those rows (p <= reserved).
  void SetNextPos(Pos p) { next_pos_ = p; }

 private:
  KvGeometry geometry_;
  const void* owner_;
  Pos next_pos_ = 0;
  Pos reserved_ = 0;
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_TRANSFORMER_KV_MEMORY_H_
