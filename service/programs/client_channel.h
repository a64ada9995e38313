// What the command-line clients (cairn-cli, cairn-load) share: their
// connection flags, the channel to a server from them, and how a failed
// call is printed.
#ifndef CAIRN_SERVICE_PROGRAMS_CLIENT_CHANNEL_H_
#define CAIRN_SERVICE_PROGRAMS_CLIENT_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/status.h"
#include "service/programs/flags.h"

namespace cairn::service {

// The clients' TLS flags (PEM file paths). All empty: plaintext.
struct ClientTls {
  std::string ca;           // --tls-ca: trust this CA (empty: the system's roots)
  std::string cert;         // --tls-cert: client certificate chain, for mutual TLS
  std::string key;          // --tls-key: its private key
  std::string server_name;  // --tls-server-name: expected name in the server's certificate
  bool enabled() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};

// --server=HOST:PORT, --token=TOKEN (a bearer token) and the TLS flags
// (--tls-ca, --tls-cert, --tls-key, --tls-server-name) into their places.
void AddClientFlags(FlagParser& flags, std::string* server, std::string* token, ClientTls* tls);

// A channel to `target` ("HOST:PORT"). INVALID_ARGUMENT when only one of
// cert and key is given, or --tls-server-name without TLS; NOT_FOUND when a
// file cannot be read. Connecting is lazy: an unreachable server shows as
// UNAVAILABLE on the first call. `args` are further channel arguments (e.g.
// cairn-load's small flow-control window for its stalling clients).
absl::StatusOr<std::shared_ptr<grpc::Channel>> ClientChannel(const std::string& target, const ClientTls& tls,
                                                             grpc::ChannelArguments args = {});

// "FAILED_PRECONDITION: cannot rewind": the code by name, then the message.
std::string StatusText(const grpc::Status& status);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_PROGRAMS_CLIENT_CHANNEL_H_
