#include <limits>

#include "backends/layers/layered_backend.h"
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

}  // namespace

std::vector<std::string> RecurrentArchs() { return ArchNames(kArchs); }

absl::StatusOr<std::unique_ptr<Backend>> CreateRecurrentBackend(std::shared_ptr<const ModelFile> model,
                                                                const BackendOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("no model");
  absl::StatusOr<std::unique_ptr<ArchModel>> arch = LoadArch(kArchs, *model, kRecurrentFamily);
  if (!arch.ok()) return arch.status();
  const ArchShape& s = (*arch)->shape();
  const uint64_t layout = MemoryLayout(*model, "cairn-recurrent-f32-v2",
                                       {s.n_recurrent_slots, s.conv_floats, s.state_floats});
  FamilyMemory memory;
  memory.family = kRecurrentFamily;
  memory.create = [layout, s](const void* owner) -> absl::StatusOr<std::unique_ptr<LayerMemory>> {
    absl::StatusOr<std::unique_ptr<RecurrentMemory>> m =
        RecurrentMemory::Create(owner, layout, s.n_recurrent_slots, s.conv_floats, s.state_floats);
    if (!m.ok()) return m.status();
    return std::unique_ptr<LayerMemory>(std::move(*m));
  };
  memory.caps.truncatable = false;
  memory.caps.rollback_window = 0;
  memory.caps.has_checkpoint_state = true;
  // No attention rows: only positions are bounded, by --max-context if set.
  memory.capacity = options.max_context > 0 ? options.max_context : std::numeric_limits<Pos>::max();
  memory.snapshots_within_run = true;
  memory.ubatch_rows = kUbatchRows;
  return CreateLayeredBackend(std::move(model), *std::move(arch), std::move(memory), options);
}

absl::Status RegisterRecurrentFamily(BackendRegistry& registry) {
  return registry.Register(kRecurrentFamily, RecurrentArchs(), &CreateRecurrentBackend);
}

}  // namespace cairn
