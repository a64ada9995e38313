// The memory of one live sequence, as the checkpoint component sees it.
//
// A pure transformer keeps one K/V row per position: cutting it back is a
// Truncate. A recurrent layer keeps a fixed-size state that has absorbed every
// token: it can only be restored from a copy. An SWA layer keeps a ring of the
// last W positions: it can go back only as far as the ring's slack. This
// interface expresses exactly those differences and nothing about tensor
// layout, so checkpoint/ never depends on a family.
#ifndef CAIRN_BACKENDS_MEMORY_H_
#define CAIRN_BACKENDS_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cairn {

// A sequence position. Positions are not token counts: a multimodal chunk of
// N embedding rows may advance the position by fewer than N.
using Pos = int32_t;
using TokenId = int32_t;

struct MemoryCapabilities {
  // Any absorbed position can be cut back (full KV cache only).
  bool truncatable = false;
  // How many positions can be cut back right now without a checkpoint
  // (SWA ring slack; 0 for recurrent state; next_pos() when truncatable).
  Pos rollback_window = 0;
  // What rollback_window becomes right after a Forward once the sequence is
  // long enough (the SWA ring slack; 0 for recurrent state; the largest Pos
  // when truncatable): lets a caller plan for the window a prompt will leave.
  Pos rollback_slack = 0;
  // Part of the memory can only be recovered from a snapshot.
  bool has_checkpoint_state = false;
};

enum class SnapshotScope {
  kCheckpoint,  // only what Truncate cannot recover (recurrent state, SWA rings)
  kFull,        // everything: the sequence can be rebuilt from this alone
};
const char* ScopeName(SnapshotScope scope);

// A copy of (part of) a sequence memory at one position. Plain data: it can
// be stored, written to disk and read back. `layout` identifies the model and
// memory geometry that produced it; Restore refuses a foreign layout.
struct Snapshot {
  Pos pos = 0;  // the memory's next_pos() when captured
  SnapshotScope scope = SnapshotScope::kCheckpoint;
  uint64_t layout = 0;        // fingerprint of model + memory geometry
  std::vector<uint8_t> data;  // family-defined encoding

  size_t bytes() const { return data.size(); }
};

// One per live sequence. Not thread-safe: a sequence is used by one thread at
// a time (the model's scheduler). Every failing call changes nothing.
class SequenceMemory {
 public:
  virtual ~SequenceMemory() = default;

  virtual MemoryCapabilities caps() const = 0;

  // Positions [0, next_pos()) have been absorbed.
  virtual Pos next_pos() const = 0;

  // Forgets positions >= p. Truncate(next_pos()) is a no-op and Truncate(0)
  // always succeeds (reset). Fails with FAILED_PRECONDITION, changing
  // nothing, when the memory cannot go back to p (recurrent state, SWA ring
  // beyond its slack, or p inside a multimodal chunk); INVALID_ARGUMENT when
  // p < 0 or p > next_pos(). Never wipes the sequence as a side effect.
  virtual absl::Status Truncate(Pos p) = 0;

  // Copies the memory at next_pos(). kCheckpoint copies only the part
  // Truncate cannot recover; kFull copies everything. Fails with
  // FAILED_PRECONDITION when the position is inside a multimodal chunk.
  virtual absl::StatusOr<Snapshot> Capture(SnapshotScope scope) const = 0;

  // Exact: afterwards the memory behaves bit for bit as when `snapshot` was
  // captured. A kFull snapshot replaces everything. A kCheckpoint snapshot at
  // position p needs the truncatable part (attention KV) to hold the same
  // prefix [0, p) already (the caller guarantees the tokens match); it is cut
  // back to p. Errors (memory unchanged): INVALID_ARGUMENT for a snapshot of
  // another layout or a malformed one; FAILED_PRECONDITION when a kCheckpoint
  // snapshot's position is beyond what the truncatable part holds.
  virtual absl::Status Restore(const Snapshot& snapshot) = 0;

  // Bytes a Capture(scope) would produce right now.
  virtual size_t Bytes(SnapshotScope scope) const = 0;
};

// For a long-running process: snapshots are large buffers (a recurrent
// state is MiBs) allocated and freed all the time. By default glibc gives
// such blocks back to the OS on free and takes them again, zero-filled page
// by page, on the next malloc, which costs several times the copy itself
// (measured: 13 ms instead of 2.3 ms per 25 MiB snapshot). This keeps freed
// memory in the process for reuse. Call once at startup, before threads.
void KeepFreedSnapshotMemory();

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MEMORY_H_
