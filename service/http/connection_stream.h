// One HTTP connection's socket as cpp-httplib reads and writes it, with the
// bounds a port open to anyone needs: a request (its line, headers and
// body) must arrive within a deadline, however slowly its bytes trickle in
// (slowloris), every read and write waits at most a timeout, and a peer that
// closed its end is seen at once (the stream of a client that went away
// stops). httplib parses the bytes; this only moves them, in the clear or
// through a TLS session (tls_context.h) under the same bounds: the
// handshake counts against the request's deadline, each wait of OpenSSL's
// for the socket (either way, whatever the call) against the timeout.
#ifndef CAIRN_SERVICE_HTTP_CONNECTION_STREAM_H_
#define CAIRN_SERVICE_HTTP_CONNECTION_STREAM_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "httplib.h"
#include "service/http/tls_context.h"

namespace cairn::service::http {

// Used by one connection thread; PeerClosed is safe from it only.
class ConnectionStream final : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;
  // Borrows `fd` (the caller closes it).
  ConnectionStream(int fd, std::chrono::milliseconds io_timeout) : fd_(fd), io_timeout_(io_timeout) {}
  // Ends a TLS session with its close_notify (best effort, not waited for).
  ~ConnectionStream() override;

  // Serves TLS over the connection from now on: makes the socket
  // non-blocking and handshakes, within the read deadline. False when the
  // handshake failed or ran out of time (the connection is to be closed).
  bool StartTls(SslSession session);
  // Bytes of a request already received (and decrypted) but not yet read.
  bool HasBuffered() const;

  // Reads fail once `deadline` passes or `max_bytes` more have been read
  // (until Unbounded): a request's line, headers and body must arrive within
  // both, since httplib keeps every header line it reads.
  void ReadBy(Clock::time_point deadline, size_t max_bytes) {
    read_deadline_ = deadline;
    read_budget_ = max_bytes;
  }
  void Unbounded() {
    read_deadline_ = Clock::time_point::max();
    read_budget_ = SIZE_MAX;
  }
  // The peer closed or reset the connection.
  bool PeerClosed() const;
  // A read failed for want of time (the deadline or the I/O timeout) or of
  // budget: the connection is closed rather than kept alive for a client
  // that trickles its bytes or floods them.
  bool read_refused() const { return read_refused_; }
  // The request's body was left unread (refused before or while it was
  // read): the bytes that follow are not a request, so the connection ends
  // after this response.
  void EndAfterResponse() { end_after_response_ = true; }
  bool end_after_response() const { return end_after_response_; }
  // The connection's thread's stream while it serves a request (null
  // elsewhere): route handlers mark the request arrived and watch the peer.
  static ConnectionStream* Current();
  static void SetCurrent(ConnectionStream* stream);

  // httplib::Stream.
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  using httplib::Stream::write;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return fd_; }

 private:
  // Waits up to the timeout (and the read deadline) for `events`.
  bool Wait(short events, bool reading) const;
  // One OpenSSL call until it moves bytes (> 0): waits for what it asks
  // for, within the bounds of a read or a write. 0 at the peer's end, -1
  // on failure or timeout.
  int Tls(absl::FunctionRef<int(SSL*)> call, bool reading);

  const int fd_;
  const std::chrono::milliseconds io_timeout_;
  Clock::time_point read_deadline_ = Clock::time_point::max();
  size_t read_budget_ = SIZE_MAX;
  // In the clear, small reads come from buffer_[buffered_begin_,
  // buffered_end_) (TLS buffers in OpenSSL).
  static constexpr size_t kReadBuffer = 16 << 10;
  std::vector<char> buffer_;
  size_t buffered_begin_ = 0, buffered_end_ = 0;
  mutable bool read_refused_ = false;
  bool end_after_response_ = false;
  SslSession ssl_;           // null in the clear
  bool tls_failed_ = false;  // no close_notify after a fatal error
};

}  // namespace cairn::service::http

#endif  // CAIRN_SERVICE_HTTP_CONNECTION_STREAM_H_
