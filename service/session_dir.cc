#include "service/session_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/hash.h"
#include "service/sessions.h"

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

absl::Status OsError(const std::string& what, int err) {
  const std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(msg);
  if (err == EACCES || err == EPERM || err == EROFS) return absl::PermissionDeniedError(msg);
  if (err == ENOENT) return absl::NotFoundError(msg);
  return absl::InternalError(msg);
}

uint64_t Checksum(Header h, std::string_view payload) {
  h.checksum = 0;
  checkpoint::Hash64 sum(0x5e55);
  sum.Update(&h, sizeof(h));
  sum.Update(payload.data(), payload.size());
  return sum.Finish();
}

int64_t MtimeNs(const struct stat& st) {
  return int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SessionDirectory>> SessionDirectory::Create(const std::string& dir,
                                                                           std::chrono::seconds expiry) {
  if (dir.empty()) return absl::InvalidArgumentError("session directory path is empty");
  if (expiry.count() <= 0) return absl::InvalidArgumentError("session directory expiry must be positive");
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return OsError("create " + dir, errno);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return OsError("write to " + dir, errno);
  return std::unique_ptr<SessionDirectory>(new SessionDirectory(dir, expiry));
}

bool SessionDirectory::Expired(int64_t mtime_ns) const {
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
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
    std::lock_guard<std::mutex> lock(mu_);
    tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", tmp_counter_++);
  }
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return OsError("create " + tmp, errno);
  absl::Status st;
  for (std::string_view part : {std::string_view(reinterpret_cast<const char*>(&h), sizeof(h)),
                                std::string_view(payload)}) {
    while (st.ok() && !part.empty()) {
      const ssize_t n = ::write(fd, part.data(), part.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) st = OsError("write " + tmp, errno);
      if (n > 0) part.remove_prefix(static_cast<size_t>(n));
    }
  }
  // Durable before the rename makes it visible: a reader never sees a torn file.
  if (st.ok() && ::fsync(fd) != 0) st = OsError("fsync " + tmp, errno);
  struct stat sb {};
  if (st.ok() && ::fstat(fd, &sb) != 0) st = OsError("stat " + tmp, errno);
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = OsError("rename " + tmp, errno);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  std::lock_guard<std::mutex> lock(mu_);
  seen_[id] = Identity{sb.st_dev, sb.st_ino, MtimeNs(sb), sb.st_size};
  return absl::OkStatus();
}

absl::StatusOr<PersistedSession> SessionDirectory::Load(const std::string& id) {
  if (absl::Status st = SessionManager::ValidateId(id); !st.ok()) return st;
  const std::string path = FilePath(id);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("session '", id, "' not found (deleted or expired)"));
    return OsError("open " + path, errno);
  }
  struct stat sb {};
  std::string bytes;
  absl::Status st;
  if (::fstat(fd, &sb) != 0) {
    st = OsError("stat " + path, errno);
  } else {
    bytes.resize(static_cast<size_t>(sb.st_size));
    size_t got = 0;
    while (st.ok() && got < bytes.size()) {
      const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) st = OsError("read " + path, errno);
      if (n == 0) break;
      if (n > 0) got += static_cast<size_t>(n);
    }
    bytes.resize(got);
  }
  ::close(fd);
  if (!st.ok()) return st;
  if (Expired(MtimeNs(sb))) {
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
    valid = out.snapshot.ParseFromArray(payload.data() + h.owner_len + h.tenant_len,
                                        static_cast<int>(h.snapshot_len));
  }
  if (!valid) {
    Remove(id);
    return absl::DataLossError(absl::StrCat("session file ", path, " failed verification (deleted)"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  seen_[id] = Identity{sb.st_dev, sb.st_ino, MtimeNs(sb), sb.st_size};
  return out;
}

bool SessionDirectory::Exists(const std::string& id) const {
  struct stat sb {};
  return SessionManager::ValidateId(id).ok() && ::stat(FilePath(id).c_str(), &sb) == 0;
}

SessionDirectory::Change SessionDirectory::Check(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seen_.find(id);
  if (it == seen_.end()) return Change::kUnchanged;
  struct stat sb {};
  if (::stat(FilePath(id).c_str(), &sb) != 0) {
    seen_.erase(it);
    return Change::kDeleted;
  }
  if (Identity{sb.st_dev, sb.st_ino, MtimeNs(sb), sb.st_size} == it->second) return Change::kUnchanged;
  seen_.erase(it);
  return Change::kChanged;
}

void SessionDirectory::Remove(const std::string& id) {
  if (!SessionManager::ValidateId(id).ok()) return;
  ::unlink(FilePath(id).c_str());
  std::lock_guard<std::mutex> lock(mu_);
  seen_.erase(id);
}

size_t SessionDirectory::RemoveExpired() {
  std::vector<std::string> expired;
  std::vector<std::string> stale_tmp;
  if (DIR* d = ::opendir(dir_.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      struct stat sb {};
      if (name.find(kSuffix) == std::string::npos || ::stat((dir_ + "/" + name).c_str(), &sb) != 0 ||
          !Expired(MtimeNs(sb))) {
        continue;
      }
      const size_t suffix_at = name.size() - kSuffix.size();
      if (name.size() > kSuffix.size() && name.compare(suffix_at, kSuffix.size(), kSuffix) == 0) {
        expired.push_back(name.substr(0, suffix_at));
      } else if (name.find(".session.tmp.") != std::string::npos) {
        stale_tmp.push_back(name);  // a writer died before its rename
      }
    }
    ::closedir(d);
  }
  for (const std::string& id : expired) Remove(id);
  for (const std::string& name : stale_tmp) ::unlink((dir_ + "/" + name).c_str());
  return expired.size();
}

}  // namespace cairn::service
