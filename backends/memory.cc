#include "backends/memory.h"

#include <malloc.h>

#include <climits>

namespace cairn {

const char* ScopeName(SnapshotScope scope) { return scope == SnapshotScope::kFull ? "full" : "checkpoint"; }

void KeepFreedSnapshotMemory() {
  // Blocks up to 1 GiB come from the heap instead of their own mmap, and the
  // heap keeps up to 2 GiB of free space: a freed snapshot's pages serve the
  // next one.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

}  // namespace cairn
