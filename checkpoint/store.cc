#include "checkpoint/store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/hash.h"

namespace cairn::checkpoint {
namespace {

constexpr char kMagic[8] = {'C', 'A', 'I', 'R', 'N', 'C', 'K', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kEntryOverhead = 128;  // bookkeeping counted per checkpoint

// Fixed-size little-endian header (the build targets little-endian hosts).
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t scope;
  int32_t pos;
  uint32_t reserved;
  uint64_t layout;
  uint64_t id;
  uint64_t data_len;
  uint64_t logits_count;
  uint64_t tag_len;
  double cost;
  uint64_t header_hash;  // of every field above
};
static_assert(sizeof(FileHeader) == 80);

uint64_t HeaderHash(const FileHeader& h) { return HashBytes(&h, offsetof(FileHeader, header_hash), 1); }

size_t PayloadBytes(const FileHeader& h) {
  return h.data_len + h.logits_count * sizeof(float) + h.tag_len;
}

// Reads and verifies the header of an open file (size included).
absl::StatusOr<FileHeader> ReadHeader(RandomAccessFile& file, const std::string& path) {
  const uint64_t size = file.info().size;
  if (size < sizeof(FileHeader) + 8) return absl::DataLossError(absl::StrCat(path, " is truncated"));
  FileHeader h;
  if (auto s = file.Read(0, MutableBytesOf(&h, 1)); !s.ok()) return s;
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.version != kVersion ||
      HeaderHash(h) != h.header_hash) {
    return absl::DataLossError(absl::StrCat(path, ": header is corrupt"));
  }
  // Lengths are covered by the header hash, but guard the arithmetic anyway.
  if (h.data_len > (uint64_t{1} << 48) || h.logits_count > (uint64_t{1} << 40) ||
      h.tag_len > (uint64_t{1} << 32) || size != sizeof(FileHeader) + PayloadBytes(h) + 8) {
    return absl::DataLossError(absl::StrCat(path, ": size does not match its header"));
  }
  return h;
}

}  // namespace

namespace store_testing {
void SetWriteHook(std::function<void(size_t, size_t)> hook) { env_testing::SetWriteHook(std::move(hook)); }
}  // namespace store_testing

size_t Checkpoint::bytes() const {
  return snapshot.data.size() + logits.size() * sizeof(float) + tag.size() + kEntryOverhead;
}

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
  if (store->disk_enabled()) {
    if (auto s = store->env_->CreateDir(options.disk_dir); !s.ok()) return s;
    if (auto s = store->Recover(); !s.ok()) return s;
  }
  return store;
}

CheckpointStore::CheckpointStore(const StoreOptions& options)
    : options_(options),
      retention_(options.retention != nullptr
                     ? options.retention
                     : std::make_shared<ForecastRetention>()),
      env_(options.env != nullptr ? options.env : Env::Default()) {}

CheckpointStore::~CheckpointStore() = default;

void CheckpointStore::Warn(const std::string& message) const {
  if (options_.on_warning) options_.on_warning(message);
}

std::string CheckpointStore::FilePath(CheckpointId id) const {
  return absl::StrCat(options_.disk_dir, "/ckpt-", id, ".bin");
}

absl::Status CheckpointStore::Recover() {
  absl::StatusOr<std::vector<std::string>> names = env_->ListDir(options_.disk_dir);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    if (!absl::StartsWith(name, "ckpt-")) continue;  // not ours: leave it alone
    const std::string path = options_.disk_dir + "/" + name;
    if (absl::EndsWith(name, ".tmp")) {
      env_->DeleteFile(path).IgnoreError();
      Warn(absl::StrCat("checkpoint file ", path, " deleted: a write that never completed"));
      continue;
    }
    if (!absl::EndsWith(name, ".bin")) continue;
    uint64_t id = 0;
    if (!absl::SimpleAtoi(name.substr(5, name.size() - 9), &id) || id == 0) continue;
    absl::StatusOr<std::unique_ptr<RandomAccessFile>> file = env_->OpenForRead(path);
    if (!file.ok()) {
      Warn(absl::StrCat("checkpoint file ", path, " ignored (left in place): ", file.status().message()));
      continue;
    }
    absl::StatusOr<FileHeader> h = ReadHeader(**file, path);
    std::string tag;
    if (h.ok() && h->id == id) {
      tag.resize(h->tag_len);
      const uint64_t off = sizeof(FileHeader) + h->data_len + h->logits_count * sizeof(float);
      if (absl::Status s = (*file)->Read(off, MutableBytesOf(tag.data(), tag.size())); !s.ok()) h = s;
    } else if (h.ok()) {
      h = absl::DataLossError("its name does not match its id");
    }
    file->reset();
    if (!h.ok()) {
      env_->DeleteFile(path).IgnoreError();
      {
        absl::MutexLock lock(&mu_);  // nobody else has the store yet: for the analysis
        ++stats_.corrupt;
      }
      Warn(absl::StrCat("checkpoint file ", path, " deleted at start-up: ", h.status().message()));
      continue;
    }
    // The payload checksum is verified when the checkpoint is read back.
    Entry e;
    e.id = id;
    e.pos = h->pos;
    e.scope = h->scope == 1 ? SnapshotScope::kFull : SnapshotScope::kCheckpoint;
    e.layout = h->layout;
    e.bytes = PayloadBytes(*h) + kEntryOverhead;
    e.cost = h->cost;
    e.tag = std::move(tag);
    e.on_disk = true;
    absl::MutexLock lock(&mu_);
    stats_.disk_bytes += e.bytes;
    ++stats_.recovered;
    next_id_ = std::max(next_id_, id + 1);
    entries_.emplace(id, std::move(e));
  }
  Pending pending;
  {
    absl::MutexLock lock(&mu_);
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
  if (displaced) RememberLocked(f);
  retention_->Observe(RetentionEvent::kRemoved, f, NowLocked());
}

