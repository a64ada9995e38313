#include "service/server.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/plugin.h"
#include "backends/register_builtin.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/server_builder.h"
#include "service/host/listen_socket.h"

namespace cairn::service {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// Plaintext, or TLS with the certificate chain and key (both or neither),
// requiring client certificates signed by the client CA when there is one.
// gRPC's file watcher re-reads the files every `refresh`, so a rotated
// certificate serves the next handshake without a restart; the files are
// read here first so that a missing one is a start-up error, not a log line
// at each handshake.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const ServerOptions& options) {
  if (options.tls_cert.empty() && options.tls_key.empty() && options.tls_client_ca.empty()) {
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert.empty() || options.tls_key.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a key");
  }
  for (const std::string* path : {&options.tls_cert, &options.tls_key, &options.tls_client_ca}) {
    if (path->empty()) continue;
    if (absl::StatusOr<std::string> pem = ReadFile(*path); !pem.ok()) return pem.status();
  }
  if (options.credentials_refresh < std::chrono::seconds(1)) {
    return absl::InvalidArgumentError("the credentials' refresh interval must be at least 1 s");
  }
  const auto refresh = static_cast<unsigned>(options.credentials_refresh.count());
  using grpc::experimental::FileWatcherCertificateProvider;
  auto provider = options.tls_client_ca.empty()
                      ? std::make_shared<FileWatcherCertificateProvider>(options.tls_key, options.tls_cert, refresh)
                      : std::make_shared<FileWatcherCertificateProvider>(options.tls_key, options.tls_cert,
                                                                         options.tls_client_ca, refresh);
  grpc::experimental::TlsServerCredentialsOptions tls(provider);
  tls.watch_identity_key_cert_pairs();
  if (!options.tls_client_ca.empty()) {
    tls.watch_root_certs();
    tls.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(tls);
}

// The backend families this server runs: the ones linked into the binary
// (cairn_backends_all, or cairn_backends_none) and those of the plugins.
absl::StatusOr<BackendRegistry> BackendFamilies(const std::vector<std::string>& plugins) {
  BackendRegistry families;
  if (absl::Status st = RegisterBuiltinBackends(families); !st.ok()) return st;
  for (const std::string& path : plugins) {
    if (absl::Status st = LoadBackendPlugin(path, families); !st.ok()) return st;
  }
  return families;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const ServerOptions& options) {
  std::unique_ptr<Server> s(new Server());
  s->options_ = options;
  if (options.models_options.threads > 0) {
    s->compute_threads_ = {options.models_options.threads, "--threads"};
  } else {
    s->compute_threads_ = DefaultComputeThreads(options.cgroup_root);
    s->options_.models_options.threads = s->compute_threads_.threads;
  }
  // A taken port is a start-up error, found before the models load and with
  // the reason; gRPC binds the port itself later. (An address that is not
  // HOST:PORT, such as unix:PATH, is left to gRPC.)
  if (absl::StatusOr<int> probe = ListenTcp(options.listen, "--listen"); probe.ok()) {
    close(*probe);
  } else if (!absl::IsInvalidArgument(probe.status())) {
    return probe.status();
  }
  auto metrics = Metrics::Create(options.metrics_listen);
  if (!metrics.ok()) return metrics.status();
  s->metrics_ = std::move(*metrics);
  s->metrics_->compute_threads->Set(s->compute_threads_.threads);
  SchedulerOptions sched = options.scheduler;
  sched.metrics = &s->metrics_->scheduler;
  // The step budget is the prompt chunk size (--prefill-chunk): a step then
  // holds one full prompt chunk next to the decode rows.
  if (options.models_options.checkpoint.prefill_chunk > 0) {
    sched.step_tokens = options.models_options.checkpoint.prefill_chunk;
  }
  auto families = BackendFamilies(options.models_options.backend_plugins);
  if (!families.ok()) return families.status();
  auto models = ModelRegistry::Load(options.models, s->options_.models_options, sched, *families);
  if (!models.ok()) return models.status();
  s->models_ = std::move(*models);
  s->memory_budget_ = std::make_unique<MemoryBudget>(options.memory_budget_bytes);
  s->metrics_->memory_budget_bytes->Set(static_cast<double>(options.memory_budget_bytes));
  s->sessions_ = std::make_unique<SessionManager>(options.sessions, s->memory_budget_.get());
  auto auth = options.auth_token_file.empty()
                  ? Authenticator::Create(options.auth_tokens, options.share_prefix_cache)
                  : Authenticator::CreateFromFile(options.auth_token_file, options.share_prefix_cache,
                                                  absl::FromChrono(options.credentials_refresh));
  if (!auth.ok()) return auth.status();
  s->auth_ = std::move(*auth);
  ReplicaOptions replica;
  replica.name = options.replica_name;
  replica.snapshot_key = options.snapshot_key;
  if (!options.session_dir.empty()) {
    auto dir = SessionDirectory::Create(options.session_dir, options.sessions.idle_timeout, options.session_dir_env);
    if (!dir.ok()) return dir.status();
    s->session_dir_ = std::move(*dir);
    replica.session_dir = s->session_dir_.get();
  }
  s->service_ =
      std::make_unique<InferenceService>(s->models_.get(), s->sessions_.get(), s->metrics_.get(), s->auth_.get(),
                                         options.limits, s->memory_budget_.get(), std::move(replica));
  auto creds = Credentials(options);
  if (!creds.ok()) return creds.status();

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second server on a taken port would
  // then start and split the calls with the first. Off, the bind fails.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options.listen, *creds, &s->port_);
  builder.RegisterService(s->service_.get());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  // gRPC inflates a compressed message whole before it checks its size: a
  // few MiB of gzip could ask for gigabytes. Requests are refused compressed
  // (UNIMPLEMENTED, before any inflating); replies are sent uncompressed.
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // SessionControl and ListModels run on gRPC's synchronous pool, a thread
  // each: bound it. (Generate calls hold no thread; they are bounded by
  // max_concurrent_generate.)
  grpc::ResourceQuota quota("cairn");
  quota.SetMaxThreads(options.limits.max_concurrent_generate + 64);
  builder.SetResourceQuota(quota);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("--listen ", options.listen, ": cannot listen (see gRPC's log above)"));
  }
  if (!options.http.listen.empty()) {
    // The HTTP door serves the gRPC port's TLS files, with its rotation.
    http::HttpOptions http_options = options.http;
    http_options.tls = {options.tls_cert, options.tls_key, options.tls_client_ca, options.credentials_refresh};
    auto http = http::HttpServer::Create(http_options, s->service_.get(), s->models_.get(), s->auth_.get());
    if (!http.ok()) return http.status();
    s->http_ = std::move(*http);
  }
  if (auto* health = s->server_->GetHealthCheckService()) {
    health->SetServingStatus(true);
    health->SetServingStatus("cairn.v1.Inference", true);
  }
  s->housekeeper_ = std::thread([p = s.get()] { p->Housekeeping(); });
  return s;
}

