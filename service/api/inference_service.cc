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
#include "service/api/generate_response.h"
#include "service/api/status.h"
#include "service/scheduling/scheduler.h"
#include "service/sessions/history_proto.h"
#include "service/sessions/session_snapshot.h"

namespace cairn::service {
namespace {

// See GenerateTurn::Relay: 100 ms, or a tenth of a shorter time left.
std::chrono::system_clock::time_point EarlyDeadline(std::chrono::system_clock::time_point deadline) {
  const auto left = std::max<std::chrono::system_clock::duration>(deadline - std::chrono::system_clock::now(), {});
  return deadline - std::min<std::chrono::system_clock::duration>(std::chrono::milliseconds(100), left / 10);
}

}  // namespace

namespace {

// Appends the tokens of `text` (a BOS first when `first` and the model wants
// one); special tokens in the text stay text.
absl::Status AddText(const ServedModel& model, const ServiceLimits& limits, const std::string& text, bool first,
                     History* out) {
  const Tokenizer* tok = model.tokenizer.get();
  if (tok == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("model '", model.name, "' has no tokenizer: send token ids"));
  }
  if (text.size() > static_cast<size_t>(limits.max_text_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("text part longer than ", limits.max_text_bytes, " bytes"));
  }
  if (first && tok->add_bos() && tok->special_tokens().bos >= 0) out->AddToken(tok->special_tokens().bos);
  TokenizeOptions opt;
  opt.add_special = false;
  opt.parse_special = false;
  for (TokenId t : tok->Tokenize(text, opt)) out->AddToken(t);
  return absl::OkStatus();
}

absl::Status AddParts(const ServedModel& model, const ServiceLimits& limits, const v1::GenerateRequest& req,
                      bool at_start, History* h) {
  for (int i = 0; i < req.parts_size(); ++i) {
    const v1::PromptPart& p = req.parts(i);
    switch (p.part_case()) {
      case v1::PromptPart::kText:
        if (absl::Status st = AddText(model, limits, p.text(), at_start && h->empty(), h); !st.ok()) return st;
        break;
      case v1::PromptPart::kTokens:
        for (int32_t id : p.tokens().ids()) {
          if (absl::Status st = CheckToken(model, id); !st.ok()) return st;
          h->AddToken(id);
        }
        break;
      case v1::PromptPart::kEmbeddings: {
        auto c = ToChunk(model, p.embeddings());
        if (!c.ok()) return c.status();
        h->AddChunk(std::move(*c));
        break;
      }
      case v1::PromptPart::kMessageBoundary:
        h->EndMessage();
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("prompt part ", i, " is empty"));
    }
  }
  return absl::OkStatus();
}

