#include "checkpoint/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint/injected_faults.h"

namespace cairn::checkpoint {
namespace {

// Large writes go in steps so the test hook sees progress within a file.
constexpr size_t kWriteChunk = size_t{1} << 20;

std::function<void(size_t, size_t)>& WriteHook() {
  static std::function<void(size_t, size_t)> hook;
  return hook;
}

FileInfo InfoOf(const struct stat& st) {
  return FileInfo{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                  int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec, static_cast<uint64_t>(st.st_size)};
}

class PosixFile final : public RandomAccessFile {
 public:
  PosixFile(int fd, std::string path, FileInfo info) : fd_(fd), path_(std::move(path)), info_(info) {}
  ~PosixFile() override { ::close(fd_); }
  const FileInfo& info() const override { return info_; }

  absl::Status Read(uint64_t offset, std::span<std::byte> out) override {
    while (!out.empty()) {
      const ssize_t r = ::pread(fd_, out.data(), out.size(), static_cast<off_t>(offset));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return PosixError("read " + path_, errno);
      if (r == 0) return absl::DataLossError(absl::StrCat(path_, " ends before offset ", offset + out.size()));
      out = out.subspan(static_cast<size_t>(r));
      offset += static_cast<uint64_t>(r);
    }
    return absl::OkStatus();
  }

 private:
  const int fd_;
  const std::string path_;
  const FileInfo info_;
};

class PosixEnv final : public Env {
 public:
  absl::Status CreateDir(const std::string& dir) override {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return PosixError("create directory " + dir, errno);
    if (::access(dir.c_str(), W_OK | X_OK) != 0) return PosixError("write to " + dir, errno);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return PosixError("open directory " + dir, errno);
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    ::closedir(d);
    return names;
  }

  absl::StatusOr<FileInfo> Stat(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return PosixError("stat " + path, errno);
    return InfoOf(st);
  }

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return PosixError("open " + path, errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      return PosixError("stat " + path, err);
    }
    return std::make_unique<PosixFile>(fd, path, InfoOf(st));
  }

  absl::StatusOr<FileInfo> WriteFileAtomically(const std::string& path, const std::string& tmp_path,
                                               std::span<const std::span<const std::byte>> parts) override {
    const int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return PosixError("create " + tmp_path, errno);
    size_t total = 0;
    for (const auto& part : parts) total += part.size();
    size_t written = 0;
    absl::Status s;
    for (std::span<const std::byte> part : parts) {
      while (s.ok() && !part.empty()) {
        const ssize_t w = ::write(fd, part.data(), std::min(part.size(), kWriteChunk));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
          s = PosixError("write " + tmp_path, errno);
          break;
        }
        part = part.subspan(static_cast<size_t>(w));
        written += static_cast<size_t>(w);
        if (WriteHook()) WriteHook()(written, total);
      }
    }
    // Durable before the rename makes it visible: a reader never sees a torn file.
    if (s.ok() && ::fsync(fd) != 0) s = PosixError("fsync " + tmp_path, errno);
    struct stat st {};
    if (s.ok() && ::fstat(fd, &st) != 0) s = PosixError("stat " + tmp_path, errno);
    ::close(fd);
    if (s.ok() && ::rename(tmp_path.c_str(), path.c_str()) != 0) s = PosixError("rename " + tmp_path, errno);
    if (!s.ok()) {
      ::unlink(tmp_path.c_str());
      return s;
    }
    // Make the rename itself durable.
    const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
    if (const int dfd = ::open(dir.empty() ? "/" : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    return InfoOf(st);
  }

  absl::Status DeleteFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return PosixError("delete " + path, errno);
    return absl::OkStatus();
  }
};

}  // namespace

Env* Env::Default() {
  // Never destroyed: used until exit.
  static Env* env = []() -> Env* {
    auto* posix = new PosixEnv();
    const char* faults = std::getenv(kDiskFaultsVariable);  // testing only: see injected_faults.h
    if (faults == nullptr || *faults == '\0') return posix;
    absl::StatusOr<std::unique_ptr<Env>> injecting = InjectedFaultsEnv(faults, posix);
    if (!injecting.ok()) {
      // A test that asked for faults must not run without them.
      std::fprintf(stderr, "cairn: %s\n", injecting.status().ToString().c_str());
      std::abort();
    }
    std::fprintf(stderr, "cairn: TESTING ONLY: injecting disk faults (%s=%s)\n", kDiskFaultsVariable, faults);
    return injecting->release();
  }();
  return env;
}

absl::Status PosixError(const std::string& what, int err) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

namespace env_testing {
void SetWriteHook(std::function<void(size_t, size_t)> hook) { WriteHook() = std::move(hook); }
}  // namespace env_testing

}  // namespace cairn::checkpoint
