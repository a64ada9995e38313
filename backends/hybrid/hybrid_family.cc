// The hybrid family (hybrid_backend.h): its architectures and the memory of
// their sequences.
#include "backends/hybrid/hybrid_backend.h"
#include "backends/hybrid/hybrid_loading.h"
#include "backends/layers/family.h"
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

// A full K/V cache per attention slot and a state per recurrent slot;
// snapshots inside runs.
absl::StatusOr<FamilyMemory> CompositePlan(const ModelFile& model, const ArchShape& s, const BackendOptions& options) {
  HybridGeometry g;
  g.layout =
      MemoryLayout(model, "cairn-hybrid-f32-v3",
                   {s.n_full_slots, s.n_recurrent_slots, KvRowFloats(s.kv_widths), s.conv_floats, s.state_floats});
  g.attention.layers = s.kv_widths;
  g.attention.capacity = options.max_context > 0 ? options.max_context : s.n_ctx_train;
  g.attention.layout = FingerprintMix(g.layout, "attention");
  g.recurrent_layers = s.n_recurrent_slots;
  g.conv_floats = s.conv_floats;
  g.state_floats = s.state_floats;
  FamilyMemory memory;
  memory.create = [g](const void* owner) -> absl::StatusOr<std::unique_ptr<LayerMemory>> {
    absl::StatusOr<std::unique_ptr<HybridMemory>> m = HybridMemory::Create(g, owner);
    if (!m.ok()) return m.status();
    return std::unique_ptr<LayerMemory>(std::move(*m));
  };
  memory.capacity = g.attention.capacity;
  memory.snapshots_within_run = true;
  return memory;
}

}  // namespace

BackendFamily HybridFamily() { return LayeredFamily("hybrid", kArchs, &CompositePlan); }

}  // namespace cairn
