#include <limits>

#include "backends/layers/layered_backend.h"
#include "backends/memory/fingerprint.h"
#include "backends/memory/kv_memory.h"
#include "backends/transformer/llama.h"
#include "backends/transformer/transformer.h"

namespace cairn {
namespace {

constexpr ArchEntry kArchs[] = {
    {"llama", &LoadLlama},
    {"qwen2", &LoadQwen2},
    {"qwen3", &LoadQwen3},
    {"qwen3moe", &LoadQwen3Moe},
};

}  // namespace

std::vector<std::string> TransformerArchs() { return ArchNames(kArchs); }

absl::StatusOr<std::unique_ptr<Backend>> CreateTransformerBackend(std::shared_ptr<const ModelFile> model,
                                                                  const BackendOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("no model");
  absl::StatusOr<std::unique_ptr<ArchModel>> arch = LoadArch(kArchs, *model, kTransformerFamily);
  if (!arch.ok()) return arch.status();
  const ArchShape& s = (*arch)->shape();
  KvGeometry g;
  g.n_layers = s.n_full_slots;
  g.k_dim = s.k_dim;
  g.v_dim = s.v_dim;
  g.capacity = options.max_context > 0 ? options.max_context : s.n_ctx_train;
  g.layout = MemoryLayout(*model, "cairn-kv-f32-v2", {g.n_layers, g.k_dim, g.v_dim});

  FamilyMemory memory;
  memory.family = kTransformerFamily;
  memory.create = [g](const void* owner) -> absl::StatusOr<std::unique_ptr<LayerMemory>> {
    return std::make_unique<KvMemory>(g, owner);
  };
  memory.caps.truncatable = true;
  memory.caps.rollback_window = 0;
  memory.caps.rollback_slack = std::numeric_limits<Pos>::max();
  memory.caps.has_checkpoint_state = false;
  memory.capacity = g.capacity;
  return CreateLayeredBackend(std::move(model), *std::move(arch), std::move(memory), options);
}

absl::Status RegisterTransformerFamily(BackendRegistry& registry) {
  return registry.Register(kTransformerFamily, TransformerArchs(), &CreateTransformerBackend);
}

}  // namespace cairn
