// Checkpoint: one stored checkpoint (a snapshot, the logits that may come
// with it, the caller's tag) and what it counts against a byte budget. Held
// by the store's RAM tier and written by its disk tier (disk_tier.h).
#ifndef CAIRN_CHECKPOINT_CHECKPOINT_H_
#define CAIRN_CHECKPOINT_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/memory.h"

namespace cairn::checkpoint {

using CheckpointId = uint64_t;  // never 0

// Bookkeeping counted per checkpoint beyond its bytes (its entry, its index
// node), so that many tiny checkpoints do not pass for free.
inline constexpr size_t kCheckpointOverheadBytes = 128;

struct Checkpoint {
  Snapshot snapshot;
  // Logits of the row just before snapshot.pos when kept (end of a prompt),
  // so that a regenerate needs no forward pass; empty otherwise.
  std::vector<float> logits;
  // Opaque caller data persisted with the checkpoint (the engine stores the
  // tenant and symbol path, to rebuild its index after a restart).
  std::string tag;

  // What it counts against a budget.
  size_t bytes() const {
    return snapshot.data.size() + logits.size() * sizeof(float) + tag.size() + kCheckpointOverheadBytes;
  }
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_CHECKPOINT_H_
