#include "service/api/auth.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/hash.h"
#include "service/host/log.h"

namespace cairn::service {
namespace {

// Compares without an early exit, so timing does not reveal how much of a
// guessed token was right.
bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

int64_t Nanoseconds(const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

// The call's deadline (gRPC's "none" is the largest time point).
absl::Time Deadline(const grpc::ServerContextBase& ctx) {
  const std::chrono::system_clock::time_point d = ctx.deadline();
  return d == std::chrono::system_clock::time_point::max() ? absl::InfiniteFuture() : absl::FromChrono(d);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::Create(std::vector<std::string> tokens,
                                                                     bool share_cache) {
  for (const std::string& t : tokens) {
    if (t.empty()) return absl::InvalidArgumentError("empty authentication token");
  }
  std::unique_ptr<Authenticator> a(new Authenticator(!tokens.empty(), share_cache));
  absl::MutexLock lock(&a->mu_);
  a->tokens_ = std::move(tokens);
  return a;
}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::CreateFromFile(std::string path, bool share_cache,
                                                                             absl::Duration refresh) {
  // The stamp before the read: a change during the read is seen next time.
  const FileStamp stamp = Stamp(path);
  auto tokens = ReadTokenFile(path);
  if (!tokens.ok()) return tokens.status();
  std::unique_ptr<Authenticator> a(new Authenticator(true, share_cache));
  a->path_ = std::move(path);
  a->refresh_ = refresh;
  absl::MutexLock lock(&a->mu_);
  a->tokens_ = std::move(*tokens);
  a->stamp_ = stamp;
  a->next_check_ = absl::Now() + refresh;
  return a;
}

absl::StatusOr<std::vector<std::string>> Authenticator::ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read token file '", path, "'"));
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    std::string t(absl::StripAsciiWhitespace(line));
    if (t.empty() || t[0] == '#') continue;
    out.push_back(t);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("token file '", path, "' holds no token"));
  return out;
}

Authenticator::FileStamp Authenticator::Stamp(const std::string& path) {
  struct stat st = {};
  FileStamp s;
  // stat, not lstat: a Secret volume swaps a symlink to a new file.
  if (stat(path.c_str(), &st) != 0) return s;
  s.exists = true;
  s.device = st.st_dev;
  s.inode = st.st_ino;
  s.size = st.st_size;
  s.modified_ns = Nanoseconds(st.st_mtim);
  s.changed_ns = Nanoseconds(st.st_ctim);
  return s;
}

void Authenticator::RefreshTokens() const {
  if (path_.empty()) return;
  const absl::Time now = absl::Now();
  if (now < next_check_) return;
  next_check_ = now + refresh_;
  const FileStamp stamp = Stamp(path_);
  if (stamp == stamp_) return;
  stamp_ = stamp;
  absl::StatusOr<std::vector<std::string>> tokens = ReadTokenFile(path_);
  if (!tokens.ok()) {
    LogLine(LogLevel::kWarning,
            absl::StrCat("warning auth msg=", LogValue(absl::StrCat(tokens.status().message(), "; keeping the ",
                                                                    tokens_.size(), " tokens read before"))));
    return;
  }
  tokens_ = std::move(*tokens);
  LogLine(LogLevel::kInfo, absl::StrCat("auth msg=", LogValue(absl::StrCat("token file '", path_,
                                                                           "' re-read: ", tokens_.size(), " tokens"))));
}

absl::StatusOr<Caller> Authenticator::Authenticate(const grpc::ServerContextBase& ctx) const {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  absl::StatusOr<Caller> caller = it == md.end() ? Authenticate(std::nullopt)
                                                 : Authenticate(std::string_view(it->second.data(), it->second.size()));
  if (caller.ok()) caller->wait_until = Deadline(ctx);
  return caller;
}

absl::StatusOr<Caller> Authenticator::Authenticate(std::optional<std::string_view> authorization) const {
  if (!enabled_) return Caller{};
  if (!authorization) return absl::UnauthenticatedError("missing 'authorization: Bearer <token>' metadata");
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization->substr(0, kBearer.size()) != kBearer) {
    return absl::UnauthenticatedError("authorization metadata is not a bearer token");
  }
  const std::string_view token = authorization->substr(kBearer.size());
  bool found = false;
  {
    absl::MutexLock lock(&mu_);
    RefreshTokens();
    for (const std::string& t : tokens_) found |= ConstantTimeEqual(token, t);
  }
  if (!found) return absl::UnauthenticatedError("invalid token");
  // The identity is a hash of the token, so the token itself is not kept in
  // session records or the cache index.
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(checkpoint::HashBytes(token.data(), token.size(), 0x5eed)));
  Caller c;
  c.owner = buf;
  c.cache_tenant = share_cache_ ? "" : c.owner;
  return c;
}

}  // namespace cairn::service