// Renders the messages with the model's chat template and appends them,
// with a message boundary where each message after the first starts and
// where the generation prompt starts.
absl::Status AddMessages(const ServedModel& model, const ServiceLimits& limits, const v1::GenerateRequest& req,
                         bool at_start, History* h) {
  const Tokenizer* tok = model.tokenizer.get();
  if (tok == nullptr || !model.chat_template.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", model.name, "' has no tokenizer: messages cannot be rendered"));
  }
  std::vector<ChatMessage> msgs;
  size_t bytes = 0;
  for (const v1::ChatMessage& m : req.messages()) {
    msgs.push_back({m.role(), m.content()});
    bytes += m.content().size();
  }
  if (bytes > static_cast<size_t>(limits.max_text_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("messages longer than ", limits.max_text_bytes, " bytes"));
  }
  const bool gen = !req.has_add_generation_prompt() || req.add_generation_prompt();
  auto rendered = model.chat_template->Render(msgs, gen);
  if (!rendered.ok()) return rendered.status();
  TokenizedChat chat = TokenizeChat(*tok, *rendered);
  // Appended to a conversation: no second BOS.
  size_t skip = 0;
  if (!at_start && !chat.tokens.empty() && chat.tokens[0] == tok->special_tokens().bos) skip = 1;
  std::vector<size_t> ends(chat.message_starts.begin() + (chat.message_starts.empty() ? 0 : 1),
                           chat.message_starts.end());
  ends.push_back(chat.generation_prompt_start);
  size_t next = 0;
  for (size_t i = skip; i < chat.tokens.size(); ++i) {
    while (next < ends.size() && ends[next] <= i) {
      if (ends[next] == i) h->EndMessage();
      ++next;
    }
    h->AddToken(chat.tokens[i]);
  }
  while (next < ends.size()) {
    if (ends[next] == chat.tokens.size()) h->EndMessage();
    ++next;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<History> InferenceService::BuildPrompt(const ServedModel& model,
                                                      const v1::GenerateRequest& req,
                                                      bool at_start) const {
  if (req.parts_size() > 0 && req.messages_size() > 0) {
    return absl::InvalidArgumentError("give either parts or messages, not both");
  }
  if (req.parts_size() > limits_.max_prompt_parts || req.messages_size() > limits_.max_prompt_parts) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", limits_.max_prompt_parts, " prompt parts"));
  }
  History h;
  absl::Status st = req.messages_size() > 0 ? AddMessages(model, limits_, req, at_start, &h)
                                            : AddParts(model, limits_, req, at_start, &h);
  if (!st.ok()) return st;
  return h;
}

namespace {

// Counts a handler as running for as long as it is in scope.
class InFlight {
 public:
  explicit InFlight(std::atomic<int32_t>& n) : n_(n) { n_.fetch_add(1); }
  ~InFlight() { n_.fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int32_t>& n_;
};

absl::Status ShuttingDown() {
  return absl::UnavailableError("the server is shutting down: retry on another replica");
}

}  // namespace

grpc::Status InferenceService::Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* req,
                                        grpc::ServerWriter<v1::GenerateResponse>* writer) {
  const Clock::time_point start = Clock::now();
  AddReplicaMetadata(ctx);
  GenerateTrace trace;
  absl::Status st;
  const InFlight in_flight(in_flight_);
  if (stopping_.load()) {
    st = ShuttingDown();
  } else {
    if (active_generate_.fetch_add(1) >= limits_.max_concurrent_generate) {
      st = absl::ResourceExhaustedError(
          absl::StrCat("more than ", limits_.max_concurrent_generate, " concurrent Generate calls"));
    } else {
      absl::StatusOr<Caller> caller = auth_->Authenticate(*ctx);
      st = caller.ok() ? DoGenerate(ctx, *caller, *req, writer, &trace) : caller.status();
    }
    active_generate_.fetch_sub(1);
  }
  RecordGenerate(metrics_, *req, trace, st, std::chrono::duration<double>(Clock::now() - start).count());
  return ToGrpcStatus(st);
}

namespace {

// The sampler's settings as the request gives them (validated by the caller).
SamplingConfig SamplingFromRequest(const v1::GenerateRequest& req) {
  SamplingConfig sc;
  const v1::SamplingParams& sp = req.sampling();
  if (sp.has_temperature()) sc.temperature = sp.temperature();
  sc.top_k = sp.top_k();
  if (sp.has_top_p()) sc.top_p = sp.top_p();
  sc.min_p = sp.min_p();
  if (sp.has_repetition_penalty()) sc.repetition_penalty = sp.repetition_penalty();
  sc.presence_penalty = sp.presence_penalty();
  if (sp.has_penalty_last_n()) sc.penalty_last_n = sp.penalty_last_n();
  sc.seed = sp.has_seed() ? sp.seed() : std::random_device{}();
  sc.logprobs = req.logprobs();
  sc.top_logprobs = req.top_logprobs();
  return sc;
}

}  // namespace

// One Generate call, step by step: Prepare (model and parameters, checked
// before anything changes), CheckOut (the session or a fresh sequence, the
// prompt, the memory it may reach), Submit (to the model's scheduler),
// Relay (events to the stream) and Finish (session bookkeeping, the final
// status). The members are declared in the order the call needs them torn
// down in: the job first, then the session's memory is settled while its
// lease is still held, and a fresh sequence is freed before its memory
// reservation is released.
class InferenceService::GenerateTurn {
 public:
  GenerateTurn(InferenceService& service, grpc::ServerContext* ctx, const Caller& caller,
               const v1::GenerateRequest& req, grpc::ServerWriter<v1::GenerateResponse>* writer,
               GenerateTrace* trace)
      : service_(service), ctx_(ctx), caller_(caller), req_(req), writer_(writer), trace_(trace) {}

  absl::Status Run() {
    if (absl::Status st = Prepare(); !st.ok()) return st;
    if (absl::Status st = CheckOut(); !st.ok()) return st;
    if (absl::Status st = Submit(); !st.ok()) return st;
    Relay();
    return Finish();
  }

 private:
  // Sets a session's memory reservation to what its sequence really holds.
  struct SettleSession {
    Session* s = nullptr;
    ~SettleSession() {
      if (s != nullptr) s->memory.Set(s->seq->memory()->Bytes(SnapshotScope::kFull));
    }
  };

  absl::Status Prepare();
  absl::Status CheckStopParams() const;
  absl::Status CheckOut();
  absl::Status ReserveSequence(Pos positions);
  absl::Status Submit();
  void Relay();
  void RelayEvent(v1::GenerateResponse& ev);
  absl::Status Finish();
  absl::Status FinalStatus() const;
  std::optional<History> SessionHistoryAfter(const absl::Status& status) const;

  InferenceService& service_;
  grpc::ServerContext* const ctx_;
  const Caller& caller_;
  const v1::GenerateRequest& req_;
  grpc::ServerWriter<v1::GenerateResponse>* const writer_;
  GenerateTrace* const trace_;
  const Clock::time_point received_ = Clock::now();

  // Prepare.
  ServedModel* model_ = nullptr;
  SamplingConfig sampling_;
  int32_t max_tokens_ = 0;

  // CheckOut: a session (exclusive while the request runs) or a fresh sequence.
  SessionLease lease_;
  MemoryReservation temp_memory_;  // released after temp_seq_ is freed
  std::unique_ptr<checkpoint::Sequence> temp_seq_;
  checkpoint::Sequence* seq_ = nullptr;
  History prompt_;  // moved into the job by Submit
  SettleSession settle_;

  // Submit and Relay.
  std::shared_ptr<GenerateJob> job_;
  std::optional<v1::GenerateResponse> finished_;
  bool client_gone_ = false;
  size_t written_tokens_ = 0;  // token deltas the transport accepted
  bool held_back_ = false;     // tokens not sent because the request was stopped
};

absl::Status InferenceService::GenerateTurn::Prepare() {
  auto model_or = service_.models_->Find(req_.model());
  if (!model_or.ok()) return model_or.status();
  model_ = *model_or;
  trace_->model = model_->name;
  sampling_ = SamplingFromRequest(req_);
  if (absl::Status st = sampling_.Validate(); !st.ok()) return st;
  const v1::StopParams& stop = req_.stop();
  max_tokens_ = stop.has_max_tokens() ? stop.max_tokens() : 256;
  if (max_tokens_ < 0) return absl::InvalidArgumentError("stop.max_tokens must be >= 0");
  if (absl::Status st = CheckStopParams(); !st.ok()) return st;
  if (req_.append() && req_.session_id().empty()) {
    return absl::InvalidArgumentError("append needs a session_id");
  }
  if (req_.create_session() && (req_.append() || req_.session_id().empty())) {
    return absl::InvalidArgumentError(
        "create_session needs a session_id and the whole conversation (append = false)");
  }
  return absl::OkStatus();
}

absl::Status InferenceService::GenerateTurn::CheckStopParams() const {
  const v1::StopParams& stop = req_.stop();
  const ServiceLimits& limits = service_.limits_;
  if (stop.stop_strings_size() > limits.max_stop_strings) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", limits.max_stop_strings, " stop strings"));
  }
  for (const std::string& s : stop.stop_strings()) {
    if (s.empty() || s.size() > static_cast<size_t>(limits.max_stop_string_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("stop strings must have 1..",
                                                     limits.max_stop_string_bytes, " bytes"));
    }
  }
  if (stop.stop_strings_size() > 0 && model_->tokenizer == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", model_->name, "' has no tokenizer: stop strings cannot match"));
  }
  if (stop.stop_token_ids_size() > limits.max_stop_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", limits.max_stop_tokens, " stop tokens"));
  }
  for (int32_t id : stop.stop_token_ids()) {
    if (absl::Status st = CheckToken(*model_, id); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status InferenceService::GenerateTurn::CheckOut() {
  const History* base = nullptr;  // the conversation the request appends to
  if (!req_.session_id().empty()) {
    auto l = service_.AcquireSession(req_.session_id(), caller_, req_.create_session() ? model_ : nullptr);
    if (!l.ok()) return l.status();
    lease_ = std::move(*l);
    if (lease_->model != model_) {
      return absl::InvalidArgumentError(absl::StrCat("session '", req_.session_id(), "' runs model '",
                                                     lease_->model->name, "', not '", model_->name, "'"));
    }
    seq_ = lease_->seq.get();
    if (req_.append()) base = &lease_->history;
  }
  auto added = service_.BuildPrompt(*model_, req_, base == nullptr || base->empty());
  if (!added.ok()) return added.status();
  if (base != nullptr) prompt_ = *base;
  prompt_.Append(*added);
  if (prompt_.empty()) return absl::InvalidArgumentError("empty prompt");
  const Pos positions = prompt_.PositionsOf(prompt_.size());
  if (positions >= model_->context_length()) {
    return absl::ResourceExhaustedError(absl::StrCat("prompt of ", positions,
                                                     " positions does not fit the context of ",
                                                     model_->context_length()));
  }
  return ReserveSequence(positions);
}

// The live-memory budget: what the sequence can reach (the prompt, then up
// to max_tokens more, within the context), reserved before anything
// changes. A session's reservation is set to what its sequence really holds
// when the request ends, however it ends (settle_). Sessionless, the fresh
// sequence is created here, under its own reservation.
absl::Status InferenceService::GenerateTurn::ReserveSequence(Pos positions) {
  const int64_t rows = prompt_.RowsOf(prompt_.size());
  const int64_t reach = rows + std::min<int64_t>(max_tokens_, model_->context_length() - positions);
  const std::string what = absl::StrCat("a prompt of ", positions, " positions plus up to ",
                                        reach - rows, " new tokens on model '", model_->name, "'");
  MemoryBudget* const budget = service_.budget_;
  if (budget != nullptr && lease_.get() != nullptr) {
    if (absl::Status st = lease_->memory.Grow(model_->SequenceBytes(reach), what); !st.ok()) return st;
    settle_.s = lease_.get();
  }
  if (seq_ == nullptr) {
    if (budget != nullptr) {
      auto r = budget->Reserve(model_->SequenceBytes(reach), what);
      if (!r.ok()) return r.status();
      temp_memory_ = std::move(*r);
    }
    auto s = model_->engine->NewSequence(caller_.cache_tenant);
    if (!s.ok()) return s.status();
    temp_seq_ = std::move(*s);
    seq_ = temp_seq_.get();
  }
  return absl::OkStatus();
}

absl::Status InferenceService::GenerateTurn::Submit() {
  const v1::StopParams& stop = req_.stop();
  job_ = std::make_shared<GenerateJob>();
  job_->seq = seq_;
  job_->prompt = std::move(prompt_);
  job_->sampling = sampling_;
  job_->max_tokens = max_tokens_;
  job_->stop_tokens.assign(stop.stop_token_ids().begin(), stop.stop_token_ids().end());
  job_->stop_strings.assign(stop.stop_strings().begin(), stop.stop_strings().end());
  job_->ignore_eos = stop.ignore_eos();
  job_->stream_text = !req_.has_stream_text() || req_.stream_text();
  job_->session_id = req_.session_id();
  job_->received = received_;
  grpc::ServerContext* ctx = ctx_;
  job_->abort_stream = [ctx] { ctx->TryCancel(); };
  return model_->scheduler->Submit(job_);
}

// Relays events until the job is done. Writes block while the client is
// slow (flow control); each completed token write is acknowledged to the
// scheduler, which pauses the request while too many are pending and ends
// it when the client stays stalled (backpressure, see scheduler.h).
// The server acts on a deadline a little early (EarlyDeadline), so that the
// tokens it wrote and its status reach the client before the client gives
// up (which drops what it has not read): the session then holds exactly the
// tokens the client received.
void InferenceService::GenerateTurn::Relay() {
  const auto deadline = EarlyDeadline(ctx_->deadline());
  for (;;) {
    for (const GenerateEvent& event : job_->WaitEvents(std::chrono::milliseconds(10))) {
      v1::GenerateResponse ev = ToResponse(event);
      RelayEvent(ev);
    }
    // A busy session's progress, for GetSession (Session::busy_tokens).
    if (lease_.get() != nullptr && written_tokens_ > 0) {
      lease_->busy_tokens.store(job_->prompt.size() + written_tokens_);
    }
    if (job_->done()) break;
    // The deadline first: gRPC also cancels a call whose deadline passed,
    // and the first reason recorded wins.
    if (std::chrono::system_clock::now() >= deadline) job_->RequestStop(StopReason::kDeadline);
    if (ctx_->IsCancelled()) job_->RequestStop(StopReason::kCancelled);
  }
}

void InferenceService::GenerateTurn::RelayEvent(v1::GenerateResponse& ev) {
  if (ev.has_finished()) {  // written by Finish, with the session's final size
    finished_ = std::move(ev);
    return;
  }
  // Once stopped, no more tokens go out: the history keeps those written.
  if (ev.has_token() && job_->stop_reason() != StopReason::kNone) {
    held_back_ = true;
    return;
  }
  if (!client_gone_ && !writer_->Write(ev)) {
    client_gone_ = true;
    job_->RequestStop(StopReason::kCancelled);
  } else if (!client_gone_ && ev.has_token()) {
    ++written_tokens_;
    job_->Acknowledge();
  }
}

absl::Status InferenceService::GenerateTurn::FinalStatus() const {
  absl::Status status = job_->status();
  if (status.ok() && held_back_) {
    // Stopped as it completed: without its last tokens it did not complete.
    status = job_->stop_reason() == StopReason::kDeadline ? absl::DeadlineExceededError("deadline exceeded")
                                                          : absl::CancelledError("request cancelled");
  }
  return status;
}

// Session bookkeeping: see GenerateRequest.session_id in the proto. The
// history the session holds after the request, or nothing when it keeps
// the one it had.
std::optional<History> InferenceService::GenerateTurn::SessionHistoryAfter(const absl::Status& status) const {
  const bool stopped = absl::IsCancelled(status) || absl::IsDeadlineExceeded(status);
  if (status.ok() || (job_->prefilled && stopped)) {
    // After a stop, only the tokens actually sent: the client never saw the
    // others, so they must not become part of its conversation.
    const size_t n = status.ok() ? job_->streamed.size() : std::min(written_tokens_, job_->streamed.size());
    History after = job_->prompt;
    for (size_t i = 0; i < n; ++i) after.AddToken(job_->streamed[i]);
    return after;
  }
  if (!stopped || lease_.get() == nullptr) return std::nullopt;
  // Stopped during prompt processing: the sequence holds a prefix of the
  // prompt (or still its old state when nothing happened yet).
  checkpoint::Prompt p;
  if (!job_->prompt.ToPrompt(model_->info().n_embd, &p).ok()) return std::nullopt;
  const auto held = seq_->history().keys();
  const size_t common = checkpoint::CommonPrefix(held, p.keys());
  if (common != held.size()) return std::nullopt;
  History after = job_->prompt;
  after.Resize(common);
  return after;
}

absl::Status InferenceService::GenerateTurn::Finish() {
  const absl::Status status = FinalStatus();
  trace_->prefilled = job_->prefilled;
  trace_->stats = job_->stats;
  trace_->tokens = static_cast<int64_t>(written_tokens_);
  if (finished_.has_value()) trace_->timings = finished_->finished().timings();

  std::optional<History> after = SessionHistoryAfter(status);
  if (job_->prefilled) {
    if (absl::Status e = model_->engine->EndGeneration(*seq_); !e.ok()) {
      // A failed capture loses a cache entry, never correctness.
    }
  }
  if (lease_.get() != nullptr && after.has_value()) {
    lease_->history = std::move(*after);
    service_.Persist(*lease_);
  }
  if (temp_seq_ != nullptr && job_->prefilled) {
    // Sessionless: keep the state findable by the shared prefix index.
    model_->engine->Park(*temp_seq_).IgnoreError();
  }
  if (status.ok() && finished_.has_value()) {
    finished_->mutable_finished()->mutable_usage()->set_session_tokens(
        lease_.get() != nullptr ? static_cast<int32_t>(lease_->history.size()) : 0);
    if (!client_gone_) writer_->Write(*finished_);
  }
  return status;
}

absl::Status InferenceService::DoGenerate(grpc::ServerContext* ctx, const Caller& caller,
                                          const v1::GenerateRequest& req,
                                          grpc::ServerWriter<v1::GenerateResponse>* writer, GenerateTrace* trace) {
  GenerateTurn turn(*this, ctx, caller, req, writer, trace);
  return turn.Run();
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

grpc::Status InferenceService::SessionControl(grpc::ServerContext* ctx, const v1::SessionRequest* req,
                                              v1::SessionResponse* resp) {
  const Clock::time_point start = Clock::now();
  AddReplicaMetadata(ctx);
  const InFlight in_flight(in_flight_);
  absl::StatusOr<Caller> caller = auth_->Authenticate(*ctx);
  absl::Status st = caller.status();
  if (stopping_.load()) {
    st = ShuttingDown();
  } else if (caller.ok()) {
    st = DoSession(*caller, *req, resp);
  }
  RecordSessionControl(metrics_, *req, st, std::chrono::duration<double>(Clock::now() - start).count());
  return ToGrpcStatus(st);
}

absl::Status InferenceService::DoSession(const Caller& caller, const v1::SessionRequest& req,
                                         v1::SessionResponse* resp) {
  absl::Status st;
  switch (req.op_case()) {
    case v1::SessionRequest::kCreate: st = CreateSession(caller, req.create(), resp); break;
    case v1::SessionRequest::kFork: st = ForkSession(caller, req.fork(), resp); break;
    case v1::SessionRequest::kRewind: st = RewindSession(caller, req.rewind(), resp); break;
    case v1::SessionRequest::kDelete: st = DeleteSession(caller, req.delete_(), resp); break;
    case v1::SessionRequest::kGet: return GetSession(caller, req.get(), resp);
    case v1::SessionRequest::kList: ListSessions(caller, resp); break;
    case v1::SessionRequest::kExport: return ExportSession(caller, req.export_(), resp);
    case v1::SessionRequest::kImport: return Import(caller, req.import(), resp);
    default: return absl::InvalidArgumentError("SessionRequest without an operation");
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
  Persist(**s);
  Describe(**s, false, resp->mutable_session());
  return absl::OkStatus();
}

absl::Status InferenceService::ForkSession(const Caller& caller, const v1::ForkSession& req,
                                           v1::SessionResponse* resp) {
  auto src = AcquireSession(req.session_id(), caller);
  if (!src.ok()) return src.status();
  auto s = sessions_->Fork(**src);
  if (!s.ok()) return s.status();
  Persist(**s);
  Describe(**s, false, resp->mutable_session());
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
  (*s)->history.Resize(static_cast<size_t>(n));
  Persist(**s);
  Describe(**s, false, resp->mutable_session());
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

absl::Status InferenceService::GetSession(const Caller& caller, const v1::GetSession& req,
                                          v1::SessionResponse* resp) {
  auto s = AcquireSession(req.session_id(), caller);
  if (s.ok()) {
    Describe(**s, req.include_tokens(), resp->mutable_session());
    return absl::OkStatus();
  }
  if (!absl::IsFailedPrecondition(s.status())) return s.status();
  // Busy: its progress, without its (changing) history.
  for (const auto& x : sessions_->List(caller.owner)) {
    if (x.id != req.session_id()) continue;
    v1::SessionInfo* out = resp->mutable_session();
    out->set_session_id(x.id);
    out->set_model(x.model);
    out->set_tokens(static_cast<int32_t>(x.tokens));
    out->set_busy(true);
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("session '", req.session_id(), "' not found"));
}

void InferenceService::ListSessions(const Caller& caller, v1::SessionResponse* resp) {
  v1::SessionList* list = resp->mutable_sessions();
  for (const auto& x : sessions_->List(caller.owner)) {
    v1::SessionInfo* out = list->add_sessions();
    out->set_session_id(x.id);
    out->set_model(x.model);
    out->set_tokens(static_cast<int32_t>(x.tokens));
    out->set_positions(x.positions);
    out->set_idle_seconds(x.idle_seconds);
    out->set_busy(x.busy);
  }
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

absl::Status InferenceService::Import(const Caller& caller, const v1::ImportSession& req,
                                      v1::SessionResponse* resp) {
  v1::SessionSnapshot snap;
  if (!snap.ParseFromString(req.snapshot())) {
    return absl::InvalidArgumentError("snapshot bytes are not a cairn session snapshot");
  }
  if (!req.session_id().empty()) {
    if (absl::Status st = SessionManager::ValidateId(req.session_id()); !st.ok()) return st;
    if (absl::Status st = CheckIdIsFree(req.session_id()); !st.ok()) return st;
  }
  auto lease = RestoreSession(snap, req.model(), req.session_id(), caller, *models_, *sessions_, budget_,
                              replica_.snapshot_key);
  if (!lease.ok()) return lease.status();
  Persist(**lease);
  Describe(**lease, false, resp->mutable_session());
  if (metrics_ != nullptr) metrics_->sessions->Set(static_cast<double>(sessions_->size()));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Replicas

void InferenceService::AddReplicaMetadata(grpc::ServerContext* ctx) const {
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
    auto lease = sessions_->Acquire(id, caller.owner);
    if (!absl::IsNotFound(lease.status())) return lease;
    if (dir != nullptr) {
      auto persisted = dir->Load(id);
      if (persisted.ok()) {
        if (persisted->owner != caller.owner) {
          return absl::PermissionDeniedError(absl::StrCat("session '", id, "' belongs to another client"));
        }
        auto restored = RestoreSession(persisted->snapshot, "", id, caller, *models_, *sessions_, budget_,
                                       replica_.snapshot_key);
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
    std::fprintf(stderr, "cairn: persisting session '%s': %s\n", s.id.c_str(), st.ToString().c_str());
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

}  // namespace cairn::service
