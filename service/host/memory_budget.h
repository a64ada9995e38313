// The live-memory budget (--memory-budget): a bound on the bytes held by
// live sequences, all models together: every session's sequence and every
// in-flight sessionless request's. Checkpoints have their own budget
// (--checkpoint-ram); weights are not counted.
//
// A sequence's bytes are what SequenceMemory::Bytes(kFull) reports (the
// state a full snapshot holds) plus what the service keeps per token of it
// (its history and bookkeeping: ServedModel::kBookkeepingBytesPerSymbol),
// which a recurrent model's fixed-size state would otherwise leave
// uncounted. Before a request may make a sequence grow,
// the service reserves what it can reach (the prompt plus max_tokens, from
// the model's per-position bytes measured at load), so a request that would
// not fit is refused with RESOURCE_EXHAUSTED before anything changes; once
// it is done, the reservation is set to what the sequence really holds.
// Not counted: allocator slack (a KV cache grows geometrically and keeps
// its capacity when cut back), transient copies during a prompt's reuse
// (a longer snapshot restored, then cut back) and the compute threads'
// scratch (activations of a chunk; attention's scores and value copies,
// kept per thread at the size of the longest context it attended).
#ifndef CAIRN_SERVICE_HOST_MEMORY_BUDGET_H_
#define CAIRN_SERVICE_HOST_MEMORY_BUDGET_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "service/host/compute_threads.h"

namespace cairn::service {

class MemoryBudget;

// Bytes reserved in a MemoryBudget, released when destroyed or Reset.
// Movable; not thread-safe (its owner - a session under its lease, or one
// request - uses it from one thread at a time).
class MemoryReservation {
 public:
  MemoryReservation() = default;
  MemoryReservation(MemoryReservation&& o) noexcept : budget_(o.budget_), bytes_(o.bytes_) {
    o.budget_ = nullptr;
    o.bytes_ = 0;
  }
  MemoryReservation& operator=(MemoryReservation&& o) noexcept;
  ~MemoryReservation() { Reset(); }

  size_t bytes() const { return bytes_; }
  // Reserves up to `bytes` in total (nothing when it holds that much
  // already). RESOURCE_EXHAUSTED, changing nothing, when the budget cannot
  // hold it; the message names `what` (e.g. "a prompt of 12 positions plus
  // 256 tokens on model 'x'"), the bytes needed, in use and the budget.
  absl::Status Grow(size_t bytes, std::string_view what);
  // Sets the reservation to `bytes` unchecked: the sequence holds that much
  // (accounting after the fact; may exceed the budget).
  void Set(size_t bytes);
  void Reset();

 private:
  friend class MemoryBudget;
  MemoryReservation(MemoryBudget* budget, size_t bytes) : budget_(budget), bytes_(bytes) {}
  MemoryBudget* budget_ = nullptr;
  size_t bytes_ = 0;
};

// A refusal that no wait can cure: the request alone needs more than the
// whole budget (a refusal because others hold memory is not marked). Still
// RESOURCE_EXHAUSTED for gRPC; the HTTP door answers it as a request too
// large (400) instead of a 429 an SDK would retry in vain.
bool ExceedsWholeBudget(const absl::Status& status);

// Thread-safe. Must outlive its reservations.
class MemoryBudget final {
 public:
  // 0: unlimited (reservations are still counted).
  explicit MemoryBudget(size_t budget_bytes) : budget_(budget_bytes) {}

  // A new reservation of `bytes`; RESOURCE_EXHAUSTED as Grow.
  absl::StatusOr<MemoryReservation> Reserve(size_t bytes, std::string_view what);

  size_t budget() const { return budget_; }
  size_t in_use() const;

 private:
  friend class MemoryReservation;
  // Changes a reservation from `from` to `to` bytes; checked when `check`.
  absl::Status Change(size_t from, size_t to, bool check, std::string_view what);

  const size_t budget_;
  mutable absl::Mutex mu_;
  size_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

// The value of --memory-budget: a byte size as checkpoint::ParseByteSize
// takes ("8GiB", "512MiB", "0" for unlimited) or a percentage of the RAM
// ("50%"; see AvailableRamBytes, under `cgroup_root`). INVALID_ARGUMENT
// otherwise.
absl::StatusOr<size_t> ParseMemoryBudget(std::string_view text, const std::string& cgroup_root = kDefaultCgroupRoot);

// Physical RAM, or the lowest memory limit when that is lower (a
// container): cgroup v2's memory.max of the process's cgroup and each of
// its ancestors under `cgroup_root` (the limit is often set on a parent,
// e.g. a Kubernetes pod above its containers), then cgroup v1's
// ROOT/memory/memory.limit_in_bytes. 0 when unknown.
size_t AvailableRamBytes(const std::string& cgroup_root = kDefaultCgroupRoot,
                         const std::string& cgroup_path = OwnCgroupPath());

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_HOST_MEMORY_BUDGET_H_
