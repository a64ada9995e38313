#include "service/host/metrics_http.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service/host/listen_socket.h"

namespace cairn::service {
namespace {

std::string Response(int code, absl::string_view reason, absl::string_view body, bool send_body,
                     absl::string_view extra_headers = "") {
  std::string r = absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\n", extra_headers, "Content-Length: ", body.size(),
                               "\r\nConnection: close\r\n\r\n");
  if (send_body) r.append(body.data(), body.size());
  return r;
}

std::string PlainResponse(int code, absl::string_view reason) {
  return Response(code, reason, absl::StrCat(reason, "\n"), /*send_body=*/true,
                  "Content-Type: text/plain; charset=utf-8\r\n");
}

// RFC 9110 token characters (method and header names).
bool IsTokenChar(unsigned char c) { return std::isalnum(c) != 0 || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr; }
bool IsToken(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return IsTokenChar(c); });
}
// Visible ASCII: what a request target may contain.
bool IsVisible(absl::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

absl::string_view StripCr(absl::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

struct RequestLine {
  absl::string_view method, target;
};

bool ParseRequestLine(absl::string_view line, RequestLine* out) {
  std::vector<absl::string_view> parts = absl::StrSplit(StripCr(line), ' ');
  if (parts.size() != 3 || parts[0].size() > 32 || !IsToken(parts[0])) return false;
  if (parts[1].empty() || parts[1].front() != '/' || !IsVisible(parts[1])) return false;
  if (parts[2] != "HTTP/1.0" && parts[2] != "HTTP/1.1") return false;
  *out = {parts[0], parts[1]};
  return true;
}

// Header lines: "name: value", value without control characters but tab.
bool HeadersValid(absl::string_view headers) {
  for (absl::string_view line : absl::StrSplit(headers, '\n')) {
    line = StripCr(line);
    if (line.empty()) continue;
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos || !IsToken(line.substr(0, colon))) return false;
    for (char c : line.substr(colon + 1)) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) return false;
    }
  }
  return true;
}

// Where the head ends (just past the blank line), or npos.
size_t HeadEnd(absl::string_view in) {
  const size_t crlf = in.find("\r\n\r\n");
  const size_t lf = in.find("\n\n");
  if (crlf == absl::string_view::npos && lf == absl::string_view::npos) return absl::string_view::npos;
  if (lf == absl::string_view::npos || (crlf != absl::string_view::npos && crlf < lf)) return crlf + 4;
  return lf + 2;
}

// The reply to a complete request head (request line, headers, blank line).
std::string HttpReplyFor(absl::string_view head, const std::function<std::string()>& body) {
  const size_t line_end = head.find('\n');
  RequestLine rl;
  if (line_end == absl::string_view::npos || !ParseRequestLine(head.substr(0, line_end), &rl) ||
      !HeadersValid(head.substr(line_end + 1))) {
    return PlainResponse(400, "Bad Request");
  }
  const absl::string_view path = rl.target.substr(0, rl.target.find('?'));
  if (path != "/metrics") return PlainResponse(404, "Not Found");
  if (rl.method != "GET" && rl.method != "HEAD") {
    return Response(405, "Method Not Allowed", "Method Not Allowed\n", true,
                    "Allow: GET, HEAD\r\nContent-Type: text/plain; charset=utf-8\r\n");
  }
  return Response(200, "OK", body(), rl.method == "GET", "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n");
}

}  // namespace

struct MetricsHttpServer::Connection {
  int fd = -1;
  enum class State { kReading, kWriting, kDraining } state = State::kReading;
  std::string in;
  std::string out;
  size_t sent = 0;
  size_t drained = 0;
  Clock::time_point deadline;

  void Close() {
    close(fd);
    fd = -1;
  }
};

std::string HttpReplyWhenDecided(absl::string_view in, size_t max_bytes, const std::function<std::string()>& body) {
  const size_t line_end = in.find('\n');
  if (line_end != absl::string_view::npos) {
    RequestLine rl;
    if (!ParseRequestLine(in.substr(0, line_end), &rl)) return PlainResponse(400, "Bad Request");
  } else if (std::any_of(in.begin(), in.end(), [](char c) {
               const auto u = static_cast<unsigned char>(c);
               return (u < 0x20 && c != '\r') || u >= 0x7f;
             })) {
    return PlainResponse(400, "Bad Request");  // binary before the first line ends
  }
  const size_t end = HeadEnd(in);
  if (end == absl::string_view::npos || end > max_bytes) {
    return in.size() >= max_bytes ? PlainResponse(431, "Request Header Fields Too Large") : "";
  }
  return HttpReplyFor(in.substr(0, end), body);
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Create(const std::string& listen,
                                                                             std::function<std::string()> render,
                                                                             MetricsHttpOptions options) {
  auto fd = ListenTcp(listen, "--metrics-listen");
  if (!fd.ok()) return fd.status();
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer());
  s->options_ = options;
  s->render_ = std::move(render);
  s->listen_fd_ = *fd;
  s->port_ = BoundPort(*fd);
  s->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->wake_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat("--metrics-listen ", listen, ": eventfd: ", std::strerror(errno)));
  }
  s->thread_ = std::thread([p = s.get()] { p->Serve(); });
  return s;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (write(wake_fd_, &one, sizeof(one)) < 0) {
    }
    thread_.join();
  }
  if (wake_fd_ >= 0) close(wake_fd_);
  if (listen_fd_ >= 0) close(listen_fd_);
}

