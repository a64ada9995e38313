// SessionDirectory: sessions persisted by id in a directory that several
// replicas share (cairn-server --session-dir), so that a session continues on
// another replica when its own went away (see "Routing across replicas" in
// the proto).
//
// One file per session, `<id>.session`: the owner, the prefix-cache tenant
// and a cairn.v1.SessionSnapshot, checksummed and replaced atomically
// (temporary file, fsync, rename), so a reader sees either the previous or
// the new version, never a torn one, even when the writer is killed.
//
// Replicas coordinate through the files only. A replica remembers the
// identity (inode, mtime, size) of each file it wrote or read; when a file
// changed since (another replica continued the session) or vanished (it was
// deleted or expired elsewhere), Check says so and the replica's live copy is
// stale. Two replicas serving one session at the same time (only while a
// proxy's ring changes) is last-writer-wins.
//
// Thread-safe. Files are expired by age: a session not written for longer
// than the idle timeout is gone, as a live one would be.
#ifndef CAIRN_SERVICE_SESSIONS_SESSION_DIR_H_
#define CAIRN_SERVICE_SESSIONS_SESSION_DIR_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cairn/v1/inference.pb.h"
#include "checkpoint/env.h"

namespace cairn::service {

struct PersistedSession {
  std::string owner;         // Caller::owner ("" without authentication)
  std::string cache_tenant;  // Caller::cache_tenant
  v1::SessionSnapshot snapshot;
};

class SessionDirectory final {
 public:
  // Creates `dir` when missing. INVALID_ARGUMENT for an empty path or a
  // non-positive expiry; the OS's error (as INTERNAL or PERMISSION_DENIED)
  // when the directory cannot be created or written. Every file operation
  // goes through `env` (null: checkpoint::Env::Default()), which must
  // outlive the directory object.
  static absl::StatusOr<std::unique_ptr<SessionDirectory>> Create(const std::string& dir, std::chrono::seconds expiry,
                                                                  checkpoint::Env* env = nullptr);

  // Writes the session's file (replacing it atomically). `id` must satisfy
  // SessionManager::ValidateId (INVALID_ARGUMENT otherwise). I/O errors as
  // INTERNAL, RESOURCE_EXHAUSTED for a full disk; the previous file stays.
  absl::Status Save(const std::string& id, const PersistedSession& session);

  // Reads a session's file. NOT_FOUND when there is none or it expired (the
  // file is then deleted); DATA_LOSS when it fails verification (deleted).
  absl::StatusOr<PersistedSession> Load(const std::string& id);

  // Whether a file exists for `id` (expired ones included until swept).
  bool Exists(const std::string& id) const;

  enum class Change {
    kUnchanged,  // as this replica last wrote or read it (or is writing it), or never seen here
    kChanged,    // another replica wrote it since
    kDeleted,    // it existed here and is gone
  };
  Change Check(const std::string& id);

  // Deletes the session's file (no-op when absent).
  void Remove(const std::string& id);

  // Deletes files (and leftover temporary files) older than the expiry;
  // returns how many sessions went.
  size_t RemoveExpired();

  const std::string& path() const { return dir_; }

 private:
  SessionDirectory(std::string dir, std::chrono::seconds expiry, checkpoint::Env* env)
      : dir_(std::move(dir)), expiry_(expiry), env_(env) {}
  std::string FilePath(const std::string& id) const { return dir_ + "/" + id + ".session"; }
  bool Expired(int64_t mtime_ns) const;

  const std::string dir_;
  const std::chrono::seconds expiry_;
  checkpoint::Env* const env_;
  absl::Mutex mu_;
  std::map<std::string, checkpoint::FileInfo> seen_ ABSL_GUARDED_BY(mu_);  // files this replica wrote or read
  std::map<std::string, int> writing_ ABSL_GUARDED_BY(mu_);                // Saves and Removes under way, by id
  uint64_t tmp_counter_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SESSIONS_SESSION_DIR_H_
