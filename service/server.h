// A running cairn server: models, sessions, the Inference service, health
// checking, reflection and metrics, listening on one address. Used by
// cairn-server's main and, in process, by the end-to-end tests.
#ifndef CAIRN_SERVICE_SERVER_H_
#define CAIRN_SERVICE_SERVER_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/env.h"
#include "grpcpp/server.h"
#include "service/api/inference_service.h"
#include "service/host/compute_threads.h"
#include "service/host/memory_budget.h"
#include "service/host/metrics.h"
#include "service/host/models.h"
#include "service/http/http_server.h"
#include "service/scheduling/scheduler.h"
#include "service/sessions/sessions.h"

namespace cairn::service {

struct ServerOptions {
  // "host:port"; port 0 picks a free one (see Server::port()).
  std::string listen = "127.0.0.1:50051";
  std::vector<ModelSpec> models;  // empty: the built-in synthetic models
  // models_options.threads 0: from the CPU affinity and the cgroup's CPU
  // quota under cgroup_root (compute_threads.h).
  ModelsOptions models_options;
  std::string cgroup_root = kDefaultCgroupRoot;
  SchedulerOptions scheduler;
  SessionOptions sessions;
  ServiceLimits limits;
  std::string metrics_listen;  // empty: no HTTP endpoint (metrics_http.h)
  // The OpenAI-compatible HTTP API (service/http/); listen "": off. It
  // serves HTTPS with the TLS options below (its `tls` is set from them).
  http::HttpOptions http;
  // TLS: PEM files of the server's certificate chain and key (both or
  // neither); with a client CA, clients must present a certificate it signed
  // (mutual TLS). The files are re-read when they change (checked every
  // credentials_refresh): new connections get the new certificate, open
  // ones keep theirs.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // Bearer tokens accepted (empty: no authentication); see auth.h. A token
  // file replaces them, re-read on change (checked at most every
  // credentials_refresh).
  std::vector<std::string> auth_tokens;
  std::string auth_token_file;
  std::chrono::seconds credentials_refresh{5};
  bool share_prefix_cache = false;
  int32_t max_message_bytes = 64 << 20;
  // Bytes of live sequence memory, all sessions and in-flight requests of
  // all models together (see memory_budget.h); 0: unlimited. (cairn-server's
  // --memory-budget defaults to 50% of the RAM.)
  size_t memory_budget_bytes = 0;
  // Scale-out (see ReplicaOptions): the name sent as x-cairn-replica, and a
  // directory that replicas share for their sessions ("": none).
  std::string replica_name;
  std::string session_dir;
  // The session directory's file system (null: checkpoint::Env::Default());
  // tests pass one that fails chosen operations. Must outlive the server.
  checkpoint::Env* session_dir_env = nullptr;
  // The snapshot key's bytes (ReadSnapshotKey; "": none), see ReplicaOptions.
  std::string snapshot_key;
  // Shutdown: in-flight calls get this long to finish before they are
  // cancelled; writing checkpoints to the disk tier then gets at most
  // shutdown_persist (the most valuable first).
  std::chrono::milliseconds shutdown_grace{5000};
  std::chrono::milliseconds shutdown_persist{5000};
};

class Server final {
 public:
  // Loads the models and starts listening. UNAVAILABLE when the address
  // cannot be bound; load errors as ModelRegistry::Load.
  static absl::StatusOr<std::unique_ptr<Server>> Create(const ServerOptions& options);
  // Shuts down (cancelling running calls) and frees everything.
  ~Server();

  int port() const { return port_; }
  // The HTTP API's bound port (0 when off).
  int http_port() const { return http_ != nullptr ? http_->port() : 0; }
  Metrics& metrics() { return *metrics_; }
  ModelRegistry& models() { return *models_; }
  SessionManager& sessions() { return *sessions_; }
  MemoryBudget& memory_budget() { return *memory_budget_; }
  // The compute threads per model, and where the count came from.
  const ComputeThreads& compute_threads() const { return compute_threads_; }

  // Blocks until Shutdown.
  void Wait();
  // Stops accepting calls (health NOT_SERVING), lets running ones finish
  // within ServerOptions::shutdown_grace, then cancels them. Blocks until
  // then. Idempotent, thread-safe.
  void Shutdown();

 private:
  Server() = default;
  void Housekeeping();

  ServerOptions options_;
  ComputeThreads compute_threads_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<ModelRegistry> models_;
  std::unique_ptr<MemoryBudget> memory_budget_;  // outlives the sessions and the service
  std::unique_ptr<SessionManager> sessions_;
  std::unique_ptr<SessionDirectory> session_dir_;  // may be null
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<InferenceService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<http::HttpServer> http_;  // may be null; stopped before the service goes
  int port_ = 0;

  absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::thread housekeeper_;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SERVER_H_
