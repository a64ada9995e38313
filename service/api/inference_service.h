// The cairn.v1.Inference service: request validation, prompt assembly
// (text, ids, embedding chunks, messages), session bookkeeping, and the
// bridge between a streaming RPC and the model's scheduler.
//
// Threading: gRPC's synchronous API with its thread pool. A Generate
// handler thread only relays events from the scheduler (which does all the
// computation on its own threads) and watches for cancellation and the
// deadline; it blocks, so the pool's size bounds concurrent streams
// (--max-concurrent, beyond which calls get RESOURCE_EXHAUSTED). The
// callback API would save those threads, but they are cheap next to the
// memory of a live sequence, and the sync code is easier to get right.
#ifndef CAIRN_SERVICE_API_INFERENCE_SERVICE_H_
#define CAIRN_SERVICE_API_INFERENCE_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/v1/inference.grpc.pb.h"
#include "service/api/access_log.h"
#include "service/api/auth.h"
#include "service/host/memory_budget.h"
#include "service/host/metrics.h"
#include "service/host/models.h"
#include "service/scheduling/history.h"
#include "service/sessions/session_dir.h"
#include "service/sessions/sessions.h"

namespace cairn::service {

struct ServiceLimits {
  int32_t max_concurrent_generate = 256;
  int32_t max_prompt_parts = 4096;
  int32_t max_stop_strings = 16;
  int32_t max_stop_string_bytes = 256;
  int32_t max_stop_tokens = 64;
  int32_t max_text_bytes = 4 << 20;
};

// Scale-out: what a replica behind an affinity proxy needs (see "Routing
// across replicas" in the proto).
struct ReplicaOptions {
  // Sent as `x-cairn-replica` initial metadata on every call ("" : none).
  std::string name;
  // Borrowed, may be null: sessions are then not persisted. With one, every
  // session is written there after each request that changes it, and a
  // session this replica does not hold (or holds stale) is read from it.
  SessionDirectory* session_dir = nullptr;
  // The secret replicas share to sign the snapshots they export or persist
  // and to trust each other's (see snapshot_seal.h); empty: none, so no
  // imported or persisted state is trusted beyond its own session.
  std::string snapshot_key;
};

class InferenceService final : public v1::Inference::Service {
 public:
  // Borrowed: all must outlive the service. `budget` (may be null: no
  // bound) is the live-memory budget the sessions also reserve from.
  InferenceService(ModelRegistry* models, SessionManager* sessions, Metrics* metrics,
                   const Authenticator* auth, const ServiceLimits& limits,
                   MemoryBudget* budget = nullptr, ReplicaOptions replica = {})
      : models_(models), sessions_(sessions), metrics_(metrics), auth_(auth), limits_(limits),
        budget_(budget), replica_(std::move(replica)) {}

  grpc::Status Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* req,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status SessionControl(grpc::ServerContext* ctx, const v1::SessionRequest* req,
                              v1::SessionResponse* resp) override;
  grpc::Status ListModels(grpc::ServerContext* ctx, const v1::ListModelsRequest* req,
                          v1::ListModelsResponse* resp) override;

  // Shutdown's first step: from now on Generate and SessionControl answer
  // UNAVAILABLE (retryable elsewhere) while the calls already running go on;
  // the server waits for calls_in_flight() to reach 0, or its grace to end,
  // before it stops gRPC (whose own shutdown may cancel a call that arrives
  // at that moment: CANCELLED is not retried by clients).
  void StopAccepting() { stopping_.store(true); }
  int32_t calls_in_flight() const { return in_flight_.load(); }

 private:
  // One Generate call's state and its steps (defined in inference_service.cc).
  class GenerateTurn;
  // Fills `trace` (for the access log and metrics) as far as the call gets.
  absl::Status DoGenerate(grpc::ServerContext* ctx, const Caller& caller, const v1::GenerateRequest& req,
                          grpc::ServerWriter<v1::GenerateResponse>* writer, GenerateTrace* trace);
  absl::Status DoSession(const Caller& caller, const v1::SessionRequest& req,
                         v1::SessionResponse* resp);
  // One SessionControl operation each (DoSession dispatches).
  absl::Status CreateSession(const Caller& caller, const v1::CreateSession& req, v1::SessionResponse* resp);
  absl::Status ForkSession(const Caller& caller, const v1::ForkSession& req, v1::SessionResponse* resp);
  absl::Status RewindSession(const Caller& caller, const v1::RewindSession& req, v1::SessionResponse* resp);
  absl::Status DeleteSession(const Caller& caller, const v1::DeleteSession& req, v1::SessionResponse* resp);
  absl::Status GetSession(const Caller& caller, const v1::GetSession& req, v1::SessionResponse* resp);
  void ListSessions(const Caller& caller, v1::SessionResponse* resp);
  absl::Status ExportSession(const Caller& caller, const v1::ExportSession& req, v1::SessionResponse* resp);
  // The request's new prompt parts (or rendered messages) as history items.
  absl::StatusOr<History> BuildPrompt(const ServedModel& model, const v1::GenerateRequest& req,
                                      bool at_start) const;
  absl::Status Import(const Caller& caller, const v1::ImportSession& req,
                      v1::SessionResponse* resp);
  void Describe(const Session& s, bool include_tokens, v1::SessionInfo* out) const;
  // The session for exclusive use, as SessionManager::Acquire, but also
  // from the session directory (when this replica does not hold it, or
  // another replica changed it since). `create_on` non-null: a session that
  // exists nowhere is created on that model under `id`.
  absl::StatusOr<SessionLease> AcquireSession(const std::string& id, const Caller& caller,
                                              ServedModel* create_on = nullptr);
  // Writes the session to the session directory (when there is one). A
  // failure costs only the failover and is logged, not returned.
  void Persist(Session& s);
  // ALREADY_EXISTS when a client-chosen id is taken in the session
  // directory (the live sessions are checked by SessionManager).
  absl::Status CheckIdIsFree(const std::string& id) const;
  void AddReplicaMetadata(grpc::ServerContext* ctx) const;

  ModelRegistry* const models_;
  SessionManager* const sessions_;
  Metrics* const metrics_;
  const Authenticator* const auth_;
  const ServiceLimits limits_;
  MemoryBudget* const budget_;
  const ReplicaOptions replica_;
  std::atomic<int32_t> active_generate_{0};
  std::atomic<int32_t> in_flight_{0};  // Generate and SessionControl calls inside their handlers
  std::atomic<bool> stopping_{false};
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_INFERENCE_SERVICE_H_
