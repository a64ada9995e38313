#include "service/host/listen_socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace cairn::service {

absl::StatusOr<int> ListenTcp(const std::string& address, absl::string_view flag) {
  // Split HOST:PORT; the host may be [v6], empty or absent (every interface).
  std::string host, port_text = address;
  if (const size_t colon = address.rfind(':'); colon != std::string::npos) {
    host = address.substr(0, colon);
    port_text = address.substr(colon + 1);
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535 ||
      host.find_first_of("[]:/") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " '", address, "': expected HOST:PORT, [IPV6]:PORT or PORT"));
  }
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addrs = nullptr;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &addrs); rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", address, ": ", gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError(absl::StrCat(flag, " ", address, ": no address to bind"));
  int fd = -1;
  for (addrinfo* a = addrs; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = absl::UnavailableError(absl::StrCat(flag, " ", address, ": socket: ", std::strerror(errno)));
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      last = absl::UnavailableError(
          absl::StrCat(flag, " ", address, ": cannot listen on port ", port, ": ", std::strerror(errno)));
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(addrs);
  if (fd < 0) return last;
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound = {};
  socklen_t len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) return 0;
  if (bound.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  if (bound.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return 0;
}

}  // namespace cairn::service
