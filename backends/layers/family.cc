#include "backends/layers/family.h"

#include <memory>
#include <utility>

namespace cairn {

BackendFamily LayeredFamily(std::string name, std::span<const ArchEntry> archs, MemoryPlan plan) {
  BackendFamily family;
  family.name = name;
  family.archs = ArchNames(archs);
  family.create = [name, archs, plan = std::move(plan)](
                      std::shared_ptr<const ModelFile> model,
                      const BackendOptions& options) -> absl::StatusOr<std::unique_ptr<Backend>> {
    if (model == nullptr) return absl::InvalidArgumentError("no model");
    std::unique_ptr<PackedWeights> packed;
    if (options.pack_weights && !options.exact_activations) {
      packed = std::make_unique<PackedWeights>(*model, options.n_threads);
    }
    absl::StatusOr<std::unique_ptr<ArchModel>> arch = LoadArch(archs, *model, name, packed.get());
    if (!arch.ok()) return arch.status();
    if (packed != nullptr) packed->FinishLoading();
    absl::StatusOr<FamilyMemory> memory = plan(*model, (*arch)->shape(), options);
    if (!memory.ok()) return memory.status();
    memory->family = name;
    return CreateLayeredBackend(std::move(model), *std::move(arch), *std::move(memory), options, std::move(packed));
  };
  return family;
}

}  // namespace cairn
