#include "checkpoint/store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cairn::checkpoint {

namespace store_testing {
void SetWriteHook(std::function<void(size_t, size_t)> hook) { env_testing::SetWriteHook(std::move(hook)); }
}  // namespace store_testing

struct CheckpointStore::Pending {
  struct Spill {
    CheckpointId id;
    std::shared_ptr<Checkpoint> cp;
    double cost;
  };
  std::vector<Spill> spills;
  std::vector<CheckpointId> delete_files;
  std::vector<CheckpointId> dropped;
};

absl::StatusOr<std::unique_ptr<CheckpointStore>> CheckpointStore::Create(const StoreOptions& options) {
  if (options.ram_budget_bytes == 0) return absl::InvalidArgumentError("checkpoint RAM budget is 0");
  std::unique_ptr<CheckpointStore> store(new CheckpointStore(options));
  if (!options.disk_dir.empty() && options.disk_budget_bytes > 0) {
    absl::StatusOr<std::unique_ptr<DiskTier>> disk =
        DiskTier::Create(options.env != nullptr ? options.env : Env::Default(), options.disk_dir, options.on_warning);
    if (!disk.ok()) return disk.status();
    store->disk_ = std::move(*disk);
    if (auto s = store->Recover(); !s.ok()) return s;
  }
  return store;
}

CheckpointStore::CheckpointStore(const StoreOptions& options)
    : options_(options),
      retention_(options.retention != nullptr ? options.retention : std::make_shared<ForecastRetention>()),
      evicted_(*retention_) {}

CheckpointStore::~CheckpointStore() = default;

void CheckpointStore::Warn(const std::string& message) const {
  if (options_.on_warning) options_.on_warning(message);
}

absl::Status CheckpointStore::Recover() {
  absl::StatusOr<DiskTier::ScanResult> scan = disk_->Scan();
  if (!scan.ok()) return scan.status();
  Pending pending;
  {
    absl::MutexLock lock(&mu_);  // nobody else has the store yet: for the analysis
    stats_.corrupt += scan->corrupt;
    for (DiskTier::Found& found : scan->found) {
      stats_.disk_bytes += found.bytes;
      ++stats_.recovered;
      next_id_ = std::max(next_id_, found.id + 1);
      entries_.emplace(found.id, Entry{.id = found.id,
                                       .pos = found.pos,
                                       .scope = found.scope,
                                       .layout = found.layout,
                                       .bytes = found.bytes,
                                       .cost = found.cost,
                                       .tag = std::move(found.tag),
                                       .on_disk = true});
    }
    EvictDiskLocked(pending);
  }
  Settle(pending);
  return absl::OkStatus();
}

RetentionFacts CheckpointStore::FactsLocked(const Entry& e) const {
  RetentionFacts f;
  f.id = e.id;
  f.bytes = e.bytes;
  f.cost = e.cost;
  f.pos = e.pos;
  f.scope = e.scope;
  f.reason = e.reason;
  f.stale = e.stale;
  f.path_key = e.path_key;
  f.added = e.added;
  f.last_use = e.last_use;
  f.uses = e.uses;
  if (retention_->wants_branches()) {
    for (const auto& [h, count] : branch_counters_) {
      f.branches = count(e.id);
      if (f.branches >= 0) break;
    }
  }
  return f;
}

std::vector<RetentionFacts> CheckpointStore::VictimsLocked(size_t bytes, CheckpointId keep) const {
  std::vector<RetentionFacts> victims;
  if (stats_.ram_bytes + bytes <= options_.ram_budget_bytes) return victims;
  size_t over = stats_.ram_bytes + bytes - options_.ram_budget_bytes;
  std::vector<RetentionFacts> candidates;
  for (const auto& [id, e] : entries_) {
    if (e.ram && id != keep) candidates.push_back(FactsLocked(e));
  }
  const RetentionClock now = NowLocked();
  while (over > 0 && !candidates.empty()) {
    const size_t v = retention_->ChooseVictim(candidates, now);
    over -= std::min(over, candidates[v].bytes);
    victims.push_back(candidates[v]);
    candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(v));
  }
  return victims;
}

void CheckpointStore::RemovedLocked(const Entry& e, bool displaced) {
  RetentionFacts f = FactsLocked(e);
  if (displaced) evicted_.Remember(f, NowLocked());
  retention_->Observe(RetentionEvent::kRemoved, f, NowLocked());
}

void CheckpointStore::RefusedLocked(RetentionFacts facts) {
  ++stats_.rejected;
  evicted_.Remember(facts, NowLocked());
  retention_->Observe(RetentionEvent::kRefused, facts, NowLocked());
}

