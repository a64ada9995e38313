#include "service/api/inference_service.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/api/access_log.h"
#include "service/api/generate_call.h"
#include "service/api/generate_reactor.h"
#include "service/api/prompt_builder.h"
#include "service/api/status.h"
#include "service/sessions/session_snapshot.h"

namespace cairn::service {

absl::Status InferenceService::ShuttingDown() {
  return absl::UnavailableError("the server is shutting down: retry on another replica");
}

void InferenceService::CallStarted() {
  absl::MutexLock lock(&calls_mu_);
  ++calls_;
}

void InferenceService::CallEnded() {
  absl::MutexLock lock(&calls_mu_);
  --calls_;
}

bool InferenceService::WaitForCalls(absl::Time deadline) const {
  absl::MutexLock lock(&calls_mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(calls_mu_) { return calls_ == 0; };
  return calls_mu_.AwaitWithDeadline(absl::Condition(&none), deadline);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* InferenceService::Generate(grpc::CallbackServerContext* ctx,
                                                                           const v1::GenerateRequest* req) {
  std::shared_ptr<GenerateReactor> reactor = GenerateReactor::Create(ctx);
  AddReplicaMetadata(ctx);
  // The reactor knows its call before gRPC or the call may use it.
  std::shared_ptr<GenerateCall> call = GenerateCall::Create(*this, reactor, *req);
  reactor->Attach(call);
  call->Launch();
  return reactor.get();
}

std::shared_ptr<GenerateStream> InferenceService::StartGenerate(std::shared_ptr<GenerateSink> sink,
                                                                const v1::GenerateRequest& req) {
  std::shared_ptr<GenerateCall> call = GenerateCall::Create(*this, std::move(sink), req);
  call->Launch();
  return call;
}

// ---------------------------------------------------------------------------
// Sessions

void InferenceService::Describe(const Session& s, bool include_tokens, v1::SessionInfo* out) const {
  out->set_session_id(s.id);
  out->set_model(s.model->name);
  out->set_tokens(static_cast<int32_t>(s.history.size()));
  out->set_positions(s.history.PositionsOf(s.history.size()));
  out->set_idle_seconds(0);
  out->set_busy(false);
  if (include_tokens) {
    for (TokenId t : s.history.Tokens()) out->add_token_ids(t);
  }
}

namespace {

void DescribeSummary(const SessionManager::Summary& x, v1::SessionInfo* out) {
  out->set_session_id(x.id);
  out->set_model(x.model);
  out->set_tokens(static_cast<int32_t>(x.tokens));
  out->set_positions(x.positions);
  out->set_idle_seconds(x.idle_seconds);
  out->set_busy(x.busy);
  out->set_in_flight_tokens(static_cast<int32_t>(x.in_flight_tokens));
  for (TokenId t : x.token_ids) out->add_token_ids(t);
}

}  // namespace

void InferenceService::Changed(Session& s, v1::SessionResponse* resp) {
  Persist(s);
  Describe(s, false, resp->mutable_session());
}

grpc::Status InferenceService::SessionControl(grpc::ServerContext* ctx, const v1::SessionRequest* req,
                                              v1::SessionResponse* resp) {
  const Clock::time_point start = Clock::now();
  AddReplicaMetadata(ctx);
  CallStarted();
  absl::StatusOr<Caller> caller = auth_->Authenticate(*ctx);
  absl::Status st = caller.status();
  if (stopping_.load()) {
    st = ShuttingDown();
  } else if (caller.ok()) {
    st = DoSession(*caller, *req, resp);
  }
  RecordSessionControl(metrics_, *req, st, std::chrono::duration<double>(Clock::now() - start).count());
  CallEnded();
  return ToGrpcStatus(st);
}

absl::Status InferenceService::DoSession(const Caller& caller, const v1::SessionRequest& req,
                                         v1::SessionResponse* resp) {
  absl::Status st;
  switch (req.op_case()) {
    case v1::SessionRequest::kCreate:
      st = CreateSession(caller, req.create(), resp);
      break;
    case v1::SessionRequest::kFork:
      st = ForkSession(caller, req.fork(), resp);
      break;
    case v1::SessionRequest::kRewind:
      st = RewindSession(caller, req.rewind(), resp);
      break;
    case v1::SessionRequest::kDelete:
      st = DeleteSession(caller, req.delete_(), resp);
      break;
    case v1::SessionRequest::kGet:
      return GetSession(caller, req.get(), resp);
    case v1::SessionRequest::kList:
      ListSessions(caller, resp);
      break;
    case v1::SessionRequest::kExport:
      return ExportSession(caller, req.export_(), resp);
    case v1::SessionRequest::kImport:
      return Import(caller, req.import(), resp);
    default:
      return absl::InvalidArgumentError("SessionRequest without an operation");
  }
  if (!st.ok()) return st;
  if (metrics_ != nullptr) metrics_->sessions->Set(static_cast<double>(sessions_->size()));
  return absl::OkStatus();
}

absl::Status InferenceService::CreateSession(const Caller& caller, const v1::CreateSession& req,
                                             v1::SessionResponse* resp) {
  auto model = models_->Find(req.model());
  if (!model.ok()) return model.status();
  const std::string& id = req.session_id();
  if (absl::Status st = CheckIdIsFree(id); !st.ok()) return st;
  auto s = sessions_->Create(*model, caller.owner, caller.cache_tenant, 0, "", id);
  if (!s.ok()) return s.status();
  Changed(**s, resp);
  return absl::OkStatus();
}

absl::Status InferenceService::ForkSession(const Caller& caller, const v1::ForkSession& req,
                                           v1::SessionResponse* resp) {
  auto src = AcquireSession(req.session_id(), caller);
  if (!src.ok()) return src.status();
  auto s = sessions_->Fork(**src);
  if (!s.ok()) return s.status();
  Changed(**s, resp);
  return absl::OkStatus();
}

absl::Status InferenceService::RewindSession(const Caller& caller, const v1::RewindSession& req,
                                             v1::SessionResponse* resp) {
  auto s = AcquireSession(req.session_id(), caller);
  if (!s.ok()) return s.status();
  const int32_t n = req.tokens();
  if (n < 0) return absl::InvalidArgumentError("rewind.tokens must be >= 0");
  if (static_cast<size_t>(n) > (*s)->history.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot rewind to ", n, " tokens: the session has ", (*s)->history.size()));
  }
  // The live sequence is left as it is: the next Generate brings it to the
  // history, cutting or restoring exactly as needed.
  History cut = (*s)->history;
  cut.Resize(static_cast<size_t>(n));
  (*s)->Commit(std::move(cut));
  Changed(**s, resp);
  return absl::OkStatus();
}

absl::Status InferenceService::DeleteSession(const Caller& caller, const v1::DeleteSession& req,
                                             v1::SessionResponse* resp) {
  const std::string& id = req.session_id();
  // Held here or only in the session directory (another replica's).
  auto s = AcquireSession(id, caller);
  if (!s.ok()) return s.status();
  s->Reset();
  if (absl::Status st = sessions_->Delete(id, caller.owner); !st.ok()) return st;
  if (replica_.session_dir != nullptr) replica_.session_dir->Remove(id);
  resp->set_deleted(true);
  return absl::OkStatus();
}

absl::Status InferenceService::GetSession(const Caller& caller, const v1::GetSession& req, v1::SessionResponse* resp) {
  Caller now = caller;
  now.wait_until = absl::InfinitePast();  // a busy session is described, not waited for
  auto s = AcquireSession(req.session_id(), now);
  if (s.ok()) {
    Describe(**s, req.include_tokens(), resp->mutable_session());
    return absl::OkStatus();
  }
  if (!absl::IsAborted(s.status())) return s.status();
  // Busy: its committed history, which the request changes only when it
  // ends OK, and what it has streamed.
  auto x = sessions_->Find(req.session_id(), caller.owner, req.include_tokens());
  if (!x.ok()) return x.status();
  DescribeSummary(*x, resp->mutable_session());
  return absl::OkStatus();
}

void InferenceService::ListSessions(const Caller& caller, v1::SessionResponse* resp) {
  v1::SessionList* list = resp->mutable_sessions();
  for (const auto& x : sessions_->List(caller.owner)) DescribeSummary(x, list->add_sessions());
}

absl::Status InferenceService::ExportSession(const Caller& caller, const v1::ExportSession& req,
                                             v1::SessionResponse* resp) {
  auto s = AcquireSession(req.session_id(), caller);
  if (!s.ok()) return s.status();
  auto snap = CaptureSession(**s, CaptureMode::kWholeHistory, budget_, replica_.snapshot_key);
  if (!snap.ok()) return snap.status();
  if (!snap->SerializeToString(resp->mutable_snapshot())) {
    return absl::InternalError("snapshot serialization failed");
  }
  return absl::OkStatus();
}

absl::Status InferenceService::Import(const Caller& caller, const v1::ImportSession& req, v1::SessionResponse* resp) {
  v1::SessionSnapshot snap;
  if (!snap.ParseFromString(req.snapshot())) {
    return absl::InvalidArgumentError("snapshot bytes are not a cairn session snapshot");
  }
  if (!req.session_id().empty()) {
    if (absl::Status st = SessionManager::ValidateId(req.session_id()); !st.ok()) return st;
    if (absl::Status st = CheckIdIsFree(req.session_id()); !st.ok()) return st;
  }
  auto lease =
      RestoreSession(snap, req.model(), req.session_id(), caller, *models_, *sessions_, budget_, replica_.snapshot_key);
  if (!lease.ok()) return lease.status();
  Changed(**lease, resp);
  if (metrics_ != nullptr) metrics_->sessions->Set(static_cast<double>(sessions_->size()));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Replicas

void InferenceService::AddReplicaMetadata(grpc::ServerContextBase* ctx) const {
  if (!replica_.name.empty()) ctx->AddInitialMetadata("x-cairn-replica", replica_.name);
}

absl::Status InferenceService::CheckIdIsFree(const std::string& id) const {
  if (id.empty() || replica_.session_dir == nullptr || !replica_.session_dir->Exists(id)) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat("session '", id, "' already exists (in the session directory)"));
}

absl::StatusOr<SessionLease> InferenceService::AcquireSession(const std::string& id, const Caller& caller,
                                                              ServedModel* create_on) {
  // Ids that cannot name a file were never persisted (and a client's bad id
  // is its error, not the directory's).
  SessionDirectory* dir = SessionManager::ValidateId(id).ok() ? replica_.session_dir : nullptr;
  if (dir != nullptr && dir->Check(id) != SessionDirectory::Change::kUnchanged) {
    // Another replica continued or deleted the session since this one
    // served it: the live copy here is stale.
    if (absl::Status st = sessions_->Delete(id, caller.owner); !st.ok() && !absl::IsNotFound(st)) return st;
  }
  for (int attempt = 0;; ++attempt) {
    auto lease = sessions_->Acquire(id, caller.owner, caller.wait_until);
    if (!absl::IsNotFound(lease.status())) return lease;
    if (dir != nullptr) {
      auto persisted = dir->Load(id);
      if (persisted.ok()) {
        if (persisted->owner != caller.owner) {
          return absl::PermissionDeniedError(absl::StrCat("session '", id, "' belongs to another client"));
        }
        auto restored =
            RestoreSession(persisted->snapshot, "", id, caller, *models_, *sessions_, budget_, replica_.snapshot_key);
        // Another request restored it meanwhile: acquire that one.
        if (absl::IsAlreadyExists(restored.status()) && attempt == 0) continue;
        if (restored.ok() && metrics_ != nullptr) {
          metrics_->sessions->Set(static_cast<double>(sessions_->size()));
        }
        return restored;
      }
      if (!absl::IsNotFound(persisted.status())) {
        std::fprintf(stderr, "cairn: session directory: %s\n", persisted.status().ToString().c_str());
        if (!absl::IsDataLoss(persisted.status())) return persisted.status();
      }
    }
    if (create_on == nullptr) return lease.status();
    auto created = sessions_->Create(create_on, caller.owner, caller.cache_tenant, 0, "", id);
    if (absl::IsAlreadyExists(created.status()) && attempt == 0) continue;
    return created;
  }
}

void InferenceService::Persist(Session& s) {
  if (replica_.session_dir == nullptr) return;
  auto snap = CaptureSession(s, CaptureMode::kAsHeld, budget_, replica_.snapshot_key);
  absl::Status st = snap.status();
  if (st.ok()) st = replica_.session_dir->Save(s.id, PersistedSession{s.tenant, s.seq->tenant(), std::move(*snap)});
  if (!st.ok()) {
    // The older file must not outlive it: a replica taking the session over
    // (or this one after a crash) would serve a history the client has
    // moved past. Without a file it answers NOT_FOUND, and the client
    // re-sends its conversation (create_session).
    replica_.session_dir->Remove(s.id);
    std::fprintf(stderr, "cairn: persisting session '%s': %s (its older file removed)\n", s.id.c_str(),
                 st.ToString().c_str());
  }
}

grpc::Status InferenceService::ListModels(grpc::ServerContext* ctx, const v1::ListModelsRequest* /*req*/,
                                          v1::ListModelsResponse* resp) {
  AddReplicaMetadata(ctx);
  if (absl::StatusOr<Caller> caller = auth_->Authenticate(*ctx); !caller.ok()) {
    return ToGrpcStatus(caller.status());
  }
  for (ServedModel* m : models_->All()) {
    v1::ModelDescription* d = resp->add_models();
    const ModelInfo& info = m->info();
    d->set_name(m->name);
    d->set_arch(info.arch);
    d->set_family(info.family);
    d->set_n_vocab(info.n_vocab);
    d->set_context_length(m->context_length());
    d->set_n_embd(info.n_embd);
    d->set_accepts_embeddings(info.accepts_embeddings);
    d->set_has_tokenizer(m->tokenizer != nullptr);
    d->set_synthetic(m->synthetic);
    d->set_path(m->path);
    if (m->chat_template.has_value()) d->set_chat_template(std::string(m->chat_template->name()));
  }
  return grpc::Status::OK;
}

grpc::Status InferenceService::RenderPrompt(grpc::ServerContext* ctx, const v1::RenderPromptRequest* req,
                                            v1::RenderPromptResponse* resp) {
  AddReplicaMetadata(ctx);
  if (absl::StatusOr<Caller> caller = auth_->Authenticate(*ctx); !caller.ok()) {
    return ToGrpcStatus(caller.status());
  }
  absl::StatusOr<ServedModel*> model = models_->Find(req->model());
  if (!model.ok()) return ToGrpcStatus(model.status());
  const ServedModel& m = **model;
  if (m.tokenizer == nullptr || !m.chat_template.has_value()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("model '", m.name, "' has no tokenizer: messages cannot be rendered; send token ids")));
  }
  const bool gen = !req->has_add_generation_prompt() || req->add_generation_prompt();
  auto request = ToChatRequest(limits_, req->messages(), req->tools(), req->template_args(), gen);
  if (!request.ok()) return ToGrpcStatus(request.status());
  const absl::Status st = large_work_.Run(req->ByteSizeLong(), [&]() -> absl::Status {
    auto rendered = m.chat_template->Render(*request);
    if (!rendered.ok()) return rendered.status();
    const TokenizedChat chat = TokenizeChat(*m.tokenizer, *rendered);
    resp->set_text(rendered->Text());
    resp->mutable_token_ids()->Add(chat.tokens.begin(), chat.tokens.end());
    for (size_t start : rendered->message_starts) resp->add_message_starts(static_cast<int32_t>(start));
    for (size_t start : chat.message_starts) resp->add_message_token_starts(static_cast<int32_t>(start));
    resp->set_generation_prompt_start(static_cast<int32_t>(rendered->generation_prompt_start));
    return absl::OkStatus();
  });
  if (!st.ok()) return ToGrpcStatus(st);
  resp->set_template_name(std::string(m.chat_template->name()));
  resp->set_template_description(m.chat_template->description());
  return grpc::Status::OK;
}

}  // namespace cairn::service
