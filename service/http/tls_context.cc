#include "service/http/tls_context.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace cairn::service::http {
namespace {

struct CtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;

// OpenSSL's reason for the last failure, with what was being done.
absl::Status OpenSslError(const std::string& what) {
  char reason[256] = "unknown reason";
  if (const unsigned long e = ERR_get_error(); e != 0) ERR_error_string_n(e, reason, sizeof(reason));
  ERR_clear_error();
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", reason));
}

absl::StatusOr<std::string> Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes = in ? std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) : "";
  if (!in || in.bad()) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  return bytes;
}

// Every certificate of a PEM file, in order.
std::vector<X509Ptr> Certificates(const std::string& pem) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  ERR_clear_error();  // the end of the file reads as an error
  return certs;
}

// The socket as OpenSSL's transport: send() without SIGPIPE (a client that
// went away must not kill the server), and "try again" for a non-blocking
// socket that is not ready (the stream then polls, within its bounds).
int SocketOf(BIO* b) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b))); }

int SocketWrite(BIO* b, const char* data, int size) {
  BIO_clear_retry_flags(b);
  ssize_t n;
  do {
    n = ::send(SocketOf(b), data, static_cast<size_t>(size), MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(b);
  return static_cast<int>(n);
}

int SocketRead(BIO* b, char* data, int size) {
  BIO_clear_retry_flags(b);
  ssize_t n;
  do {
    n = ::recv(SocketOf(b), data, static_cast<size_t>(size), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
  return static_cast<int>(n);
}

long SocketCtrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int SocketCreate(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

BIO_METHOD* SocketMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "cairn socket");
    BIO_meth_set_write(m, SocketWrite);
    BIO_meth_set_read(m, SocketRead);
    BIO_meth_set_ctrl(m, SocketCtrl);
    BIO_meth_set_create(m, SocketCreate);
    return m;
  }();
  return method;
}

}  // namespace

void SslFree::operator()(SSL* ssl) const { SSL_free(ssl); }

// The files' bytes and the context made of them.
struct TlsContext::Loaded {
  std::string cert, key, client_ca;
  std::unique_ptr<SSL_CTX, CtxFree> ctx;
  bool SameFiles(const Loaded& o) const { return cert == o.cert && key == o.key && client_ca == o.client_ca; }
};

absl::StatusOr<std::unique_ptr<TlsContext>> TlsContext::Create(TlsFiles files) {
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a key");
  }
  if (files.refresh < std::chrono::seconds(1)) {
    return absl::InvalidArgumentError("the credentials' refresh interval must be at least 1 s");
  }
  std::unique_ptr<TlsContext> tls(new TlsContext(std::move(files)));
  absl::StatusOr<std::unique_ptr<Loaded>> loaded = tls->Read();
  if (!loaded.ok()) return loaded.status();
  if (absl::Status st = tls->Build(**loaded); !st.ok()) return st;
  absl::MutexLock lock(&tls->mu_);
  tls->current_ = *std::move(loaded);
  tls->next_check_ = Clock::now() + tls->files_.refresh;
  return tls;
}

TlsContext::~TlsContext() = default;

absl::StatusOr<std::unique_ptr<TlsContext::Loaded>> TlsContext::Read() const {
  auto l = std::make_unique<Loaded>();
  for (auto [path, bytes] :
       {std::pair{&files_.cert, &l->cert}, {&files_.key, &l->key}, {&files_.client_ca, &l->client_ca}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> read = Slurp(*path);
    if (!read.ok()) return read.status();
    *bytes = *std::move(read);
  }
  return l;
}

absl::Status TlsContext::Build(Loaded& l) const {
  l.ctx.reset(SSL_CTX_new(TLS_server_method()));
  SSL_CTX* ctx = l.ctx.get();
  if (ctx == nullptr) return OpenSslError("TLS context");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Partial writes: the stream writes what the socket takes within its
  // timeout. A peer's plain close is the end of its stream, as over TCP.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
  // No resumption: every connection is verified against the current files.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(ctx, 0);
  std::vector<X509Ptr> chain = Certificates(l.cert);
  if (chain.empty()) return absl::InvalidArgumentError(absl::StrCat("no PEM certificate in '", files_.cert, "'"));
  if (SSL_CTX_use_certificate(ctx, chain[0].get()) != 1) return OpenSslError(files_.cert);
  for (size_t i = 1; i < chain.size(); ++i) {
    if (SSL_CTX_add1_chain_cert(ctx, chain[i].get()) != 1) return OpenSslError(files_.cert);
  }
  std::unique_ptr<BIO, BioFree> key_bio(BIO_new_mem_buf(l.key.data(), static_cast<int>(l.key.size())));
  std::unique_ptr<EVP_PKEY, KeyFree> key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) return OpenSslError(absl::StrCat("no PEM private key in '", files_.key, "'"));
  if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return OpenSslError(absl::StrCat("'", files_.key, "' does not match '", files_.cert, "'"));
  }
  if (!files_.client_ca.empty()) {
    std::vector<X509Ptr> cas = Certificates(l.client_ca);
    if (cas.empty()) return absl::InvalidArgumentError(absl::StrCat("no PEM certificate in '", files_.client_ca, "'"));
    for (const X509Ptr& ca : cas) {
      if (X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca.get()) != 1 ||
          SSL_CTX_add_client_CA(ctx, ca.get()) != 1) {
        return OpenSslError(files_.client_ca);
      }
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return absl::OkStatus();
}

void TlsContext::MaybeReload() {
  {
    absl::MutexLock lock(&mu_);
    if (checking_ || Clock::now() < next_check_) return;
    checking_ = true;
  }
  // Read and parsed unlocked: the other connections handshake meanwhile
  // with the current context.
  std::shared_ptr<const Loaded> current;
  {
    absl::MutexLock lock(&mu_);
    current = current_;
  }
  absl::StatusOr<std::unique_ptr<Loaded>> fresh = Read();
  absl::Status status = fresh.status();
  const bool changed = fresh.ok() && !(*fresh)->SameFiles(*current);
  if (changed) status = Build(**fresh);
  absl::MutexLock lock(&mu_);
  checking_ = false;
  next_check_ = Clock::now() + files_.refresh;
  if (status.ok()) {
    if (changed) current_ = *std::move(fresh);
    last_failure_.clear();
    return;
  }
  // Logged once per failure, not at each connection.
  if (std::string failure = status.ToString(); failure != last_failure_) {
    std::fprintf(stderr, "cairn: HTTP port: the new TLS credentials are refused (%s); keeping the previous ones\n",
                 failure.c_str());
    last_failure_ = std::move(failure);
  }
}

absl::StatusOr<SslSession> TlsContext::NewSession(int fd) {
  MaybeReload();
  std::shared_ptr<const Loaded> loaded;
  {
    absl::MutexLock lock(&mu_);
    loaded = current_;
  }
  // The session holds its own reference to the context: a rotation frees
  // the old one once its last connection ends.
  SslSession ssl(SSL_new(loaded->ctx.get()));
  BIO* bio = ssl != nullptr ? BIO_new(SocketMethod()) : nullptr;
  if (bio == nullptr) {
    ERR_clear_error();
    return absl::ResourceExhaustedError("cannot start a TLS session");
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  SSL_set_bio(ssl.get(), bio, bio);
  SSL_set_accept_state(ssl.get());
  return ssl;
}

}  // namespace cairn::service::http