void CheckpointStore::RememberLocked(RetentionFacts& f) {
  // One on the same path is remembered already: the older one is what a
  // store that had kept it would hold.
  if (!retention_->wants_misses() || f.path_key == 0 || ghosts_.contains(f.path_key)) return;
  f.remembered = true;
  ghosts_[f.path_key] = Ghost{f, NowLocked(), ++ghost_serial_};
  ghost_order_.emplace_back(f.path_key, ghost_serial_);
  ForgetOldLocked();
}

void CheckpointStore::ForgetOldLocked() {
  while (!ghost_order_.empty()) {
    const auto [key, serial] = ghost_order_.front();
    auto it = ghosts_.find(key);
    const bool current = it != ghosts_.end() && it->second.serial == serial;
    if (current && ghosts_.size() <= kGhosts && ghost_order_.size() <= 2 * kGhosts &&
        requests_ - it->second.gone.request < kMissHorizon) {
      return;
    }
    if (current) ForgetLocked(key);
    ghost_order_.pop_front();
  }
}

void CheckpointStore::RefusedLocked(RetentionFacts facts) {
  ++stats_.rejected;
  RememberLocked(facts);
  retention_->Observe(RetentionEvent::kRefused, facts, NowLocked());
}

void CheckpointStore::ForgetLocked(uint64_t path_key) {
  auto it = ghosts_.find(path_key);
  if (it == ghosts_.end()) return;
  retention_->Observe(RetentionEvent::kForgotten, it->second.facts, NowLocked());
  ghosts_.erase(it);
}

bool CheckpointStore::RemembersMissed() const {
  absl::MutexLock lock(&mu_);
  return !ghosts_.empty();
}

