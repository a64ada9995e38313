// Registers every backend family linked into this binary: all of them with
// cairn_backends_all (register_builtin.cc), none with cairn_backends_none
// (register_none.cc, for a server that loads its families as plugins).
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
