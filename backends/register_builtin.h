// Registers every backend family compiled into this build.
#ifndef CAIRN_BACKENDS_REGISTER_BUILTIN_H_
#define CAIRN_BACKENDS_REGISTER_BUILTIN_H_

#include "absl/status/status.h"
#include "backends/backend.h"

namespace cairn {

// Calls each family's register function once; ALREADY_EXISTS when called
// twice on the same registry.
absl::Status RegisterBuiltinBackends(BackendRegistry& registry);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_REGISTER_BUILTIN_H_
