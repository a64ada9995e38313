// Fuzzes the metrics endpoint (service/host/metrics_http.h): any bytes, arriving
// in any pieces, get either no reply yet or one well-formed reply, and a
// real MetricsHttpServer on 127.0.0.1 answers (or closes) every connection
// they are sent on, staying up for the next input.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "service/host/metrics_http.h"

namespace {

std::string Body() { return "cairn_fuzz_total 1\n"; }

bool WellFormed(const std::string& reply) {
  static const char* kStatus[] = {"HTTP/1.1 200 ", "HTTP/1.1 400 ", "HTTP/1.1 404 ", "HTTP/1.1 405 ", "HTTP/1.1 431 "};
  bool known = false;
  for (const char* s : kStatus) known = known || reply.rfind(s, 0) == 0;
  return known && reply.find("\r\nConnection: close\r\n") != std::string::npos &&
         reply.find("\r\n\r\n") != std::string::npos;
}

// Sends `data` on a fresh connection, half-closes, reads until the server
// closes; returns what it sent back.
std::string Exchange(int port, const uint8_t* data, size_t size) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) std::abort();
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) std::abort();  // the server is gone
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server replied and closed early
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) reply.append(buf, static_cast<size_t>(n));
  close(fd);
  return reply;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* text = reinterpret_cast<const char*>(data);
  // Pure: the reply to every prefix, as if the bytes trickled in.
  for (size_t n = 0; n <= size; ++n) {
    const std::string reply = cairn::service::HttpReplyWhenDecided(absl::string_view(text, n), 256, Body);
    if (!reply.empty() && !WellFormed(reply)) std::abort();
  }
  // Over a real socket.
  static std::unique_ptr<cairn::service::MetricsHttpServer> server = [] {
    cairn::service::MetricsHttpOptions options;
    options.max_request_bytes = 256;
    auto s = cairn::service::MetricsHttpServer::Create("127.0.0.1:0", Body, options);
    if (!s.ok()) std::abort();
    return std::move(*s);
  }();
  const std::string reply = Exchange(server->port(), data, size);
  if (!reply.empty() && !WellFormed(reply)) std::abort();
  return 0;
}
