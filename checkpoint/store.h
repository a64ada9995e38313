// CheckpointStore: owns checkpoint snapshots under a byte budget; which ones
// stay when they do not all fit (admission of new ones, eviction of stored
// ones) is its RetentionPolicy's decision (retention.h; by default the hit
// density learned per kind of checkpoint). Optionally spills evicted
// checkpoints (not those taken inside a reply: WorthSpilling) to a disk tier
// from which they are read back.
//
// This file is the RAM tier and the accounting of both tiers. The files
// themselves (format, verification, recovery after a restart) are the disk
// tier's (disk_tier.h): written atomically and checksummed, so a torn or
// corrupt file is detected and dropped, never restored. The disk tier
// survives a restart: Create adopts the valid files it finds and deletes
// torn and corrupt ones. All file I/O goes through StoreOptions::env; a
// failed write loses only that checkpoint, a failed read is DATA_LOSS for
// that one (the caller recomputes), and every file dropped or left unread is
// reported to StoreOptions::on_warning with the reason. What the store
// pushed out or refused is remembered for a while (eviction_memory.h), so
// its policy hears of the uses it missed.
#ifndef CAIRN_CHECKPOINT_STORE_H_
#define CAIRN_CHECKPOINT_STORE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/memory.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/disk_tier.h"
#include "checkpoint/env.h"
#include "checkpoint/eviction_memory.h"
#include "checkpoint/retention.h"

namespace cairn::checkpoint {

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
  // Which checkpoints stay when they do not all fit; null: ForecastRetention.
  // Shared by nobody else (it learns from this store).
  std::shared_ptr<RetentionPolicy> retention;
  // The disk tier's file system; null: Env::Default(). Must outlive the store.
  Env* env = nullptr;
  // Told, in one line naming the file and the reason, of each disk-tier file
  // the store could not write or read, or deleted or ignored as damaged,
  // torn or unreadable (an operator's only trace of them). Called outside
  // the store's lock, possibly concurrently; null: nobody is told.
  std::function<void(const std::string& message)> on_warning;
};

// What the caller knows of a checkpoint it stores, for the retention policy.
struct PutInfo {
  // The value of keeping it: the positions a restore saves recomputing (> 0).
  double cost = 1;
  CaptureReason reason = CaptureReason::kMessageBoundary;
  uint64_t path_key = 0;  // PathKey(tenant, symbols); 0 when unknown
};

struct StoreStats {
  size_t ram_bytes = 0;
  size_t peak_ram_bytes = 0;
  size_t disk_bytes = 0;
  size_t ram_entries = 0;
  size_t disk_entries = 0;
  uint64_t puts = 0;
  uint64_t hits = 0;        // Get served (RAM or disk)
  uint64_t misses = 0;      // Get of an unknown or dropped id
  uint64_t evictions = 0;   // left RAM (spilled or dropped)
  uint64_t spills = 0;      // written to disk
  uint64_t disk_reads = 0;  // read back from disk
  uint64_t dropped = 0;     // gone from every tier by budget
  uint64_t corrupt = 0;     // files that failed verification (dropped)
  uint64_t recovered = 0;   // valid files adopted at Create
  uint64_t rejected = 0;    // Puts (and WouldAdmit asks) the retention policy refused
};

class CheckpointStore final {
 public:
  // Errors: INVALID_ARGUMENT for a zero RAM budget; the disk directory is
  // created when missing (INTERNAL/PERMISSION errors from the OS are
  // returned as such).
  static absl::StatusOr<std::unique_ptr<CheckpointStore>> Create(const StoreOptions& options);
  ~CheckpointStore();

  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  // Takes ownership of `checkpoint`. Other checkpoints may be evicted
  // (spilled or dropped, drop listeners run before Put returns); the new one
  // is not evicted by its own Put. RESOURCE_EXHAUSTED when it alone exceeds
  // the RAM budget, or when the retention policy does not admit it (it is
  // worth less than what it would push out; counted in stats().rejected).
  // Thread-safe.
  absl::StatusOr<CheckpointId> Put(Checkpoint checkpoint, const PutInfo& info);
  // The same with only a cost (the positions a restore saves, > 0).
  absl::StatusOr<CheckpointId> Put(Checkpoint checkpoint, double cost);