void Server::Housekeeping() {
  auto next_dir_sweep = std::chrono::steady_clock::now();
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      // Once a second, or at once when Shutdown sets the flag.
      mu_.AwaitWithTimeout(absl::Condition(&shutdown_), absl::Seconds(1));
      if (shutdown_) return;
    }
    sessions_->Sweep();
    // Expired session files (a directory listing: once a minute is enough).
    if (session_dir_ != nullptr && std::chrono::steady_clock::now() >= next_dir_sweep) {
      session_dir_->RemoveExpired();
      next_dir_sweep = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    }
    double captured = 0, restored = 0;
    size_t queued = 0;
    for (ServedModel* m : models_->All()) {
      const checkpoint::EngineStats st = m->engine->stats();
      captured += static_cast<double>(st.captures);
      restored += static_cast<double>(st.restores);
      queued += m->scheduler->queue_depth();
    }
    Metrics::AdvanceTo(metrics_->checkpoints_captured, captured);
    Metrics::AdvanceTo(metrics_->checkpoints_restored, restored);
    metrics_->scheduler.queue_depth->Set(static_cast<double>(queued));
    metrics_->sessions->Set(static_cast<double>(sessions_->size()));
    metrics_->sequence_memory_bytes->Set(static_cast<double>(memory_budget_->in_use()));
    if (checkpoint::CheckpointStore* store = models_->store()) {
      const checkpoint::StoreStats st = store->stats();
      Metrics::AdvanceTo(metrics_->checkpoints_evicted, static_cast<double>(st.evictions));
      metrics_->store_ram_bytes->Set(static_cast<double>(st.ram_bytes));
      metrics_->store_disk_bytes->Set(static_cast<double>(st.disk_bytes));
    }
  }
}

void Server::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&shutdown_));
}

void Server::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
  }
  // New calls are refused with UNAVAILABLE by the service itself while the
  // running ones get the grace to finish; then gRPC stops and cancels what
  // still runs (a Generate's OnCancel stops its job within a step).
  if (server_ == nullptr) return;
  if (auto* health = server_->GetHealthCheckService()) health->Shutdown();
  const auto deadline = std::chrono::system_clock::now() + options_.shutdown_grace;
  if (service_ != nullptr) {
    service_->StopAccepting();
    service_->WaitForCalls(absl::FromChrono(deadline));
  }
  // HTTP completions still running are cancelled as gRPC's are.
  if (http_ != nullptr) http_->Stop();
  server_->Shutdown(deadline);
}

Server::~Server() {
  Shutdown();
  if (housekeeper_.joinable()) housekeeper_.join();
  if (server_ != nullptr) server_->Wait();
  server_.reset();
  http_.reset();
  // A completion whose client left ends on its own, within a scheduler
  // step of its cancel: the service goes after it.
  if (service_ != nullptr) service_->WaitForCalls(absl::InfiniteFuture());
  service_.reset();
  // A clean shutdown keeps what a restart can reuse: the sessions' states
  // and every RAM checkpoint go to the disk tier, when there is one.
  checkpoint::CheckpointStore* store = models_ != nullptr ? models_->store() : nullptr;
  if (store != nullptr && !store->options().disk_dir.empty() && store->options().disk_budget_bytes > 0) {
    const size_t parked = sessions_->ParkAll();
    absl::StatusOr<size_t> written = store->Persist(std::chrono::steady_clock::now() + options_.shutdown_persist);
    if (written.ok()) {
      std::fprintf(stderr, "cairn: kept %zu session states; wrote %zu checkpoints to %s\n", parked, *written,
                   store->options().disk_dir.c_str());
    } else {
      std::fprintf(stderr, "cairn: writing checkpoints to %s at shutdown: %s\n", store->options().disk_dir.c_str(),
                   written.status().ToString().c_str());
    }
  }
  sessions_.reset();  // sequences before their engines
  models_.reset();
  metrics_.reset();
}

}  // namespace cairn::service
