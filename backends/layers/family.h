// A family of the layered backend, reduced to what distinguishes it: its
// name, the table of architectures it serves (each a loader: arch_model.h)
// and the memory its sequences get. A family's file is that table and a
// MemoryPlan; LayeredFamily makes the BackendFamily the registry takes.
//
// The factory LayeredFamily returns: INVALID_ARGUMENT for a null model, a
// file of another architecture ("architecture 'x' is not served by the
// <family> family") or one its loader refuses (with the loader's errors),
// or the plan's error; otherwise CreateLayeredBackend's result.
#ifndef CAIRN_BACKENDS_LAYERS_FAMILY_H_
#define CAIRN_BACKENDS_LAYERS_FAMILY_H_

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/layers/arch_model.h"
#include "backends/layers/layered_backend.h"

namespace cairn {

// The memory of a loaded model's sequences (FamilyMemory::family is filled
// in by LayeredFamily). An error refuses the model.
using MemoryPlan = std::function<absl::StatusOr<FamilyMemory>(const ModelFile& model, const ArchShape& shape,
                                                              const BackendOptions& options)>;

// The FamilyMemory of memories constructed as Memory(geometry, owner),
// positions and rows bounded at `capacity`.
template <typename Memory, typename Geometry>
FamilyMemory ConstructedMemory(const Geometry& geometry, int64_t capacity) {
  FamilyMemory memory;
  memory.create = [geometry](const void* owner) -> absl::StatusOr<std::unique_ptr<LayerMemory>> {
    return std::make_unique<Memory>(geometry, owner);
  };
  memory.capacity = capacity;
  return memory;
}

// `archs` must outlive the family (a static table).
BackendFamily LayeredFamily(std::string name, std::span<const ArchEntry> archs, MemoryPlan plan);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_FAMILY_H_
