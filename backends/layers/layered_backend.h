// The Backend every family builds: an architecture's wiring (ArchModel) run
// over a family's memory (a LayerMemory per sequence).
//
// It owns what no architecture or family should write again: input
// validation (ValidateForwardBatch), reserving each sequence's memory before
// any compute, the snapshots taken inside runs, splitting long runs into
// micro-batches where the family asks for it, the thread pool and work
// buffers, committing the memories, and serializing Forward calls.
#ifndef CAIRN_BACKENDS_LAYERS_LAYERED_BACKEND_H_
#define CAIRN_BACKENDS_LAYERS_LAYERED_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/layers/arch_model.h"
#include "backends/layers/packed_weights.h"
#include "backends/memory/layer_memory.h"

namespace cairn {

// What a family decides about the memory of its sequences.
struct FamilyMemory {
  std::string family;  // ModelInfo::family
  // A fresh memory (next_pos() == 0) for the backend `owner`. ModelInfo's
  // capabilities are those of one made for no owner.
  std::function<absl::StatusOr<std::unique_ptr<LayerMemory>>(const void* owner)> create;
  int64_t capacity = 0;               // positions and stored rows a sequence may reach; 0: no limit
  bool snapshots_within_run = false;  // SequenceRun::snapshot_rows honoured
  // > 0: runs are cut into micro-batches of at most this many rows (bounds
  // the work buffers of long prompts; a run continues from the state the
  // previous micro-batch left, which only sequential mixers allow).
  int64_t ubatch_rows = 0;
};

// The backend of `arch` (loaded from `model`, its matrices packed by
// `packed` when not null) with `memory`; it keeps `model` and `packed`
// alive. ModelInfo's name is options.name or the file's stem.
// INVALID_ARGUMENT for a null model or a negative max_context; the error of
// a memory that cannot be created.
absl::StatusOr<std::unique_ptr<Backend>> CreateLayeredBackend(std::shared_ptr<const ModelFile> model,
                                                              std::unique_ptr<ArchModel> arch, FamilyMemory memory,
                                                              const BackendOptions& options,
                                                              std::unique_ptr<PackedWeights> packed = nullptr);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_LAYERED_BACKEND_H_
