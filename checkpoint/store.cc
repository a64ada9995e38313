#include "checkpoint/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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
constexpr size_t kWriteChunk = size_t{1} << 20;

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

std::function<void(size_t, size_t)>& WriteHook() {
  static std::function<void(size_t, size_t)> hook;
  return hook;
}

absl::Status ErrnoStatus(const std::string& what, int err) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT: return absl::NotFoundError(msg);
    case EACCES:
    case EPERM: return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT: return absl::ResourceExhaustedError(msg);
    default: return absl::InternalError(msg);
  }
}

absl::Status WriteAll(int fd, const void* data, size_t n, size_t& written, size_t total) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    size_t step = std::min(n, kWriteChunk);
    ssize_t w = ::write(fd, p, step);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write checkpoint file", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
    written += static_cast<size_t>(w);
    if (WriteHook()) WriteHook()(written, total);
  }
  return absl::OkStatus();
}

absl::Status ReadAll(int fd, void* data, size_t n, off_t offset) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, offset);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read checkpoint file", errno);
    }
    if (r == 0) return absl::DataLossError("checkpoint file is shorter than its header says");
    p += r;
    n -= static_cast<size_t>(r);
    offset += r;
  }
  return absl::OkStatus();
}

// Reads and verifies the header of an open file (size included).
absl::StatusOr<FileHeader> ReadHeader(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("stat checkpoint file", errno);
  if (static_cast<size_t>(st.st_size) < sizeof(FileHeader) + 8) {
    return absl::DataLossError("checkpoint file truncated");
  }
  FileHeader h;
  if (auto s = ReadAll(fd, &h, sizeof(h), 0); !s.ok()) return s;
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.version != kVersion ||
      HeaderHash(h) != h.header_hash) {
    return absl::DataLossError("checkpoint file header is corrupt");
  }
  // Lengths are covered by the header hash, but guard the arithmetic anyway.
  if (h.data_len > (uint64_t{1} << 48) || h.logits_count > (uint64_t{1} << 40) ||
      h.tag_len > (uint64_t{1} << 32) ||
      static_cast<uint64_t>(st.st_size) != sizeof(FileHeader) + PayloadBytes(h) + 8) {
    return absl::DataLossError("checkpoint file size does not match its header");
  }
  return h;
}

}  // namespace

namespace store_testing {
void SetWriteHook(std::function<void(size_t, size_t)> hook) { WriteHook() = std::move(hook); }
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
    if (::mkdir(options.disk_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoStatus("create checkpoint directory " + options.disk_dir, errno);
    }
    if (auto s = store->Recover(); !s.ok()) return s;
  }
  return store;
}

CheckpointStore::CheckpointStore(const StoreOptions& options)
    : options_(options),
      retention_(options.retention != nullptr
                     ? options.retention
                     : std::make_shared<ForecastRetention>()) {}

CheckpointStore::~CheckpointStore() = default;

std::string CheckpointStore::FilePath(CheckpointId id) const {
  return absl::StrCat(options_.disk_dir, "/ckpt-", id, ".bin");
}