  // Whether a checkpoint of `bytes` (Checkpoint::bytes()) described by the
  // rest would be admitted now: a caller can skip the copy otherwise. Put
  // decides again. Thread-safe.
  bool WouldAdmit(size_t bytes, SnapshotScope scope, Pos pos, const PutInfo& info);

  // A new value for a checkpoint (the positions a restore saves, > 0): the
  // shallower checkpoint it was measured from went away, or a closer one
  // came. No-op for unknown ids. Thread-safe; a drop listener may call it.
  void SetCost(CheckpointId id, double cost);

  // A restore of the checkpoint saved `positions` beyond the best plan
  // without it (its realized value; RetentionEvent::kCredited). No-op for
  // unknown ids. Thread-safe.
  void Credit(CheckpointId id, double positions);

  // The checkpoint turned out to serve as `reason` (e.g. a point taken inside
  // a reply that ended there). No-op for unknown ids. Thread-safe.
  void Reclassify(CheckpointId id, CaptureReason reason);

  // A turn checkpoint whose conversation moved on (RetentionFacts::stale):
  // it stays, but its retention policy may value it less. No-op for unknown
  // ids. Thread-safe.
  void MarkStale(CheckpointId id);

  // Counts a prompt: the retention clock in which recency is measured.
  // Thread-safe.
  void BeginRequest();

  // Prompts (BeginRequest) the store remembers a checkpoint it pushed out or
  // refused (see EvictionMemory::kMissHorizon).
  static constexpr uint64_t kMissHorizon = EvictionMemory::kMissHorizon;

