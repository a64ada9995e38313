#include <algorithm>

#include "absl/strings/str_cat.h"
#include "backends/layers/layered_backend.h"
#include "backends/memory/fingerprint.h"
#include "backends/memory/swa_memory.h"
#include "backends/swa/gemma.h"
#include "backends/swa/gpt_oss.h"
#include "backends/swa/swa_backend.h"

namespace cairn {
namespace {

constexpr ArchEntry kArchs[] = {
    {"gemma3", &LoadGemma3},
    {"gemma2", &LoadGemma2},
    {"gpt-oss", &LoadGptOss},
};

}  // namespace

std::vector<std::string> SwaArchs() { return ArchNames(kArchs); }

absl::StatusOr<std::unique_ptr<Backend>> CreateSwaBackend(std::shared_ptr<const ModelFile> model,
                                                          const BackendOptions& options, const SwaOptions& swa) {
  if (model == nullptr) return absl::InvalidArgumentError("no model");
  if (swa.rollback_slack <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("rollback slack must be positive, got ", swa.rollback_slack));
  }
  absl::StatusOr<std::unique_ptr<ArchModel>> arch = LoadArch(kArchs, *model, kSwaFamily);
  if (!arch.ok()) return arch.status();
  const ArchShape& s = (*arch)->shape();
  SwaGeometry g;
  g.n_global = s.n_full_slots;
  g.n_local = s.n_window_slots;
  g.k_dim = s.k_dim;
  g.v_dim = s.v_dim;
  g.capacity = options.max_context > 0 ? options.max_context : s.n_ctx_train;
  g.window = std::max<int32_t>(s.window, 1);
  // W - 1 rows serve the next query; the slack is what Truncate can give back.
  const int64_t ring = static_cast<int64_t>(g.window) - 1 + swa.rollback_slack;
  g.ring_rows = static_cast<Pos>(std::min<int64_t>(ring, std::max<Pos>(g.capacity, 1)));
  g.layout = MemoryLayout(*model, "cairn-swa-f32-v2",
                          {g.n_global, g.n_local, g.k_dim, g.v_dim, g.window, g.ring_rows});

  FamilyMemory memory;
  memory.family = kSwaFamily;
  memory.create = [g](const void* owner) -> absl::StatusOr<std::unique_ptr<LayerMemory>> {
    return std::make_unique<SwaMemory>(g, owner);
  };
  memory.caps = SwaMemory(g, nullptr).caps();
  memory.capacity = g.capacity;
  return CreateLayeredBackend(std::move(model), *std::move(arch), std::move(memory), options);
}

absl::Status RegisterSwaFamily(BackendRegistry& registry) {
  return registry.Register(kSwaFamily, SwaArchs(),
                           [](std::shared_ptr<const ModelFile> model, const BackendOptions& options) {
                             return CreateSwaBackend(std::move(model), options);
                           });
}

}  // namespace cairn
