#include "service/sessions/session_dir.h"

#include <unistd.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/hash.h"
#include "service/sessions/sessions.h"

namespace cairn::service {
namespace {

constexpr char kMagic[8] = {'C', 'A', 'I', 'R', 'N', 'S', 'E', 'S'};
constexpr uint32_t kVersion = 1;
constexpr std::string_view kSuffix = ".session";

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t owner_len;
  uint32_t tenant_len;
  uint32_t reserved;
  uint64_t snapshot_len;
  uint64_t checksum;  // over the header (checksum 0) and the payload
};

uint64_t Checksum(Header h, std::string_view payload) {
  h.checksum = 0;
  checkpoint::Hash64 sum(0x5e55);
  sum.Update(&h, sizeof(h));
  sum.Update(payload.data(), payload.size());
  return sum.Finish();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SessionDirectory>> SessionDirectory::Create(const std::string& dir,
                                                                           std::chrono::seconds expiry,
                                                                           checkpoint::Env* env) {
  if (dir.empty()) return absl::InvalidArgumentError("session directory path is empty");
  if (expiry.count() <= 0) return absl::InvalidArgumentError("session directory expiry must be positive");
  if (env == nullptr) env = checkpoint::Env::Default();
  if (absl::Status st = env->CreateDir(dir); !st.ok()) return st;
  return std::unique_ptr<SessionDirectory>(new SessionDirectory(dir, expiry, env));
}

bool SessionDirectory::Expired(int64_t mtime_ns) const {
  const int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return now_ns - mtime_ns > std::chrono::duration_cast<std::chrono::nanoseconds>(expiry_).count();
}

absl::Status SessionDirectory::Save(const std::string& id, const PersistedSession& session) {
  if (absl::Status st = SessionManager::ValidateId(id); !st.ok()) return st;
  std::string snapshot;
  if (!session.snapshot.SerializeToString(&snapshot)) return absl::InternalError("snapshot serialization failed");
  std::string payload = session.owner + session.cache_tenant + snapshot;
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.owner_len = static_cast<uint32_t>(session.owner.size());
  h.tenant_len = static_cast<uint32_t>(session.cache_tenant.size());
  h.snapshot_len = snapshot.size();
  h.checksum = Checksum(h, payload);

  const std::string path = FilePath(id);
  std::string tmp;
  {
    absl::MutexLock lock(&mu_);
    tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", tmp_counter_++);
    ++writing_[id];
  }
  const std::span<const std::byte> parts[] = {checkpoint::BytesOf(&h, 1),
                                              checkpoint::BytesOf(payload.data(), payload.size())};
  absl::StatusOr<checkpoint::FileInfo> written = env_->WriteFileAtomically(path, tmp, parts);
  absl::MutexLock lock(&mu_);
  if (--writing_[id] == 0) writing_.erase(id);
  if (!written.ok()) return written.status();
  seen_[id] = *written;
  return absl::OkStatus();
}

absl::StatusOr<PersistedSession> SessionDirectory::Load(const std::string& id) {
  if (absl::Status st = SessionManager::ValidateId(id); !st.ok()) return st;
  const std::string path = FilePath(id);
  absl::StatusOr<std::unique_ptr<checkpoint::RandomAccessFile>> file = env_->OpenForRead(path);
  if (!file.ok()) {
    if (absl::IsNotFound(file.status())) {
      return absl::NotFoundError(absl::StrCat("session '", id, "' not found (deleted or expired)"));
    }
    return file.status();
  }
  const checkpoint::FileInfo info = (*file)->info();
  std::string bytes(info.size, '\0');
  if (absl::Status st = (*file)->Read(0, checkpoint::MutableBytesOf(bytes.data(), bytes.size())); !st.ok()) {
    return st;
  }
  file->reset();
  if (Expired(info.mtime_ns)) {
    Remove(id);
    return absl::NotFoundError(absl::StrCat("session '", id, "' not found (expired)"));
  }
  Header h{};
  bool valid = bytes.size() >= sizeof(h);
  if (valid) {
    std::memcpy(&h, bytes.data(), sizeof(h));
    valid = std::memcmp(h.magic, kMagic, sizeof(kMagic)) == 0 && h.version == kVersion &&
            uint64_t{h.owner_len} + h.tenant_len + h.snapshot_len == bytes.size() - sizeof(h) &&
            Checksum(h, std::string_view(bytes).substr(sizeof(h))) == h.checksum;
  }
  PersistedSession out;
  if (valid) {
    const std::string_view payload = std::string_view(bytes).substr(sizeof(h));
    out.owner = std::string(payload.substr(0, h.owner_len));
    out.cache_tenant = std::string(payload.substr(h.owner_len, h.tenant_len));
    valid = out.snapshot.ParseFromArray(payload.data() + h.owner_len + h.tenant_len, static_cast<int>(h.snapshot_len));
  }
  if (!valid) {
    Remove(id);
    return absl::DataLossError(absl::StrCat("session file ", path, " failed verification (deleted)"));
  }
  absl::MutexLock lock(&mu_);
  seen_[id] = info;
  return out;
}

bool SessionDirectory::Exists(const std::string& id) const {
  return SessionManager::ValidateId(id).ok() && env_->Stat(FilePath(id)).ok();
}

SessionDirectory::Change SessionDirectory::Check(const std::string& id) {
  absl::MutexLock lock(&mu_);
  // This replica's own write or delete under way (a write renamed into
  // place but not yet recorded in seen_) is no other replica's change.
  if (writing_.count(id) != 0) return Change::kUnchanged;
  auto it = seen_.find(id);
  if (it == seen_.end()) return Change::kUnchanged;
  absl::StatusOr<checkpoint::FileInfo> now = env_->Stat(FilePath(id));
  if (!now.ok()) {
    seen_.erase(it);
    return Change::kDeleted;
  }
  if (*now == it->second) return Change::kUnchanged;
  seen_.erase(it);
  return Change::kChanged;
}

void SessionDirectory::Remove(const std::string& id) {
  if (!SessionManager::ValidateId(id).ok()) return;
  {
    absl::MutexLock lock(&mu_);
    seen_.erase(id);
    ++writing_[id];
  }
  env_->DeleteFile(FilePath(id)).IgnoreError();  // absent already: nothing to do
  absl::MutexLock lock(&mu_);
  if (--writing_[id] == 0) writing_.erase(id);
}

size_t SessionDirectory::RemoveExpired() {
  std::vector<std::string> expired;
  std::vector<std::string> stale_tmp;
  absl::StatusOr<std::vector<std::string>> names = env_->ListDir(dir_);
  for (const std::string& name : names.ok() ? *names : std::vector<std::string>{}) {
    if (name.find(kSuffix) == std::string::npos) continue;
    absl::StatusOr<checkpoint::FileInfo> info = env_->Stat(dir_ + "/" + name);
    if (!info.ok() || !Expired(info->mtime_ns)) continue;
    const size_t suffix_at = name.size() - kSuffix.size();
    if (name.size() > kSuffix.size() && name.compare(suffix_at, kSuffix.size(), kSuffix) == 0) {
      expired.push_back(name.substr(0, suffix_at));
    } else if (name.find(".session.tmp.") != std::string::npos) {
      stale_tmp.push_back(name);  // a writer died before its rename
    }
  }
  for (const std::string& id : expired) Remove(id);
  for (const std::string& name : stale_tmp) env_->DeleteFile(dir_ + "/" + name).IgnoreError();
  return expired.size();
}

}  // namespace cairn::service
