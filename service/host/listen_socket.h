// A TCP listening socket for a "HOST:PORT" flag value, with errors that name
// the flag, the address and the reason (for example "Address already in use").
// Used by the metrics endpoint and to check --listen before models load.
#ifndef CAIRN_SERVICE_HOST_LISTEN_SOCKET_H_
#define CAIRN_SERVICE_HOST_LISTEN_SOCKET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cairn::service {

// Binds and listens on `address`: "HOST:PORT", "[IPV6]:PORT", or ":PORT" /
// "PORT" for every interface; port 0 picks a free one. Returns the socket
// (non-blocking, close-on-exec; the caller closes it). SO_REUSEADDR only
// (a restart may bind over TIME_WAIT; two servers never share a port).
// INVALID_ARGUMENT when `address` is not of that form (`flag` names it in the
// message), UNAVAILABLE when it cannot be bound.
absl::StatusOr<int> ListenTcp(const std::string& address, absl::string_view flag);

// The local port a socket is bound to (0 on error).
int BoundPort(int fd);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_HOST_LISTEN_SOCKET_H_