  // Whether NoteMissed can find anything: the store remembers checkpoints it
  // pushed out or refused (only for a retention policy that wants_misses()).
  // Thread-safe.
  bool RemembersMissed() const;
  // `path_keys`: PathKey of each prefix of a prompt past the point where its
  // restore resumed, deepest first; at the first `full_only` of them only a
  // full snapshot could have served (a checkpoint scope one needs the rest of
  // the memory from somewhere). The first one the store remembers as pushed
  // out or refused, and that could have served, would have spared
  // recomputing: the policy learns of the use it never saw
  // (RetentionEvent::kMissed), and the store forgets it. Thread-safe.
  void NoteMissed(std::span<const uint64_t> path_keys, size_t full_only);

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
  // without a disk tier; a write error stops it (those written stay valid),
  // and so does `deadline` (DEADLINE_EXCEEDED: a shutdown must end). Like a
  // spill, it skips checkpoints taken inside a reply (see WorthSpilling).
  // Thread-safe.
  absl::StatusOr<size_t> Persist(
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

  // Every checkpoint (RAM and disk), ascending id; e.g. the ones adopted
  // from the disk tier at Create.
  std::vector<CheckpointInfo> List() const;

  StoreStats stats() const;
  const StoreOptions& options() const { return options_; }

  // Listeners run (outside the store's lock, on the thread that caused it)
  // for each checkpoint dropped from every tier by budget or corruption. A
  // listener may call SetCost, nothing else of the store. RemoveDropListener waits until no call
  // of that listener is running.
  using DropListener = std::function<void(CheckpointId)>;
  int AddDropListener(DropListener listener);
  void RemoveDropListener(int handle);

  // Counters of RetentionFacts::branches: each answers for the checkpoints
  // its engine indexed (-1 for others). Called under the store's lock, only
  // when the retention policy wants_branches(); a counter must not call the
  // store. RemoveBranchCounter waits for running calls.
  using BranchCounter = std::function<int32_t(CheckpointId)>;
  int AddBranchCounter(BranchCounter counter);
  void RemoveBranchCounter(int handle);

 private:
  struct Entry {
    CheckpointId id = 0;
    Pos pos = 0;
    SnapshotScope scope = SnapshotScope::kCheckpoint;
    uint64_t layout = 0;
    size_t bytes = 0;
    double cost = 0;
    std::string tag;
    std::shared_ptr<Checkpoint> ram{};       // set while in RAM
    std::shared_ptr<Checkpoint> spilling{};  // set while its file is being written
    bool on_disk = false;
    CaptureReason reason = CaptureReason::kMessageBoundary;
    bool stale = false;
    uint64_t path_key = 0;
    RetentionClock added{};
    RetentionClock last_use{};
    uint32_t uses = 0;
  };
  struct Pending;
  explicit CheckpointStore(const StoreOptions& options);

  bool disk_enabled() const { return disk_ != nullptr; }
  // Adopts the disk tier's files (after a restart) within its budget.
  absl::Status Recover();
  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
  RetentionClock NowLocked() const { return RetentionClock{tick_, requests_}; }
  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
  RetentionFacts FactsLocked(const Entry& e) const;
  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
  double ScoreLocked(const Entry& e) const { return retention_->Score(FactsLocked(e), NowLocked()); }
  // RAM checkpoints the policy would evict, in order, to free `bytes` more
  // than the RAM budget leaves; never `keep`.
  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
  std::vector<RetentionFacts> VictimsLocked(size_t bytes, CheckpointId keep) const;
  // Evicts from RAM until within budget, never `keep`; fills `pending`.
  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
  void EvictRamLocked(CheckpointId keep, Pending& pending);
  // Whether an entry leaving RAM goes to the disk tier. Not a checkpoint
  // taken inside a reply: it serves at most the next turn (a reply that ends
  // on one reclassifies it), so under a small RAM budget a long reply would
  // otherwise write a file every PolicyOptions::generation_every positions.
  static bool WorthSpilling(const Entry& e) { return e.reason != CaptureReason::kDuringGeneration; }
  // Tells the policy that an entry leaves the store (before erasing it);
  // `displaced`: pushed out for room, so remembered (EvictionMemory).
  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
  void RemovedLocked(const Entry& e, bool displaced = false);
  // Counts, remembers and tells the policy of a checkpoint Admit refused.
  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
  void RefusedLocked(RetentionFacts facts);
  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)
  void EvictDiskLocked(Pending& pending);
  // Writes spills and deletes files outside the lock, then runs listeners.
  void Settle(Pending& pending);
  void Warn(const std::string& message) const;

  const StoreOptions options_;
  const std::shared_ptr<RetentionPolicy> retention_;
  // Null without a disk tier. Its calls run outside mu_ (file I/O).
  std::unique_ptr<DiskTier> disk_;
  mutable absl::Mutex mu_;
  std::map<CheckpointId, Entry> entries_ ABSL_GUARDED_BY(mu_);
  CheckpointId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t tick_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t requests_ ABSL_GUARDED_BY(mu_) = 0;
  EvictionMemory evicted_ ABSL_GUARDED_BY(mu_);
  std::map<int, BranchCounter> branch_counters_ ABSL_GUARDED_BY(mu_);
  int next_counter_ ABSL_GUARDED_BY(mu_) = 1;
  StoreStats stats_ ABSL_GUARDED_BY(mu_);
  // Held while listeners run, so RemoveDropListener waits for running calls.
  absl::Mutex listeners_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::map<int, DropListener> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  int next_listener_ ABSL_GUARDED_BY(listeners_mu_) = 1;
};

namespace store_testing {
// Called after every write(2) of a checkpoint file with the bytes written so
// far and the file's total size; a test uses it to kill the writer midway.
// Pass nullptr to clear. Not thread-safe: set before use.
void SetWriteHook(std::function<void(size_t written, size_t total)> hook);
}  // namespace store_testing

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_STORE_H_
