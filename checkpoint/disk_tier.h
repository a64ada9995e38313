// DiskTier: the checkpoint store's files. The store (store.h) decides what
// goes to disk, when, and within which budget; this unit owns how: the file
// format, its verification, and the scan that recovers a directory after a
// restart. All file I/O goes through an Env (env.h), so tests can fail any
// operation.
//
// One file per checkpoint, `ckpt-<id>.bin` in the tier's directory, written
// atomically (Env::WriteFileAtomically: temp file `ckpt-<id>.tmp`, fsync,
// rename, fsync of the directory): a fixed little-endian header with its own
// 64-bit hash, then the snapshot bytes, the logits, the tag, and a trailer
// hash over header and payload. A torn or corrupt file is detected (at Scan
// from its header and size, at Read from both hashes) and never restored.
//
// Thread-safe: no mutable state; calls may run concurrently (the store never
// writes or deletes one id from two threads at once).
#ifndef CAIRN_CHECKPOINT_DISK_TIER_H_
#define CAIRN_CHECKPOINT_DISK_TIER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/memory.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/env.h"

namespace cairn::checkpoint {

class DiskTier final {
 public:
  // Told, in one line naming the file and the reason, of each file Scan
  // deletes or leaves unread; may be null.
  using Warn = std::function<void(const std::string& message)>;

  // `env` must outlive the tier. Creates `dir` when missing (errors from the
  // Env: PERMISSION_DENIED, INTERNAL ...).
  static absl::StatusOr<std::unique_ptr<DiskTier>> Create(Env* env, std::string dir, Warn warn);

  // A valid file Scan found: its checkpoint's metadata and tag (the payload
  // is verified when Read).
  struct Found {
    CheckpointId id = 0;
    Pos pos = 0;
    SnapshotScope scope = SnapshotScope::kCheckpoint;
    uint64_t layout = 0;
    size_t bytes = 0;  // what it counts against a budget (Checkpoint::bytes())
    double cost = 0;   // as written
    std::string tag;
  };
  struct ScanResult {
    std::vector<Found> found;  // in the directory's order
    uint64_t corrupt = 0;      // files deleted because their header or size failed verification
  };
  // The directory's checkpoint files after a restart. Deletes leftover
  // temporary files (writes that never completed) and files whose header,
  // size or name fails verification; leaves in place, with a warning, the
  // ones it cannot open; ignores names not its own. Errors: listing the
  // directory failed.
  absl::StatusOr<ScanResult> Scan() const;

  // Writes `cp` (with its value `cost`) as checkpoint `id`, replacing any
  // earlier file of that id. Errors from the Env (RESOURCE_EXHAUSTED for a
  // full disk ...); the file is then as before.
  absl::Status Write(CheckpointId id, const Checkpoint& cp, double cost) const;
  // Checkpoint `id`, which the store knows at `pos` with `layout`. DATA_LOSS
  // when the file vanished, fails verification or describes another
  // checkpoint; other errors from the Env.
  absl::StatusOr<std::shared_ptr<Checkpoint>> Read(CheckpointId id, Pos pos, uint64_t layout) const;
  // Deletes the file of `id`, ignoring errors (it may be absent already).
  void Delete(CheckpointId id) const;
  // The file of `id` (for messages).
  std::string Path(CheckpointId id) const;

 private:
  DiskTier(Env* env, std::string dir, Warn warn);
  void Report(const std::string& message) const;

  Env* const env_;
  const std::string dir_;
  const Warn warn_;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_DISK_TIER_H_
