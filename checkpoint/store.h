// CheckpointStore: owns checkpoint snapshots under a byte budget, evicts by
// value (recompute cost saved per byte, discounted by age), and optionally
// spills evicted checkpoints to a disk tier from which they are read back.
//
// Disk files are written atomically (temp file, fsync, rename, fsync of the
// directory) and checksummed (a 64-bit hash of the header and another over
// header and payload), so a torn or corrupt file is detected and dropped,
// never restored. The disk tier survives a restart: Create adopts the valid
// files it finds and deletes torn and corrupt ones.
#ifndef CAIRN_CHECKPOINT_STORE_H_
#define CAIRN_CHECKPOINT_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/memory.h"

namespace cairn::checkpoint {

using CheckpointId = uint64_t;  // never 0

// One stored checkpoint.
struct Checkpoint {
  Snapshot snapshot;
  // Logits of the row just before snapshot.pos when kept (end of a prompt),
  // so that a regenerate needs no forward pass; empty otherwise.
  std::vector<float> logits;
  // Opaque caller data persisted with the checkpoint (the engine stores the
  // tenant and symbol path, to rebuild its index after a restart).
  std::string tag;

  size_t bytes() const;  // what it counts against a budget
};

struct CheckpointInfo {
  CheckpointId id = 0;
  Pos pos = 0;
  SnapshotScope scope = SnapshotScope::kCheckpoint;
  uint64_t layout = 0;
  size_t bytes = 0;
  double cost = 0;
  bool in_ram = false;
  bool on_disk = false;
  std::string tag;
};

struct StoreOptions {
  size_t ram_budget_bytes = size_t{1} << 30;
  std::string disk_dir;          // empty: no disk tier
  size_t disk_budget_bytes = 0;  // 0 with a disk_dir: the tier is off
  // Recency: a checkpoint's value halves every this many store operations
  // (puts and gets) in which it was not used.
  double recency_half_life = 256;
};

struct StoreStats {
  size_t ram_bytes = 0;
  size_t peak_ram_bytes = 0;
  size_t disk_bytes = 0;
  size_t ram_entries = 0;
  size_t disk_entries = 0;
  uint64_t puts = 0;
  uint64_t hits = 0;          // Get served (RAM or disk)
  uint64_t misses = 0;        // Get of an unknown or dropped id
  uint64_t evictions = 0;     // left RAM (spilled or dropped)
  uint64_t spills = 0;        // written to disk
  uint64_t disk_reads = 0;    // read back from disk
  uint64_t dropped = 0;       // gone from every tier by budget
  uint64_t corrupt = 0;       // files that failed verification (dropped)
  uint64_t recovered = 0;     // valid files adopted at Create
};

class CheckpointStore final {
 public:
  // Errors: INVALID_ARGUMENT for a zero RAM budget or a non-positive half
  // life; the disk directory is created when missing (INTERNAL/PERMISSION
  // errors from the OS are returned as such).
  static absl::StatusOr<std::unique_ptr<CheckpointStore>> Create(const StoreOptions& options);
  ~CheckpointStore();

  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  // Takes ownership of `checkpoint`. `cost` is the value of keeping it: the
  // positions a restore saves recomputing (> 0). Other checkpoints may be
  // evicted (spilled or dropped, drop listeners run before Put returns); the
  // new one is not evicted by its own Put. RESOURCE_EXHAUSTED when it alone
  // exceeds the RAM budget. Thread-safe.
  absl::StatusOr<CheckpointId> Put(Checkpoint checkpoint, double cost);

  // The checkpoint, read back from disk (and promoted to RAM) when spilled.
  // The returned pointer stays valid after eviction. NOT_FOUND for an
  // unknown or dropped id; DATA_LOSS when its file failed verification (the
  // checkpoint is then dropped and listeners run). Counts as a use.
  // Thread-safe.
  absl::StatusOr<std::shared_ptr<const Checkpoint>> Get(CheckpointId id);

  // Metadata without loading or touching recency; nullopt when unknown.
  std::optional<CheckpointInfo> Info(CheckpointId id) const;
  bool Contains(CheckpointId id) const { return Info(id).has_value(); }

  // Forgets a checkpoint in every tier (listeners do not run: the caller
  // knows). No-op for unknown ids. Thread-safe.
  void Erase(CheckpointId id);

  // Writes the checkpoints held only in RAM to the disk tier, most valuable
  // first, as far as the disk budget allows without pushing out files
  // already there; they stay in RAM too. For a clean shutdown: a restart
  // adopts them (Create). Returns how many were written; FAILED_PRECONDITION
  // without a disk tier; a write error stops it (those written stay valid).
  // Thread-safe.
  absl::StatusOr<size_t> Persist();

  // Every checkpoint (RAM and disk), ascending id; e.g. the ones adopted
  // from the disk tier at Create.
  std::vector<CheckpointInfo> List() const;

  StoreStats stats() const;
  const StoreOptions& options() const { return options_; }

  // Listeners run (outside the store's lock, on the thread that caused it)
  // for each checkpoint dropped from every tier by budget or corruption. A
  // listener must not call the store. RemoveDropListener waits until no call
  // of that listener is running.
  using DropListener = std::function<void(CheckpointId)>;
  int AddDropListener(DropListener listener);
  void RemoveDropListener(int handle);

 private:
  struct Entry {
    CheckpointId id = 0;
    Pos pos = 0;
    SnapshotScope scope = SnapshotScope::kCheckpoint;
    uint64_t layout = 0;
    size_t bytes = 0;
    double cost = 0;
    std::string tag;
    std::shared_ptr<Checkpoint> ram;       // set while in RAM
    std::shared_ptr<Checkpoint> spilling;  // set while its file is being written
    bool on_disk = false;
    uint64_t last_use = 0;
  };
  struct Pending;
  explicit CheckpointStore(const StoreOptions& options) : options_(options) {}

  bool disk_enabled() const { return !options_.disk_dir.empty() && options_.disk_budget_bytes > 0; }
  std::string FilePath(CheckpointId id) const;
  absl::Status Recover();
  double PriorityLocked(const Entry& e) const;
  // Evicts from RAM until within budget, never `keep`; fills `pending`.
  void EvictRamLocked(CheckpointId keep, Pending& pending);
  void EvictDiskLocked(Pending& pending);
  // Writes spills and deletes files outside the lock, then runs listeners.
  void Settle(Pending& pending);
  absl::Status WriteFile(CheckpointId id, const Checkpoint& cp, double cost) const;
  absl::StatusOr<std::shared_ptr<Checkpoint>> ReadFile(CheckpointId id, const Entry& meta) const;

  const StoreOptions options_;
  mutable std::mutex mu_;
  std::map<CheckpointId, Entry> entries_;
  CheckpointId next_id_ = 1;
  uint64_t tick_ = 0;
  StoreStats stats_;
  // Held while listeners run, so RemoveDropListener waits for running calls.
  std::mutex listeners_mu_;
  std::map<int, DropListener> listeners_;
  int next_listener_ = 1;
};

namespace store_testing {
// Called after every write(2) of a checkpoint file with the bytes written so
// far and the file's total size; a test uses it to kill the writer midway.
// Pass nullptr to clear. Not thread-safe: set before use.
void SetWriteHook(std::function<void(size_t written, size_t total)> hook);
}  // namespace store_testing

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_STORE_H_
