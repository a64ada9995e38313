// The recurrent family (recurrent_backend.h): its architectures and the
// memory of their sequences.
#include <limits>

#include "backends/layers/family.h"
#include "backends/memory/fingerprint.h"
#include "backends/memory/recurrent_memory.h"
#include "backends/recurrent/mamba.h"
#include "backends/recurrent/recurrent_backend.h"

namespace cairn {
namespace {

constexpr ArchEntry kArchs[] = {
    {"mamba2", &LoadMamba2},
    {"mamba", &LoadMamba},
};

// Rows per micro-batch: large enough for sgemm to reach its peak on the
// projections, small enough that the work buffers stay tens of MiB.
constexpr int64_t kUbatchRows = 512;

// A state per layer, snapshots inside runs, long runs in micro-batches.
absl::StatusOr<FamilyMemory> StatePlan(const ModelFile& model, const ArchShape& s, const BackendOptions& options) {
  const uint64_t layout =
      MemoryLayout(model, "cairn-recurrent-f32-v2", {s.n_recurrent_slots, s.conv_floats, s.state_floats});
  FamilyMemory memory;
  memory.create = [layout, s](const void* owner) -> absl::StatusOr<std::unique_ptr<LayerMemory>> {
    absl::StatusOr<std::unique_ptr<RecurrentMemory>> m =
        RecurrentMemory::Create(owner, layout, s.n_recurrent_slots, s.conv_floats, s.state_floats);
    if (!m.ok()) return m.status();
    return std::unique_ptr<LayerMemory>(std::move(*m));
  };
  // No attention rows: only positions are bounded, by --max-context if set.
  memory.capacity = options.max_context > 0 ? options.max_context : std::numeric_limits<Pos>::max();
  memory.snapshots_within_run = true;
  memory.ubatch_rows = kUbatchRows;
  return memory;
}

}  // namespace

BackendFamily RecurrentFamily() { return LayeredFamily("recurrent", kArchs, &StatePlan); }

}  // namespace cairn
