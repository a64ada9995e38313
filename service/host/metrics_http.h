// The HTTP endpoint Prometheus scrapes: a deliberately small HTTP/1.x server
// of our own. It replaces prometheus-cpp's Exposer, whose embedded civetweb
// crashed the whole process on any request other than GET /metrics (issue 16);
// a port anyone on the network can reach must survive any bytes sent to it.
#ifndef CAIRN_SERVICE_HOST_METRICS_HTTP_H_
#define CAIRN_SERVICE_HOST_METRICS_HTTP_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cairn::service {

struct MetricsHttpOptions {
  // Request line plus headers; a longer request gets 431 and is closed.
  size_t max_request_bytes = 8192;
  // Connections served at once; a new one beyond this closes the oldest, so
  // idle or slow clients cannot lock a scraper out.
  int max_connections = 16;
  // A connection that has not sent a complete request (or not taken its
  // reply) within this time is closed.
  std::chrono::milliseconds request_timeout{5000};
};

// The reply to a request whose first `received` bytes have arrived, or ""
// while more are needed to decide. GET and HEAD /metrics (any query) -> 200
// with `body()` (HEAD without it); another method on /metrics -> 405; another
// path -> 404; anything that is not an HTTP/1.0 or 1.1 request line and
// headers -> 400, as soon as it is clear (binary garbage: at once); no end of
// headers within `max_request_bytes` -> 431. Always a complete response with
// "Connection: close"; bytes after the headers (a body) are ignored. Pure;
// public for the fuzz target.
std::string HttpReplyWhenDecided(absl::string_view received, size_t max_request_bytes,
                                 const std::function<std::string()>& body);

// One thread that accepts, reads, answers and closes; it never reads a request
// body and never keeps a connection alive. Thread-safe to destroy from any
// thread but the server's own.
class MetricsHttpServer final {
 public:
  // `listen` is "HOST:PORT" ("[v6]:PORT" for IPv6, ":PORT" or "PORT" for
  // every interface; port 0 picks a free one). `render` is called on the
  // server's thread for every 200 reply and must be thread-safe.
  // INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it cannot be
  // bound (for example, the port is in use).
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Create(const std::string& listen,
                                                                   std::function<std::string()> render,
                                                                   MetricsHttpOptions options = {});
  // Stops the thread and closes every socket.
  ~MetricsHttpServer();

  int port() const { return port_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Connection;
  MetricsHttpServer() = default;
  // The thread: polls the listening socket and every connection.
  void Serve();
  void AcceptAll(std::vector<Connection>& conns, Clock::time_point now, Clock::time_point* accept_paused_until) const;
  void Advance(Connection& c) const;
  void ReadRequest(Connection& c) const;
  void WriteReply(Connection& c) const;
  void Drain(Connection& c) const;

  MetricsHttpOptions options_;
  std::function<std::string()> render_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: written once to stop Serve()
  int port_ = 0;
  std::thread thread_;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_HOST_METRICS_HTTP_H_