absl::Status CheckpointStore::Recover() {
  DIR* dir = ::opendir(options_.disk_dir.c_str());
  if (dir == nullptr) return ErrnoStatus("open checkpoint directory " + options_.disk_dir, errno);
  std::vector<std::string> names;
  while (dirent* d = ::readdir(dir)) names.emplace_back(d->d_name);
  ::closedir(dir);
  for (const std::string& name : names) {
    if (!absl::StartsWith(name, "ckpt-")) continue;  // not ours: leave it alone
    const std::string path = options_.disk_dir + "/" + name;
    if (absl::EndsWith(name, ".tmp")) {  // a write that never completed
      ::unlink(path.c_str());
      continue;
    }
    if (!absl::EndsWith(name, ".bin")) continue;
    uint64_t id = 0;
    if (!absl::SimpleAtoi(name.substr(5, name.size() - 9), &id) || id == 0) continue;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    absl::StatusOr<FileHeader> h = ReadHeader(fd);
    std::string tag;
    if (h.ok() && h->id == id) {
      tag.resize(h->tag_len);
      off_t off = static_cast<off_t>(sizeof(FileHeader) + h->data_len + h->logits_count * sizeof(float));
      if (!ReadAll(fd, tag.data(), tag.size(), off).ok()) h = absl::DataLossError("tag");
    } else if (h.ok()) {
      h = absl::DataLossError("checkpoint file name does not match its id");
    }
    ::close(fd);
    if (!h.ok()) {
      ::unlink(path.c_str());
      ++stats_.corrupt;
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
    stats_.disk_bytes += e.bytes;
    ++stats_.recovered;
    next_id_ = std::max(next_id_, id + 1);
    entries_.emplace(id, std::move(e));
  }
  Pending pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
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

void CheckpointStore::RemovedLocked(const Entry& e) {
  retention_->Observe(RetentionEvent::kRemoved, FactsLocked(e), NowLocked());
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
      RemovedLocked(*victim);
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
      RemovedLocked(*victim);
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
    std::lock_guard<std::mutex> lock(mu_);
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
  for (CheckpointId id : pending.delete_files) ::unlink(FilePath(id).c_str());
  pending.delete_files.clear();
  if (pending.dropped.empty()) return;
  {
    std::lock_guard<std::mutex> lock(listeners_mu_);
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
  const size_t total = sizeof(h) + PayloadBytes(h) + sizeof(trailer);

  const std::string final_path = FilePath(id);
  const std::string tmp_path = final_path.substr(0, final_path.size() - 4) + ".tmp";
  int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("create " + tmp_path, errno);
  size_t written = 0;
  absl::Status s = WriteAll(fd, &h, sizeof(h), written, total);
  if (s.ok()) s = WriteAll(fd, cp.snapshot.data.data(), cp.snapshot.data.size(), written, total);
  if (s.ok()) s = WriteAll(fd, cp.logits.data(), cp.logits.size() * sizeof(float), written, total);
  if (s.ok()) s = WriteAll(fd, cp.tag.data(), cp.tag.size(), written, total);
  if (s.ok()) s = WriteAll(fd, &trailer, sizeof(trailer), written, total);
  // Data must be durable before the rename makes the file visible.
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoStatus("fsync " + tmp_path, errno);
  ::close(fd);
  if (s.ok() && ::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    s = ErrnoStatus("rename " + tmp_path, errno);
  }
  if (!s.ok()) {
    ::unlink(tmp_path.c_str());
    return s;
  }
  // Make the rename itself durable.
  int dfd = ::open(options_.disk_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Checkpoint>> CheckpointStore::ReadFile(CheckpointId id,
                                                                     const Entry& meta) const {
  const std::string path = FilePath(id);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno == ENOENT ? absl::DataLossError("checkpoint file vanished: " + path)
                           : ErrnoStatus("open " + path, errno);
  }
  auto close_fd = [fd] { ::close(fd); };
  absl::StatusOr<FileHeader> h = ReadHeader(fd);
  if (!h.ok()) {
    close_fd();
    return h.status();
  }
  if (h->id != id || h->pos != meta.pos || h->layout != meta.layout) {
    close_fd();
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
  off_t off = sizeof(FileHeader);
  absl::Status s = ReadAll(fd, cp->snapshot.data.data(), cp->snapshot.data.size(), off);
  off += static_cast<off_t>(cp->snapshot.data.size());
  if (s.ok()) s = ReadAll(fd, cp->logits.data(), cp->logits.size() * sizeof(float), off);
  off += static_cast<off_t>(cp->logits.size() * sizeof(float));
  if (s.ok()) s = ReadAll(fd, cp->tag.data(), cp->tag.size(), off);
  off += static_cast<off_t>(cp->tag.size());
  if (s.ok()) s = ReadAll(fd, &trailer, sizeof(trailer), off);
  close_fd();
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
    std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(c.id);
    const bool current = it != entries_.end() && !it->second.on_disk;
    if (error.ok() && current) {
      it->second.on_disk = true;
      ++written;
      continue;
    }
    stats_.disk_bytes -= c.bytes;  // not written, or erased meanwhile
    if (error.ok()) ::unlink(FilePath(c.id).c_str());
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
    std::lock_guard<std::mutex> lock(mu_);
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
      ++stats_.rejected;
      return absl::ResourceExhaustedError(absl::StrCat(
          "checkpoint of ", bytes, " bytes not admitted: worth less than what it would push out"));
    }
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
  std::lock_guard<std::mutex> lock(mu_);
  Entry e;
  e.pos = pos;
  e.scope = scope;
  e.bytes = bytes;
  e.cost = info.cost > 0 ? info.cost : 1e-9;
  e.reason = info.reason;
  e.path_key = info.path_key;
  e.added = e.last_use = NowLocked();
  if (retention_->Admit(FactsLocked(e), VictimsLocked(bytes, 0), NowLocked())) return true;
  ++stats_.rejected;
  return false;
}

void CheckpointStore::SetCost(CheckpointId id, double cost) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.cost = cost > 0 ? cost : 1e-9;
}

void CheckpointStore::Credit(CheckpointId id, double positions) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  RetentionFacts f = FactsLocked(it->second);
  f.saved = positions;
  retention_->Observe(RetentionEvent::kCredited, f, NowLocked());
}

void CheckpointStore::Reclassify(CheckpointId id, CaptureReason reason) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.reason = reason;
}

void CheckpointStore::MarkStale(CheckpointId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.stale = true;
}

void CheckpointStore::BeginRequest() {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_;
}

absl::StatusOr<std::shared_ptr<const Checkpoint>> CheckpointStore::Get(CheckpointId id) {
  Entry meta;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  const Entry& e = it->second;
  return CheckpointInfo{e.id, e.pos, e.scope, e.layout, e.bytes, e.cost,
                        e.ram != nullptr || e.spilling != nullptr, e.on_disk, e.tag};
}

void CheckpointStore::Erase(CheckpointId id) {
  bool delete_file = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  if (delete_file) ::unlink(FilePath(id).c_str());
}

std::vector<CheckpointInfo> CheckpointStore::List() const {
  std::vector<CheckpointInfo> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, e] : entries_) {
    out.push_back(CheckpointInfo{e.id, e.pos, e.scope, e.layout, e.bytes, e.cost,
                                 e.ram != nullptr || e.spilling != nullptr, e.on_disk, e.tag});
  }
  return out;
}

StoreStats CheckpointStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(listeners_mu_);
  int h = next_listener_++;
  listeners_.emplace(h, std::move(listener));
  return h;
}

void CheckpointStore::RemoveDropListener(int handle) {
  std::lock_guard<std::mutex> lock(listeners_mu_);
  listeners_.erase(handle);
}

int CheckpointStore::AddBranchCounter(BranchCounter counter) {
  std::lock_guard<std::mutex> lock(mu_);
  const int h = next_counter_++;
  branch_counters_.emplace(h, std::move(counter));
  return h;
}

void CheckpointStore::RemoveBranchCounter(int handle) {
  std::lock_guard<std::mutex> lock(mu_);
  branch_counters_.erase(handle);
}

}  // namespace cairn::checkpoint
