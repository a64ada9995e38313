// The Mamba wiring, shared by the pure state-space architectures: every
// layer is x += mixer(RMSNorm(x)) with a Mamba-1 (mamba.cc) or Mamba-2
// (mamba2.cc) mixer, then the final norm and the output head; LoadMambaStack
// reads it into a LayerStack.
#ifndef CAIRN_BACKENDS_RECURRENT_MAMBA_H_
#define CAIRN_BACKENDS_RECURRENT_MAMBA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/layers/arch_model.h"
#include "backends/layers/mamba_mixer.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadMambaStack(const ModelLoader& loader, MambaVersion version);

// The loaders registered to the family (recurrent_family.cc).
absl::StatusOr<std::unique_ptr<ArchModel>> LoadMamba(const ModelLoader& loader);
absl::StatusOr<std::unique_ptr<ArchModel>> LoadMamba2(const ModelLoader& loader);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_RECURRENT_MAMBA_H_