// Reads what the socket has; once the request can be answered (or refused),
// the reply is ready to write. Closes the connection when the request can no
// longer complete.
void MetricsHttpServer::ReadRequest(Connection& c) const {
  char buf[4096];
  bool eof = false;  // a client may half-close after its request
  for (;;) {
    const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      if (c.in.size() >= options_.max_request_bytes) break;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else if (n == 0) {
      eof = true;
      break;
    } else {
      return c.Close();
    }
  }
  c.out = HttpReplyWhenDecided(c.in, options_.max_request_bytes, render_);
  if (c.out.empty()) {
    if (eof) c.Close();
    return;
  }
  c.in.clear();
  c.state = Connection::State::kWriting;
}

// Writes what the socket takes of the reply; all written, closes gracefully:
// stop sending, then read what the client still sends (briefly), so unread
// input does not turn the close into a reset that loses the reply.
void MetricsHttpServer::WriteReply(Connection& c) const {
  while (c.sent < c.out.size()) {
    const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return c.Close();
    }
  }
  shutdown(c.fd, SHUT_WR);
  c.state = Connection::State::kDraining;
  c.deadline = std::min(c.deadline, Clock::now() + std::chrono::seconds(1));
}

// Reads and drops what the client still sends; closes at its end (or when
// it sends too much).
void MetricsHttpServer::Drain(Connection& c) const {
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      c.drained += static_cast<size_t>(n);
      if (c.drained > 16 * options_.max_request_bytes) return c.Close();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    return c.Close();
  }
}

// Moves a connection as far as its socket allows; closes it when done.
void MetricsHttpServer::Advance(Connection& c) const {
  if (c.state == Connection::State::kReading) ReadRequest(c);
  if (c.fd >= 0 && c.state == Connection::State::kWriting) WriteReply(c);
  if (c.fd >= 0 && c.state == Connection::State::kDraining) Drain(c);
}

// Takes every pending connection (beyond max_connections the oldest is
// closed). After an accept error other than EAGAIN (EMFILE: out of
// descriptors) the listening socket stays readable: accepting pauses
// instead of spinning.
void MetricsHttpServer::AcceptAll(std::vector<Connection>& conns, Clock::time_point now,
                                  Clock::time_point* accept_paused_until) const {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
        *accept_paused_until = now + std::chrono::milliseconds(100);
      }
      return;
    }
    if (conns.size() >= static_cast<size_t>(std::max(1, options_.max_connections))) {
      close(conns.front().fd);
      conns.erase(conns.begin());
    }
    Connection c;
    c.fd = fd;
    c.deadline = now + options_.request_timeout;
    conns.push_back(std::move(c));
    Advance(conns.back());
    if (conns.back().fd < 0) conns.pop_back();
  }
}

void MetricsHttpServer::Serve() {
  std::vector<Connection> conns;  // in accept order: the front is the oldest
  std::vector<pollfd> fds;
  Clock::time_point accept_paused_until;
  for (;;) {
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    const bool accepting = Clock::now() >= accept_paused_until;
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    Clock::time_point next_deadline = accepting ? Clock::time_point::max() : accept_paused_until;
    for (const Connection& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.state == Connection::State::kWriting ? POLLOUT : POLLIN), 0});
      next_deadline = std::min(next_deadline, c.deadline);
    }
    int timeout_ms = -1;
    if (next_deadline != Clock::time_point::max()) {
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_deadline - Clock::now());
      timeout_ms = static_cast<int>(std::clamp<int64_t>(wait.count(), 0, 60'000));
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;  // woken to stop
    for (size_t i = 0; i < conns.size(); ++i) {
      if (fds[i + 2].revents != 0) Advance(conns[i]);
    }
    const Clock::time_point now = Clock::now();
    for (Connection& c : conns) {
      if (c.fd >= 0 && now >= c.deadline) c.Close();
    }
    std::erase_if(conns, [](const Connection& c) { return c.fd < 0; });
    if (fds[1].revents != 0) AcceptAll(conns, now, &accept_paused_until);
  }
}

}  // namespace cairn::service
