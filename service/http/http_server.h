// The OpenAI-compatible HTTP door: POST /v1/chat/completions, POST
// /v1/completions, GET /v1/models and GET /health, served by cpp-httplib on
// its own port, beside gRPC, from the same process. A completion is
// translated into a cairn.v1.GenerateRequest (openai_request.h) and runs the
// Generate path itself (InferenceService::StartGenerate: the same
// validation, prompt building, sessions, memory budget, scheduler, reply
// parsing, access log and metrics), carried by an HttpSink (http_sink.h)
// and written as OpenAI JSON or server-sent events (openai_reply.h).
//
// Same rules as gRPC: the same bearer tokens (Authorization: Bearer), the
// same TLS files, mutual TLS and rotation (tls_context.h), the same limits; errors in OpenAI's shape with the matching
// HTTP status; a client that disconnects cancels its request (its session keeps what it had). Bounded: request bodies
// (413 beyond), the time a request may take to arrive, read and write timeouts, and the connections served at once
// (connection_pool.h).
#ifndef CAIRN_SERVICE_HTTP_HTTP_SERVER_H_
#define CAIRN_SERVICE_HTTP_HTTP_SERVER_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "service/api/auth.h"
#include "service/api/inference_service.h"
#include "service/host/models.h"
#include "service/http/tls_context.h"

namespace httplib {
class Server;
}

namespace cairn::service::http {

struct HttpOptions {
  // "HOST:PORT" ("[V6]:PORT"); port 0 picks a free one.
  std::string listen;
  // A request body beyond this gets 413.
  size_t max_body_bytes = 16 << 20;
  // Connections served at once (a streaming completion holds one for its
  // duration), and accepted ones that may wait for a thread.
  size_t threads = 64;
  size_t queued_connections = 64;
  // A request (line, headers, body) must arrive within this; an idle
  // keep-alive connection is closed after keep_alive.
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds io_timeout{10000};  // each read and write
  std::chrono::milliseconds keep_alive{5000};
  size_t keep_alive_requests = 100;
  // A completion's deadline when its request sets none (the header
  // X-Cairn-Timeout-Ms: N sets N ms): it bounds the wait for a session
  // still finishing a cancelled request and the generation itself, as a
  // gRPC deadline does. 0: none, like a gRPC call without a deadline.
  std::chrono::milliseconds default_timeout{0};
  // The longest deadline a request (X-Cairn-Timeout-Ms) or the server's
  // default may set: a day.
  static constexpr int64_t kMaxTimeoutMs = 86400000;
  // HTTPS with these files (cert and key empty: plain HTTP); mutual TLS
  // with a client CA. The TLS handshake counts against request_timeout.
  TlsFiles tls;
};

// Borrows the service, models and authenticator (they outlive it).
// Thread-safe.
class HttpServer final {
 public:
  // Binds and starts serving. INVALID_ARGUMENT for a malformed address or
  // TLS files (TlsContext::Create), UNAVAILABLE when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Create(HttpOptions options, InferenceService* service,
                                                            ModelRegistry* models, const Authenticator* auth);
  // Stops (see Stop) and frees everything.
  ~HttpServer();

  int port() const { return port_; }
  // Stops accepting connections and waits for those being served (their
  // calls end on their own: the service refuses new ones while draining).
  // Idempotent.
  void Stop();

 private:
  class Routes;
  HttpServer() = default;

  std::unique_ptr<Routes> routes_;
  std::unique_ptr<TlsContext> tls_;  // null: plain HTTP
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace cairn::service::http

#endif  // CAIRN_SERVICE_HTTP_HTTP_SERVER_H_