bool CheckpointStore::RemembersMissed() const {
  absl::MutexLock lock(&mu_);
  return !evicted_.empty();
}

void CheckpointStore::NoteMissed(std::span<const uint64_t> path_keys, size_t full_only) {
  absl::MutexLock lock(&mu_);
  evicted_.NoteMissed(path_keys, full_only, NowLocked());
}

void CheckpointStore::EvictRamLocked(CheckpointId keep, Pending& pending) {
  for (const RetentionFacts& v : VictimsLocked(0, keep)) {
    retention_->Observe(RetentionEvent::kEvicted, v, NowLocked());
    Entry* victim = &entries_.at(v.id);
    stats_.ram_bytes -= victim->bytes;
    ++stats_.evictions;
    if (victim->on_disk) {
      victim->ram.reset();  // its file is still valid
    } else if (disk_enabled() && victim->bytes <= options_.disk_budget_bytes && WorthSpilling(*victim)) {
      victim->spilling = std::move(victim->ram);
      pending.spills.push_back({victim->id, victim->spilling, victim->cost});
    } else {
      ++stats_.dropped;
      pending.dropped.push_back(victim->id);
      RemovedLocked(*victim, /*displaced=*/true);
      entries_.erase(victim->id);
    }
  }
}

void CheckpointStore::EvictDiskLocked(Pending& pending) {
  while (stats_.disk_bytes > options_.disk_budget_bytes) {
    Entry* victim = nullptr;
    double worst = 0;
    for (auto& [id, e] : entries_) {
      if (!e.on_disk) continue;
      double p = ScoreLocked(e);
      if (victim == nullptr || p < worst) {
        victim = &e;
        worst = p;
      }
    }
    if (victim == nullptr) return;
    stats_.disk_bytes -= victim->bytes;
    victim->on_disk = false;
    pending.delete_files.push_back(victim->id);
    if (!victim->ram && !victim->spilling) {
      ++stats_.dropped;
      pending.dropped.push_back(victim->id);
      RemovedLocked(*victim, /*displaced=*/true);
      entries_.erase(victim->id);
    }
  }
}

void CheckpointStore::Settle(Pending& pending) {
  // Spills may push other files out of the disk budget: loop until done.
  while (!pending.spills.empty()) {
    Pending::Spill spill = std::move(pending.spills.back());
    pending.spills.pop_back();
    absl::Status written = disk_->Write(spill.id, *spill.cp, spill.cost);
    if (!written.ok()) {
      Warn(absl::StrCat("checkpoint ", spill.id, " not spilled to ", disk_->Path(spill.id), ": ", written.message()));
    }
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(spill.id);
    if (it == entries_.end() || it->second.spilling != spill.cp) {
      // Erased while being written.
      if (written.ok()) pending.delete_files.push_back(spill.id);
      continue;
    }
    Entry& e = it->second;
    e.spilling.reset();
    if (!written.ok()) {  // disk full or failing: the checkpoint is lost
      if (!e.ram) {
        ++stats_.dropped;
        pending.dropped.push_back(e.id);
        RemovedLocked(e);
        entries_.erase(it);
      }
      continue;
    }
    e.on_disk = true;
    stats_.disk_bytes += e.bytes;
    ++stats_.spills;
    EvictDiskLocked(pending);
  }
  for (CheckpointId id : pending.delete_files) disk_->Delete(id);
  pending.delete_files.clear();
  if (pending.dropped.empty()) return;
  {
    absl::MutexLock lock(&listeners_mu_);
    for (CheckpointId id : pending.dropped) {
      for (auto& [h, l] : listeners_) l(id);
    }
  }
  pending.dropped.clear();
}

