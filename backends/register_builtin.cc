#include "backends/register_builtin.h"

#include "backends/hybrid/hybrid_backend.h"
#include "backends/recurrent/recurrent_backend.h"
#include "backends/swa/swa_backend.h"
#include "backends/transformer/transformer.h"

namespace cairn {

absl::Status RegisterBuiltinBackends(BackendRegistry& registry) {
  // One line per family.
  if (absl::Status s = RegisterTransformerFamily(registry); !s.ok()) return s;
  if (absl::Status s = RegisterSwaFamily(registry); !s.ok()) return s;
  if (absl::Status s = RegisterRecurrentFamily(registry); !s.ok()) return s;
  if (absl::Status s = RegisterHybridFamily(registry); !s.ok()) return s;
  return absl::OkStatus();
}

}  // namespace cairn
