// Bearer-token authentication and tenants.
//
// With tokens configured, every Inference call must carry
// "authorization: Bearer <token>" metadata with one of them (UNAUTHENTICATED
// otherwise). The token decides the caller's identity: sessions belong to
// the token that created them (PERMISSION_DENIED for others), and the shared
// prefix cache is partitioned per token unless tenants may share it (cache
// timing would otherwise reveal other tenants' prompts). Without tokens
// every caller is the same, anonymous tenant.
#ifndef CAIRN_SERVICE_API_AUTH_H_
#define CAIRN_SERVICE_API_AUTH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"
#include "service/sessions/caller.h"

namespace cairn::service {

// Immutable after Create; thread-safe.
class Authenticator final {
 public:
  // No tokens: authentication off. INVALID_ARGUMENT for an empty token.
  static absl::StatusOr<std::unique_ptr<Authenticator>> Create(std::vector<std::string> tokens,
                                                               bool share_cache);
  // Tokens from a file, one per line (blank lines and '#' comments skipped).
  // NOT_FOUND when unreadable, INVALID_ARGUMENT when it holds no token.
  static absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path);

  bool enabled() const { return !tokens_.empty(); }
  absl::StatusOr<Caller> Authenticate(const grpc::ServerContextBase& ctx) const;

 private:
  Authenticator() = default;
  std::vector<std::string> tokens_;
  bool share_cache_ = false;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_AUTH_H_