absl::StatusOr<size_t> CheckpointStore::Persist(std::chrono::steady_clock::time_point deadline) {
  if (!disk_enabled()) return absl::FailedPreconditionError("the checkpoint store has no disk tier");
  struct Candidate {
    double priority;
    CheckpointId id;
    std::shared_ptr<Checkpoint> cp;
    double cost;
    size_t bytes;
  };
  std::vector<Candidate> chosen;
  {
    absl::MutexLock lock(&mu_);
    std::vector<Candidate> all;
    for (auto& [id, e] : entries_) {
      if (e.ram && !e.on_disk && !e.spilling && WorthSpilling(e))
        all.push_back({ScoreLocked(e), id, e.ram, e.cost, e.bytes});
    }
    std::sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) { return a.priority > b.priority; });
    // Disk bytes are reserved now so concurrent spills account for them.
    for (Candidate& c : all) {
      if (stats_.disk_bytes + c.bytes > options_.disk_budget_bytes) continue;
      stats_.disk_bytes += c.bytes;
      chosen.push_back(std::move(c));
    }
  }
  size_t written = 0;
  absl::Status error;
  for (size_t i = 0; i < chosen.size(); ++i) {
    const Candidate& c = chosen[i];
    if (error.ok() && std::chrono::steady_clock::now() >= deadline) {
      error = absl::DeadlineExceededError(
          absl::StrCat("persisting checkpoints: out of time after ", written, " of ", chosen.size()));
    }
    if (error.ok()) error = disk_->Write(c.id, *c.cp, c.cost);
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(c.id);
    const bool current = it != entries_.end() && !it->second.on_disk;
    if (error.ok() && current) {
      it->second.on_disk = true;
      ++written;
      continue;
    }
    stats_.disk_bytes -= c.bytes;  // not written, or erased meanwhile
    if (error.ok()) disk_->Delete(c.id);
  }
  if (!error.ok()) return error;
  return written;
}

absl::StatusOr<CheckpointId> CheckpointStore::Put(Checkpoint checkpoint, double cost) {
  PutInfo info;
  info.cost = cost;
  return Put(std::move(checkpoint), info);
}

absl::StatusOr<CheckpointId> CheckpointStore::Put(Checkpoint checkpoint, const PutInfo& info) {
  const size_t bytes = checkpoint.bytes();
  if (bytes > options_.ram_budget_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("checkpoint of ", bytes, " bytes exceeds the RAM budget of ", options_.ram_budget_bytes));
  }
  Pending pending;
  CheckpointId id;
  {
    absl::MutexLock lock(&mu_);
    Entry e;
    e.pos = checkpoint.snapshot.pos;
    e.scope = checkpoint.snapshot.scope;
    e.layout = checkpoint.snapshot.layout;
    e.bytes = bytes;
    e.cost = info.cost > 0 ? info.cost : 1e-9;
    e.reason = info.reason;
    e.path_key = info.path_key;
    e.added = e.last_use = RetentionClock{++tick_, requests_};
    const RetentionFacts facts = FactsLocked(e);
    if (!retention_->Admit(facts, VictimsLocked(bytes, 0), NowLocked())) {
      RefusedLocked(facts);
      return absl::ResourceExhaustedError(
          absl::StrCat("checkpoint of ", bytes, " bytes not admitted: worth less than what it would push out"));
    }
    evicted_.Drop(e.path_key);  // a new checkpoint on its path: its outcome is unknowable
    id = next_id_++;
    e.id = id;
    e.tag = checkpoint.tag;
    e.ram = std::make_shared<Checkpoint>(std::move(checkpoint));
    entries_.emplace(id, std::move(e));
    stats_.ram_bytes += bytes;
    stats_.peak_ram_bytes = std::max(stats_.peak_ram_bytes, stats_.ram_bytes);
    ++stats_.puts;
    EvictRamLocked(id, pending);
    retention_->Observe(RetentionEvent::kAdded, FactsLocked(entries_.at(id)), NowLocked());
  }
  Settle(pending);
  return id;
}

bool CheckpointStore::WouldAdmit(size_t bytes, SnapshotScope scope, Pos pos, const PutInfo& info) {
  if (bytes > options_.ram_budget_bytes) return false;
  absl::MutexLock lock(&mu_);
  Entry e;
  e.pos = pos;
  e.scope = scope;
  e.bytes = bytes;
  e.cost = info.cost > 0 ? info.cost : 1e-9;
  e.reason = info.reason;
  e.path_key = info.path_key;
  e.added = e.last_use = NowLocked();
  const RetentionFacts facts = FactsLocked(e);
  if (retention_->Admit(facts, VictimsLocked(bytes, 0), NowLocked())) return true;
  RefusedLocked(facts);
  return false;
}

void CheckpointStore::SetCost(CheckpointId id, double cost) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.cost = cost > 0 ? cost : 1e-9;
}

void CheckpointStore::Credit(CheckpointId id, double positions) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  RetentionFacts f = FactsLocked(it->second);
  f.saved = positions;
  retention_->Observe(RetentionEvent::kCredited, f, NowLocked());
}

void CheckpointStore::Reclassify(CheckpointId id, CaptureReason reason) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.reason = reason;
}

void CheckpointStore::MarkStale(CheckpointId id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.stale = true;
}

void CheckpointStore::BeginRequest() {
  absl::MutexLock lock(&mu_);
  ++requests_;
  evicted_.ForgetOld(NowLocked());
}