void CheckpointStore::NoteMissed(std::span<const uint64_t> path_keys, size_t full_only) {
  absl::MutexLock lock(&mu_);
  for (size_t k = 0; k < path_keys.size(); ++k) {
    auto it = ghosts_.find(path_keys[k]);
    if (it == ghosts_.end() || (k < full_only && it->second.facts.scope != SnapshotScope::kFull)) continue;
    retention_->Observe(RetentionEvent::kMissed, it->second.facts, NowLocked());
    ghosts_.erase(it);
    return;
  }
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
    absl::Status written = WriteFile(spill.id, *spill.cp, spill.cost);
    if (!written.ok()) {
      Warn(absl::StrCat("checkpoint ", spill.id, " not spilled to ", FilePath(spill.id), ": ", written.message()));
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
  for (CheckpointId id : pending.delete_files) env_->DeleteFile(FilePath(id)).IgnoreError();
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

absl::Status CheckpointStore::WriteFile(CheckpointId id, const Checkpoint& cp, double cost) const {
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.scope = cp.snapshot.scope == SnapshotScope::kFull ? 1 : 0;
  h.pos = cp.snapshot.pos;
  h.layout = cp.snapshot.layout;
  h.id = id;
  h.data_len = cp.snapshot.data.size();
  h.logits_count = cp.logits.size();
  h.tag_len = cp.tag.size();
  h.cost = cost;
  h.header_hash = HeaderHash(h);
  Hash64 sum(2);
  sum.Update(&h, sizeof(h));
  sum.Update(cp.snapshot.data.data(), cp.snapshot.data.size());
  sum.Update(cp.logits.data(), cp.logits.size() * sizeof(float));
  sum.Update(cp.tag.data(), cp.tag.size());
  const uint64_t trailer = sum.Finish();

  const std::string final_path = FilePath(id);
  const std::string tmp_path = final_path.substr(0, final_path.size() - 4) + ".tmp";
  const std::span<const std::byte> parts[] = {
      BytesOf(&h, 1), BytesOf(cp.snapshot.data.data(), cp.snapshot.data.size()),
      BytesOf(cp.logits.data(), cp.logits.size()), BytesOf(cp.tag.data(), cp.tag.size()), BytesOf(&trailer, 1)};
  return env_->WriteFileAtomically(final_path, tmp_path, parts).status();
}

absl::StatusOr<std::shared_ptr<Checkpoint>> CheckpointStore::ReadFile(CheckpointId id,
                                                                     const Entry& meta) const {
  const std::string path = FilePath(id);
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> file = env_->OpenForRead(path);
  if (!file.ok()) {
    return absl::IsNotFound(file.status()) ? absl::DataLossError("checkpoint file vanished: " + path) : file.status();
  }
  absl::StatusOr<FileHeader> h = ReadHeader(**file, path);
  if (!h.ok()) return h.status();
  if (h->id != id || h->pos != meta.pos || h->layout != meta.layout) {
    return absl::DataLossError("checkpoint file does not match its entry: " + path);
  }
  auto cp = std::make_shared<Checkpoint>();
  cp->snapshot.pos = h->pos;
  cp->snapshot.scope = h->scope == 1 ? SnapshotScope::kFull : SnapshotScope::kCheckpoint;
  cp->snapshot.layout = h->layout;
  cp->snapshot.data.resize(h->data_len);
  cp->logits.resize(h->logits_count);
  cp->tag.resize(h->tag_len);
  uint64_t trailer = 0;
  uint64_t off = sizeof(FileHeader);
  absl::Status s;
  for (std::span<std::byte> part :
       {MutableBytesOf(cp->snapshot.data.data(), cp->snapshot.data.size()),
        MutableBytesOf(cp->logits.data(), cp->logits.size()), MutableBytesOf(cp->tag.data(), cp->tag.size()),
        MutableBytesOf(&trailer, 1)}) {
    if (s.ok()) s = (*file)->Read(off, part);
    off += part.size();
  }
  if (!s.ok()) return s;
  Hash64 sum(2);
  sum.Update(&*h, sizeof(FileHeader));
  sum.Update(cp->snapshot.data.data(), cp->snapshot.data.size());
  sum.Update(cp->logits.data(), cp->logits.size() * sizeof(float));
  sum.Update(cp->tag.data(), cp->tag.size());
  if (sum.Finish() != trailer) return absl::DataLossError("checkpoint file checksum mismatch: " + path);
  return cp;
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
      if (e.ram && !e.on_disk && !e.spilling && WorthSpilling(e)) all.push_back({ScoreLocked(e), id, e.ram, e.cost, e.bytes});
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
      error = absl::DeadlineExceededError(absl::StrCat("persisting checkpoints: out of time after ", written, " of ",
                                                       chosen.size()));
    }
    if (error.ok()) error = WriteFile(c.id, *c.cp, c.cost);
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(c.id);
    const bool current = it != entries_.end() && !it->second.on_disk;
    if (error.ok() && current) {
      it->second.on_disk = true;
      ++written;
      continue;
    }
    stats_.disk_bytes -= c.bytes;  // not written, or erased meanwhile
    if (error.ok()) env_->DeleteFile(FilePath(c.id)).IgnoreError();
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
    return absl::ResourceExhaustedError(absl::StrCat("checkpoint of ", bytes,
                                                     " bytes exceeds the RAM budget of ",
                                                     options_.ram_budget_bytes));
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
      return absl::ResourceExhaustedError(absl::StrCat(
          "checkpoint of ", bytes, " bytes not admitted: worth less than what it would push out"));
    }
    ghosts_.erase(e.path_key);  // a new checkpoint on its path: its outcome is unknowable
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
  ForgetOldLocked();
}

absl::StatusOr<std::shared_ptr<const Checkpoint>> CheckpointStore::Get(CheckpointId id) {
  Entry meta;
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
    meta.pos = e.pos;
    meta.layout = e.layout;
  }
  // Read outside the lock: other sessions keep going meanwhile.
  absl::StatusOr<std::shared_ptr<Checkpoint>> read = ReadFile(id, meta);
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
      Warn(absl::StrCat("checkpoint file ", FilePath(id), " dropped: ", error.message()));
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
  return CheckpointInfo{e.id, e.pos, e.scope, e.layout, e.bytes, e.cost,
                        e.ram != nullptr || e.spilling != nullptr, e.on_disk, e.tag};
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
  if (delete_file) env_->DeleteFile(FilePath(id)).IgnoreError();
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
