// RegisterBuiltinBackends for a server built without any family
// (cairn-server-core): its families come from plugins (backends/plugin.h).
#include "backends/register_builtin.h"

namespace cairn {

absl::Status RegisterBuiltinBackends(BackendRegistry& registry) {
  (void)registry;
  return absl::OkStatus();
}

}  // namespace cairn