absl::StatusOr<std::shared_ptr<const Checkpoint>> CheckpointStore::Get(CheckpointId id) {
  Pos pos = 0;
  uint64_t layout = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      ++stats_.misses;
      return absl::NotFoundError(absl::StrCat("checkpoint ", id, " is not stored"));
    }
    Entry& e = it->second;
    ++tick_;
    retention_->Observe(RetentionEvent::kUsed, FactsLocked(e), NowLocked());
    e.last_use = NowLocked();
    ++e.uses;
    if (e.ram) {
      ++stats_.hits;
      return std::shared_ptr<const Checkpoint>(e.ram);
    }
    if (e.spilling) {
      ++stats_.hits;
      return std::shared_ptr<const Checkpoint>(e.spilling);
    }
    pos = e.pos;
    layout = e.layout;
  }
  // Read outside the lock: other sessions keep going meanwhile.
  absl::StatusOr<std::shared_ptr<Checkpoint>> read = disk_->Read(id, pos, layout);
  Pending pending;
  std::shared_ptr<const Checkpoint> result;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      ++stats_.misses;
      return absl::NotFoundError(absl::StrCat("checkpoint ", id, " was dropped"));
    }
    Entry& e = it->second;
    if (!read.ok()) {
      // Never restore what failed verification: drop it from every tier.
      ++stats_.corrupt;
      ++stats_.dropped;
      if (e.on_disk) stats_.disk_bytes -= e.bytes;
      if (e.ram) stats_.ram_bytes -= e.bytes;
      pending.delete_files.push_back(id);
      pending.dropped.push_back(id);
      RemovedLocked(e);
      entries_.erase(it);
      error = read.status();
      Warn(absl::StrCat("checkpoint file ", disk_->Path(id), " dropped: ", error.message()));
    } else {
      ++stats_.hits;
      ++stats_.disk_reads;
      if (!e.ram) {
        e.ram = std::move(*read);
        stats_.ram_bytes += e.bytes;
        stats_.peak_ram_bytes = std::max(stats_.peak_ram_bytes, stats_.ram_bytes);
        EvictRamLocked(id, pending);
      }
      result = e.ram;
    }
  }
  Settle(pending);
  if (!error.ok()) {
    if (error.code() == absl::StatusCode::kDataLoss) return error;
    return absl::DataLossError(error.message());
  }
  return result;
}

std::optional<CheckpointInfo> CheckpointStore::Info(CheckpointId id) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  const Entry& e = it->second;
  return CheckpointInfo{e.id,      e.pos, e.scope, e.layout, e.bytes, e.cost, e.ram != nullptr || e.spilling != nullptr,
                        e.on_disk, e.tag};
}

void CheckpointStore::Erase(CheckpointId id) {
  bool delete_file = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    Entry& e = it->second;
    if (e.ram) stats_.ram_bytes -= e.bytes;
    if (e.on_disk) {
      stats_.disk_bytes -= e.bytes;
      delete_file = true;
    }
    RemovedLocked(e);
    entries_.erase(it);
  }
  if (delete_file) disk_->Delete(id);
}

std::vector<CheckpointInfo> CheckpointStore::List() const {
  std::vector<CheckpointInfo> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, e] : entries_) {
    out.push_back(CheckpointInfo{e.id, e.pos, e.scope, e.layout, e.bytes, e.cost,
                                 e.ram != nullptr || e.spilling != nullptr, e.on_disk, e.tag});
  }
  return out;
}

StoreStats CheckpointStore::stats() const {
  absl::MutexLock lock(&mu_);
  StoreStats s = stats_;
  s.ram_entries = 0;
  s.disk_entries = 0;
  for (const auto& [id, e] : entries_) {
    if (e.ram) ++s.ram_entries;
    if (e.on_disk) ++s.disk_entries;
  }
  return s;
}

int CheckpointStore::AddDropListener(DropListener listener) {
  absl::MutexLock lock(&listeners_mu_);
  int h = next_listener_++;
  listeners_.emplace(h, std::move(listener));
  return h;
}

void CheckpointStore::RemoveDropListener(int handle) {
  absl::MutexLock lock(&listeners_mu_);
  listeners_.erase(handle);
}

int CheckpointStore::AddBranchCounter(BranchCounter counter) {
  absl::MutexLock lock(&mu_);
  const int h = next_counter_++;
  branch_counters_.emplace(h, std::move(counter));
  return h;
}

void CheckpointStore::RemoveBranchCounter(int handle) {
  absl::MutexLock lock(&mu_);
  branch_counters_.erase(handle);
}

}  // namespace cairn::checkpoint
