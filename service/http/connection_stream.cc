#include "service/http/connection_stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace cairn::service::http {
namespace {

thread_local ConnectionStream* current_stream = nullptr;

void AddressOf(const sockaddr_storage& addr, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
    port = ntohs(in6->sin6_port);
  }
  ip = buf;
}

}  // namespace

ConnectionStream* ConnectionStream::Current() { return current_stream; }
void ConnectionStream::SetCurrent(ConnectionStream* stream) { current_stream = stream; }

bool ConnectionStream::Wait(short events, bool reading) const {
  auto timeout = io_timeout_;
  if (reading && read_deadline_ != Clock::time_point::max()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(read_deadline_ - Clock::now());
    if (left <= std::chrono::milliseconds(0)) {
      read_refused_ = true;
      return false;
    }
    timeout = std::min(timeout, left);
  }
  pollfd p{fd_, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (r < 0 && errno == EINTR);
  if (r <= 0) {
    // Out of time (poll may wake a little before the deadline): closed
    // after this request rather than kept alive.
    if (reading && r == 0) read_refused_ = true;
    return false;
  }
  // A write to a peer that hung up fails; reads see the end themselves.
  if (!reading && (p.revents & (POLLERR | POLLHUP | POLLRDHUP)) != 0) return false;
  return (p.revents & (events | POLLHUP | POLLERR)) != 0;
}

ConnectionStream::~ConnectionStream() {
  if (ssl_ != nullptr && !tls_failed_ && SSL_is_init_finished(ssl_.get())) {
    SSL_shutdown(ssl_.get());
    ERR_clear_error();
  }
}

bool ConnectionStream::StartTls(SslSession session) {
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK) < 0) return false;
  ssl_ = std::move(session);
  return Tls([](SSL* ssl) { return SSL_accept(ssl); }, true) > 0;
}

bool ConnectionStream::HasBuffered() const {
  return buffered_begin_ < buffered_end_ || (ssl_ != nullptr && SSL_pending(ssl_.get()) > 0);
}

int ConnectionStream::Tls(absl::FunctionRef<int(SSL*)> call, bool reading) {
  for (;;) {
    ERR_clear_error();
    const int n = call(ssl_.get());
    if (n > 0) return n;
    switch (SSL_get_error(ssl_.get(), n)) {
      case SSL_ERROR_WANT_READ:
        if (!Wait(POLLIN, reading)) return -1;
        break;
      case SSL_ERROR_WANT_WRITE:
        if (!Wait(POLLOUT, reading)) return -1;
        break;
      case SSL_ERROR_ZERO_RETURN:
        return 0;
      default:
        tls_failed_ = true;
        ERR_clear_error();
        return -1;
    }
  }
}

bool ConnectionStream::PeerClosed() const {
  pollfd p{fd_, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLRDHUP)) != 0;
}

bool ConnectionStream::is_readable() const { return HasBuffered() || Wait(POLLIN, true); }

bool ConnectionStream::is_writable() const { return Wait(POLLOUT | POLLRDHUP, false); }

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  if (read_budget_ == 0) {
    read_refused_ = true;
    return -1;
  }
  size = std::min(size, read_budget_);
  ssize_t n;
  if (ssl_ != nullptr) {
    const int chunk = static_cast<int>(std::min<size_t>(size, INT_MAX));
    n = Tls([&](SSL* ssl) { return SSL_read(ssl, ptr, chunk); }, true);
  } else if (buffered_begin_ < buffered_end_) {
    n = static_cast<ssize_t>(std::min(size, buffered_end_ - buffered_begin_));
    std::memcpy(ptr, buffer_.data() + buffered_begin_, static_cast<size_t>(n));
    buffered_begin_ += static_cast<size_t>(n);
  } else {
    if (!Wait(POLLIN, true)) return -1;
    // httplib reads a request's line and headers a byte at a time: small
    // reads are served from a buffer, one recv for many of them.
    const bool direct = size >= kReadBuffer;
    if (!direct) buffer_.resize(kReadBuffer);
    do {
      n = ::recv(fd_, direct ? ptr : buffer_.data(), direct ? size : kReadBuffer, 0);
    } while (n < 0 && errno == EINTR);
    if (!direct && n > 0) {
      buffered_begin_ = std::min(size, static_cast<size_t>(n));
      buffered_end_ = static_cast<size_t>(n);
      std::memcpy(ptr, buffer_.data(), buffered_begin_);
      n = static_cast<ssize_t>(buffered_begin_);
    }
  }
  if (n > 0 && read_budget_ != SIZE_MAX) read_budget_ -= static_cast<size_t>(n);
  return n;
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (!Wait(POLLOUT | POLLRDHUP, false)) return -1;
  if (ssl_ != nullptr) {
    const int chunk = static_cast<int>(std::min<size_t>(size, INT_MAX));
    return Tls([&](SSL* ssl) { return SSL_write(ssl, ptr, chunk); }, false);
  }
  ssize_t n;
  do {
    n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) AddressOf(addr, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) AddressOf(addr, ip, port);
}

}  // namespace cairn::service::http
