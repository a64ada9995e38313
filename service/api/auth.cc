#include "service/api/auth.h"

#include <cstdio>
#include <fstream>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/hash.h"

namespace cairn::service {
namespace {

// Compares without an early exit, so timing does not reveal how much of a
// guessed token was right.
bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::Create(std::vector<std::string> tokens,
                                                                     bool share_cache) {
  for (const std::string& t : tokens) {
    if (t.empty()) return absl::InvalidArgumentError("empty authentication token");
  }
  std::unique_ptr<Authenticator> a(new Authenticator());
  a->tokens_ = std::move(tokens);
  a->share_cache_ = share_cache;
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

absl::StatusOr<Caller> Authenticator::Authenticate(const grpc::ServerContextBase& ctx) const {
  if (tokens_.empty()) return Caller{};
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return absl::UnauthenticatedError("missing 'authorization: Bearer <token>' metadata");
  std::string_view value(it->second.data(), it->second.size());
  constexpr std::string_view kBearer = "Bearer ";
  if (value.substr(0, kBearer.size()) != kBearer) {
    return absl::UnauthenticatedError("authorization metadata is not a bearer token");
  }
  const std::string_view token = value.substr(kBearer.size());
  bool found = false;
  for (const std::string& t : tokens_) found |= ConstantTimeEqual(token, t);
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
