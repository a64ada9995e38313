// mamba2: the Mamba wiring with Mamba-2 mixers (multi-head SSM with scalar
// decay per head, groups of B/C, grouped RMSNorm of y * silu(z)).
#include "backends/recurrent/mamba.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadMamba2(const ModelLoader& loader) {
  return LoadMambaStack(loader, MambaVersion::kMamba2);
}

}  // namespace cairn
