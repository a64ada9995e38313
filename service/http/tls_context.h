// The HTTP door's TLS: the server's certificate chain and key, and a client
// CA that clients must present a certificate of (mutual TLS), as OpenSSL
// contexts that each new connection's TLS session is made from. Same files
// and same rotation rule as the gRPC port (service/server.h): the files are
// re-read when `refresh` has passed since the last look, a changed pair
// serves the next connection (open ones keep theirs), and a new pair that
// cannot be read or whose key does not match its certificate (say, half
// written) keeps the old one and is logged once, as gRPC's file watcher
// keeps its last good credentials.
#ifndef CAIRN_SERVICE_HTTP_TLS_CONTEXT_H_
#define CAIRN_SERVICE_HTTP_TLS_CONTEXT_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace cairn::service::http {

// PEM files; `cert` and `key` empty: plain HTTP.
struct TlsFiles {
  std::string cert;  // the chain, the server's certificate first
  std::string key;
  std::string client_ca;  // "": no client certificates asked
  std::chrono::seconds refresh{5};
};

// Frees an OpenSSL session.
struct SslFree {
  void operator()(SSL* ssl) const;
};
using SslSession = std::unique_ptr<SSL, SslFree>;

// Thread-safe: connections start sessions concurrently.
class TlsContext final {
 public:
  using Clock = std::chrono::steady_clock;
  // Reads the files. INVALID_ARGUMENT for a missing cert or key, a refresh
  // under 1 s, unparsable PEM or a key that does not match the
  // certificate; NOT_FOUND for a file that cannot be read.
  static absl::StatusOr<std::unique_ptr<TlsContext>> Create(TlsFiles files);
  ~TlsContext();

  // A server-side session over the socket `fd` (borrowed; the session
  // writes without SIGPIPE), from the newest good credentials (re-read
  // first when `refresh` has passed). The caller handshakes it.
  absl::StatusOr<SslSession> NewSession(int fd) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Loaded;
  explicit TlsContext(TlsFiles files) : files_(std::move(files)) {}
  // The files' bytes; then the context made of them, or why not.
  absl::StatusOr<std::unique_ptr<Loaded>> Read() const;
  absl::Status Build(Loaded& loaded) const;
  // Re-reads the files if `refresh` has passed; keeps the old context on
  // failure (logged once per failing content).
  void MaybeReload() ABSL_LOCKS_EXCLUDED(mu_);

  const TlsFiles files_;
  absl::Mutex mu_;
  std::shared_ptr<const Loaded> current_ ABSL_GUARDED_BY(mu_);
  Clock::time_point next_check_ ABSL_GUARDED_BY(mu_);
  bool checking_ ABSL_GUARDED_BY(mu_) = false;     // one connection re-reads, the others go on
  std::string last_failure_ ABSL_GUARDED_BY(mu_);  // files' bytes last refused (logged)
};

}  // namespace cairn::service::http

#endif  // CAIRN_SERVICE_HTTP_TLS_CONTEXT_H_
