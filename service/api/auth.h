// Bearer-token authentication and tenants.
//
// With tokens configured, every Inference call must carry
// "authorization: Bearer <token>" metadata with one of them (UNAUTHENTICATED
// otherwise). The token decides the caller's identity: sessions belong to
// the token that created them (PERMISSION_DENIED for others), and the shared
// prefix cache is partitioned per token unless tenants may share it (cache
// timing would otherwise reveal other tenants' prompts). Without tokens
// every caller is the same, anonymous tenant.
//
// Tokens from a file follow the file: a rotated Secret (a new file renamed
// or a symlink swapped into place, as Kubernetes does, or the file rewritten)
// takes effect without a restart, so a removed token is refused and a new
// one accepted within the refresh interval.
#ifndef CAIRN_SERVICE_API_AUTH_H_
#define CAIRN_SERVICE_API_AUTH_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "service/sessions/caller.h"

namespace cairn::service {

// Thread-safe.
class Authenticator final {
 public:
  // These tokens for good. No tokens: authentication off. INVALID_ARGUMENT
  // for an empty token.
  static absl::StatusOr<std::unique_ptr<Authenticator>> Create(std::vector<std::string> tokens, bool share_cache);
  // The tokens of the file at `path` (ReadTokenFile's errors), re-read when
  // the file changes: a call checks the file's identity (device, inode),
  // size and times at most once per `refresh`, and re-reads it when any of
  // them changed. A file that cannot be read then, or holds no token (half
  // written), keeps the tokens read before, with a warning in the log.
  static absl::StatusOr<std::unique_ptr<Authenticator>> CreateFromFile(std::string path, bool share_cache,
                                                                       absl::Duration refresh);
  // Tokens from a file, one per line (blank lines and '#' comments skipped).
  // NOT_FOUND when unreadable, INVALID_ARGUMENT when it holds no token.
  static absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path);

  bool enabled() const { return enabled_; }
  // The call's caller, with the call's deadline as Caller::wait_until.
  // UNAUTHENTICATED without a valid token (when tokens are required).
  absl::StatusOr<Caller> Authenticate(const grpc::ServerContextBase& ctx) const;
  // The same from the metadata's value (nullopt: the call has none); the
  // caller's wait_until is left unset (no deadline known).
  absl::StatusOr<Caller> Authenticate(std::optional<std::string_view> authorization) const;

 private:
  // What tells that the token file changed.
  struct FileStamp {
    bool exists = false;
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    int64_t modified_ns = 0;
    int64_t changed_ns = 0;
    bool operator==(const FileStamp&) const = default;
  };
  static FileStamp Stamp(const std::string& path);

  Authenticator(bool enabled, bool share_cache) : enabled_(enabled), share_cache_(share_cache) {}
  // Re-reads the token file when it changed and the refresh interval passed.
  void RefreshTokens() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const bool enabled_;
  const bool share_cache_;
  std::string path_;  // "": the tokens never change
  absl::Duration refresh_;
  mutable absl::Mutex mu_;
  mutable std::vector<std::string> tokens_ ABSL_GUARDED_BY(mu_);
  mutable FileStamp stamp_ ABSL_GUARDED_BY(mu_);
  mutable absl::Time next_check_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_AUTH_H_
