// The cairn.v1.Inference service: Generate, SessionControl, ListModels and
// RenderPrompt,
// and the session access both share (the live sessions and the session
// directory).
//
// Threading: Generate uses gRPC's callback API: a call (generate_call.h,
// which describes a request's path; its gRPC reactor is generate_reactor.h)
// is woken by the scheduler's events, by completed writes and by
// cancellation; its blocking steps run on the service's WorkerPool, so no
// thread waits for a stream. StartGenerate runs the same call for another
// transport.
// --max-concurrent bounds the Generate calls at once (RESOURCE_EXHAUSTED
// beyond). SessionControl, ListModels and RenderPrompt are short,
// synchronous calls on gRPC's thread pool.
#ifndef CAIRN_SERVICE_API_INFERENCE_SERVICE_H_
#define CAIRN_SERVICE_API_INFERENCE_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cairn/v1/inference.grpc.pb.h"
#include "service/api/access_log.h"
#include "service/api/auth.h"
#include "service/api/generate_sink.h"
#include "service/api/large_work_gate.h"
#include "service/api/limits.h"
#include "service/api/worker_pool.h"
#include "service/host/memory_budget.h"
#include "service/host/metrics.h"
#include "service/host/models.h"
#include "service/sessions/session_dir.h"
#include "service/sessions/sessions.h"

namespace cairn::service {

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

class InferenceService final : public v1::Inference::WithCallbackMethod_Generate<v1::Inference::Service> {
 public:
  // Borrowed: all must outlive the service. `budget` (may be null: no
  // bound) is the live-memory budget the sessions also reserve from.
  InferenceService(ModelRegistry* models, SessionManager* sessions, Metrics* metrics, const Authenticator* auth,
                   const ServiceLimits& limits, MemoryBudget* budget = nullptr, ReplicaOptions replica = {})
      : models_(models),
        sessions_(sessions),
        metrics_(metrics),
        auth_(auth),
        limits_(limits),
        budget_(budget),
        replica_(std::move(replica)) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext* ctx,
                                                           const v1::GenerateRequest* req) override;
  // The same Generate for another transport (the HTTP door): `sink`
  // carries it (generate_sink.h); `req` stays valid until sink->Finish. The
  // sink may be written to before this returns; the transport reports
  // WriteDone and Cancel to the result, which it holds until it is done.
  std::shared_ptr<GenerateStream> StartGenerate(std::shared_ptr<GenerateSink> sink, const v1::GenerateRequest& req);
  // The bound on large prompt builds, which the HTTP door's JSON parses
  // share (both take tens of times their input in transient memory).
  LargeWorkGate& large_work() { return large_work_; }
  grpc::Status SessionControl(grpc::ServerContext* ctx, const v1::SessionRequest* req,
                              v1::SessionResponse* resp) override;
  grpc::Status ListModels(grpc::ServerContext* ctx, const v1::ListModelsRequest* req,
                          v1::ListModelsResponse* resp) override;
  grpc::Status RenderPrompt(grpc::ServerContext* ctx, const v1::RenderPromptRequest* req,
                            v1::RenderPromptResponse* resp) override;

  // Shutdown's first step: from now on Generate and SessionControl answer
  // UNAVAILABLE (retryable elsewhere) while the calls already running go on;
  // the server waits (WaitForCalls) for them to end, or its grace to end,
  // before it stops gRPC (whose own shutdown may cancel a call that arrives
  // at that moment: CANCELLED is not retried by clients).
  void StopAccepting() { stopping_.store(true); }
  bool accepting() const { return !stopping_.load(); }
  // Waits until no Generate or SessionControl call is running, or until
  // `deadline`; true when none is.
  bool WaitForCalls(absl::Time deadline) const ABSL_LOCKS_EXCLUDED(calls_mu_);

 private:
  // One Generate call (generate_call.h).
  class GenerateCall;
  static absl::Status ShuttingDown();
  // Counts the calls WaitForCalls waits for.
  void CallStarted() ABSL_LOCKS_EXCLUDED(calls_mu_);
  void CallEnded() ABSL_LOCKS_EXCLUDED(calls_mu_);
  absl::Status DoSession(const Caller& caller, const v1::SessionRequest& req, v1::SessionResponse* resp);
  // One SessionControl operation each (DoSession dispatches).
  absl::Status CreateSession(const Caller& caller, const v1::CreateSession& req, v1::SessionResponse* resp);
  absl::Status ForkSession(const Caller& caller, const v1::ForkSession& req, v1::SessionResponse* resp);
  absl::Status RewindSession(const Caller& caller, const v1::RewindSession& req, v1::SessionResponse* resp);
  absl::Status DeleteSession(const Caller& caller, const v1::DeleteSession& req, v1::SessionResponse* resp);
  absl::Status GetSession(const Caller& caller, const v1::GetSession& req, v1::SessionResponse* resp);
  void ListSessions(const Caller& caller, v1::SessionResponse* resp);
  absl::Status ExportSession(const Caller& caller, const v1::ExportSession& req, v1::SessionResponse* resp);
  absl::Status Import(const Caller& caller, const v1::ImportSession& req, v1::SessionResponse* resp);
  void Describe(const Session& s, bool include_tokens, v1::SessionInfo* out) const;
  // A SessionControl operation created or changed `s`: persisted, then
  // described in the response.
  void Changed(Session& s, v1::SessionResponse* resp);
  // The session for exclusive use, as SessionManager::Acquire (waiting
  // until caller.wait_until for one finishing a stopped request), but also
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
  void AddReplicaMetadata(grpc::ServerContextBase* ctx) const;

  ModelRegistry* const models_;
  SessionManager* const sessions_;
  Metrics* const metrics_;
  const Authenticator* const auth_;
  const ServiceLimits limits_;
  MemoryBudget* const budget_;
  const ReplicaOptions replica_;
  // Prompt builds and the HTTP door's JSON parses of more than 256 KiB, two
  // at a time (large_work_gate.h).
  LargeWorkGate large_work_{size_t{256} << 10, 2};
  std::atomic<int32_t> active_generate_{0};
  std::atomic<bool> stopping_{false};
  mutable absl::Mutex calls_mu_;
  int32_t calls_ ABSL_GUARDED_BY(calls_mu_) = 0;  // Generate and SessionControl calls running
  // Declared last, so destroyed first: its tasks use the members above.
  // (None is left by then: the server destroys the service after every
  // call ended.)
  WorkerPool workers_;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_INFERENCE_SERVICE_H_
