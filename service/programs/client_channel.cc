#include "service/programs/client_channel.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace cairn::service {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream pem;
  pem << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read '", path, "'"));
  return pem.str();
}

}  // namespace

void AddClientFlags(FlagParser& flags, std::string* server, std::string* token, ClientTls* tls) {
  flags.Add("server", server);
  flags.Add("token", token);
  flags.Add("tls-ca", &tls->ca);
  flags.Add("tls-cert", &tls->cert);
  flags.Add("tls-key", &tls->key);
  flags.Add("tls-server-name", &tls->server_name);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ClientChannel(const std::string& target, const ClientTls& tls,
                                                             grpc::ChannelArguments args) {
  if (!tls.enabled()) {
    if (!tls.server_name.empty()) {
      return absl::InvalidArgumentError("--tls-server-name needs TLS (--tls-ca, or --tls-cert and --tls-key)");
    }
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  }
  if (tls.cert.empty() != tls.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together (a client certificate and its key)");
  }
  grpc::SslCredentialsOptions ssl;
  if (!tls.ca.empty()) {
    auto ca = ReadPem("--tls-ca", tls.ca);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
  }
  if (!tls.cert.empty()) {
    auto cert = ReadPem("--tls-cert", tls.cert);
    if (!cert.ok()) return cert.status();
    auto key = ReadPem("--tls-key", tls.key);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
}

std::string StatusText(const grpc::Status& status) {
  // grpc::StatusCode and absl::StatusCode share their numbering.
  return absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())), ": ",
                      status.error_message());
}

}  // namespace cairn::service
