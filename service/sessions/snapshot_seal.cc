#include "service/sessions/snapshot_seal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace cairn::service {
namespace {

constexpr size_t kDigestBytes = 32;  // SHA-256
constexpr size_t kMinKeyBytes = 16;

// SHA-256 over a canonical encoding: fixed-width little-endian integers and
// length-prefixed byte strings, so that no two different snapshots encode
// alike (a plain concatenation would let bytes move between fields).
class CanonicalDigest {
 public:
  CanonicalDigest() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void Raw(const void* p, size_t n) { EVP_DigestUpdate(ctx_.get(), p, n); }
  void U64(uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    Raw(b, sizeof b);
  }
  void I32(int32_t v) { U64(static_cast<uint64_t>(static_cast<uint32_t>(v))); }
  void Bytes(std::string_view s) {
    U64(s.size());
    Raw(s.data(), s.size());
  }
  std::string Finish() {
    unsigned char out[kDigestBytes];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), out, &n);
    return std::string(reinterpret_cast<const char*>(out), n);
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

std::string Checksum(const v1::SessionSnapshot& snap) {
  CanonicalDigest d;
  d.Bytes("cairn.v1.SessionSnapshot checksum");
  d.I32(snap.version());
  d.Bytes(snap.model());
  d.Bytes(snap.arch());
  d.I32(snap.n_vocab());
  d.U64(snap.layout());
  d.I32(snap.pos());
  d.Bytes(snap.state());
  d.U64(static_cast<uint64_t>(snap.history_size()));
  for (const v1::HistoryItem& item : snap.history()) {
    d.I32(static_cast<int32_t>(item.item_case()));
    if (item.has_chunk()) {
      const v1::EmbeddingChunk& c = item.chunk();
      d.I32(c.width());
      d.I32(c.nx());
      d.I32(c.ny());
      d.U64(static_cast<uint64_t>(c.values_size()));
      for (float v : c.values()) {
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        d.I32(static_cast<int32_t>(bits));
      }
    } else {
      d.I32(item.token());
    }
  }
  d.U64(static_cast<uint64_t>(snap.message_ends_size()));
  for (int32_t e : snap.message_ends()) d.I32(e);
  return d.Finish();
}

std::string Sign(const std::string& key, const std::string& checksum) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(checksum.data()),
       checksum.size(), out, &n);
  return std::string(reinterpret_cast<const char*>(out), n);
}

bool ConstantTimeEqual(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

absl::StatusOr<std::string> ReadSnapshotKey(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the snapshot key file '", path, "'"));
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string key = buf.str();
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (key.size() < kMinKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the snapshot key in '", path, "' has ", key.size(), " bytes; it needs at least ", kMinKeyBytes));
  }
  return key;
}

void SealSnapshot(const std::string& key, v1::SessionSnapshot* snap) {
  snap->clear_checksum();
  snap->clear_signature();
  const std::string sum = Checksum(*snap);
  if (!key.empty()) snap->set_signature(Sign(key, sum));
  snap->set_checksum(sum);
}

absl::StatusOr<SnapshotProvenance> VerifySnapshot(const std::string& key, const v1::SessionSnapshot& snap) {
  if (snap.checksum().empty()) return absl::InvalidArgumentError("snapshot has no checksum");
  const std::string sum = Checksum(snap);
  if (!ConstantTimeEqual(sum, snap.checksum())) {
    return absl::InvalidArgumentError("snapshot checksum does not match its content (damaged or edited)");
  }
  if (!key.empty() && ConstantTimeEqual(Sign(key, sum), snap.signature())) {
    return SnapshotProvenance::kAuthenticated;
  }
  return SnapshotProvenance::kUnauthenticated;
}

}  // namespace cairn::service
