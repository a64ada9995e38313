#include "backends/register_builtin.h"

#include "backends/hybrid/hybrid_backend.h"
#include "backends/recurrent/recurrent_backend.h"
#include "backends/swa/swa_backend.h"
#include "backends/transformer/transformer.h"

namespace cairn {

absl::Status RegisterBuiltinBackends(BackendRegistry& registry) {
  for (const BackendFamily& family : {TransformerFamily(), SwaFamily(), RecurrentFamily(), HybridFamily()}) {
    if (absl::Status s = registry.Register(family); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace cairn
