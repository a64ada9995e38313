#include "backends/hybrid/hybrid_backend.h"
#include "backends/hybrid/hybrid_loading.h"
#include "backends/layers/layered_backend.h"
#include "backends/memory/fingerprint.h"
#include "backends/memory/hybrid_memory.h"

namespace cairn {
namespace {

constexpr ArchEntry kArchs[] = {
    {"granitehybrid", &LoadGraniteHybrid},
    {"qwen35", &LoadQwen35},
    {"qwen35moe", &LoadQwen35Moe},
    {"qwen3next", &LoadQwen3Next},
    {"falcon-h1", &LoadFalconH1},
    {"jamba", &LoadJamba},
    {"nemotron_h", &LoadNemotronH},
    {"nemotron_h_moe", &LoadNemotronH},
    {"lfm2", &LoadLfm2},
};

}  // namespace

std::vector<std::string> HybridArchs() { return ArchNames(kArchs); }

absl::StatusOr<std::unique_ptr<Backend>> CreateHybridBackend(std::shared_ptr<const ModelFile> model,
                                                             const BackendOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("no model");
  absl::StatusOr<std::unique_ptr<ArchModel>> arch = LoadArch(kArchs, *model, kHybridFamily);
  if (!arch.ok()) return arch.status();
  const ArchShape& s = (*arch)->shape();
  HybridGeometry g;
  g.layout = MemoryLayout(*model, "cairn-hybrid-f32-v2",
                          {s.n_full_slots, s.n_recurrent_slots, s.k_dim, s.v_dim, s.conv_floats, s.state_floats});
  g.attention.n_layers = s.n_full_slots;
  g.attention.k_dim = s.k_dim;
  g.attention.v_dim = s.v_dim;
  g.attention.capacity = options.max_context > 0 ? options.max_context : s.n_ctx_train;
  g.attention.layout = FingerprintMix(g.layout, "attention");
  g.recurrent_layers = s.n_recurrent_slots;
  g.conv_floats = s.conv_floats;
  g.state_floats = s.state_floats;

  FamilyMemory memory;
  memory.family = kHybridFamily;
  memory.create = [g](const void* owner) -> absl::StatusOr<std::unique_ptr<LayerMemory>> {
    absl::StatusOr<std::unique_ptr<HybridMemory>> m = HybridMemory::Create(g, owner);
    if (!m.ok()) return m.status();
    return std::unique_ptr<LayerMemory>(std::move(*m));
  };
  memory.caps.truncatable = false;
  memory.caps.rollback_window = 0;
  memory.caps.has_checkpoint_state = true;
  memory.capacity = g.attention.capacity;
  memory.snapshots_within_run = true;
  return CreateLayeredBackend(std::move(model), *std::move(arch), std::move(memory), options);
}

absl::Status RegisterHybridFamily(BackendRegistry& registry) {
  return registry.Register(kHybridFamily, HybridArchs(), &CreateHybridBackend);
}

}  // namespace cairn
