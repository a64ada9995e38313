#include "backends/memory.h"

namespace cairn {

const char* ScopeName(SnapshotScope scope) {
  return scope == SnapshotScope::kFull ? "full" : "checkpoint";
}

}  // namespace cairn
