// Env: the file-system operations of the checkpoint store's disk tier and of
// the service's session directory, behind one interface (in the spirit of
// LevelDB's Env), so that tests can fail chosen operations (a full disk, a
// read error, a failing rename) with a real subclass, and the callers' error
// paths are exercised rather than assumed.
//
// Contract for every implementation:
// - Errors are absl::Status values naming the path: NOT_FOUND for a missing
//   file, RESOURCE_EXHAUSTED for a full disk or quota, PERMISSION_DENIED for
//   refused access or a read-only file system, INTERNAL otherwise
//   (PosixError maps errno so). Nothing throws.
// - WriteFileAtomically is all or nothing: after OK the file holds exactly
//   the bytes given and survives a crash (data and rename are synced); after
//   an error, or a crash midway, `path` is as before (its previous version or
//   absent) and the temporary file is removed where the process still can.
// - Thread-safe: calls may run concurrently on different paths.
#ifndef CAIRN_CHECKPOINT_ENV_H_
#define CAIRN_CHECKPOINT_ENV_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cairn::checkpoint {

// What identifies one version of a file (a rewrite changes the inode or the
// modification time) and its size.
struct FileInfo {
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t mtime_ns = 0;  // since the Unix epoch
  uint64_t size = 0;
  bool operator==(const FileInfo&) const = default;
};

// An open file read at offsets; its FileInfo is of the version opened.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  virtual const FileInfo& info() const = 0;
  // Fills `out` from `offset`; DATA_LOSS when the file ends first.
  virtual absl::Status Read(uint64_t offset, std::span<std::byte> out) = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The POSIX implementation; lives as long as the process.
  static Env* Default();

  // Creates `dir` (mode 0700) unless it exists; then checks that this
  // process can create files in it.
  virtual absl::Status CreateDir(const std::string& dir) = 0;
  // Names of the entries of `dir` ("." and ".." excluded), in no order.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  virtual absl::StatusOr<FileInfo> Stat(const std::string& path) = 0;
  virtual absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) = 0;
  // Writes the concatenation of `parts` to `tmp_path` (the caller's name,
  // unique and in the same directory as `path`), syncs it, renames it to
  // `path` and syncs the directory. Returns the new file's FileInfo.
  virtual absl::StatusOr<FileInfo> WriteFileAtomically(const std::string& path, const std::string& tmp_path,
                                                       std::span<const std::span<const std::byte>> parts) = 0;
  // NOT_FOUND when absent.
  virtual absl::Status DeleteFile(const std::string& path) = 0;
};

// The bytes of `count` objects at `p`, as WriteFileAtomically and
// RandomAccessFile::Read take them.
template <typename T>
std::span<const std::byte> BytesOf(const T* p, size_t count) {
  return {reinterpret_cast<const std::byte*>(p), count * sizeof(T)};
}
template <typename T>
std::span<std::byte> MutableBytesOf(T* p, size_t count) {
  return {reinterpret_cast<std::byte*>(p), count * sizeof(T)};
}

// `what` (naming the path) and strerror(err), with the code the contract
// above gives errno `err`.
absl::Status PosixError(const std::string& what, int err);

namespace env_testing {
// Called by the default Env after every write(2) of WriteFileAtomically with
// the bytes written so far and the total; a test uses it to kill the writer
// midway. Pass nullptr to clear. Not thread-safe: set before use.
void SetWriteHook(std::function<void(size_t written, size_t total)> hook);
}  // namespace env_testing

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_ENV_H_
