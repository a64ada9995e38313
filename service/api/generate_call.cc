#include "service/api/generate_call.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "service/api/generate_response.h"
#include "service/api/prompt_builder.h"
#include "service/api/stated_history.h"
#include "service/api/status.h"
#include "service/scheduling/scheduler.h"
#include "service/sessions/history_proto.h"

namespace cairn::service {
namespace {

// When the scheduler stops a request for its deadline: 100 ms before it, or
// a tenth of the time left when that is shorter, so that the tokens written
// and the status reach the client before it gives up (which drops what it
// has not read): it learns that the turn ended without OK, which leaves the
// session unchanged.
Clock::time_point StopTime(std::chrono::system_clock::time_point deadline) {
  const auto now = std::chrono::system_clock::now();
  if (deadline == std::chrono::system_clock::time_point::max()) return Clock::time_point::max();
  const auto left = std::max<std::chrono::system_clock::duration>(deadline - now, {});
  const auto early = std::min<std::chrono::system_clock::duration>(std::chrono::milliseconds(100), left / 10);
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(left - early);
}

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

InferenceService::GenerateCall::GenerateCall(InferenceService& service, std::shared_ptr<GenerateSink> sink,
                                             const v1::GenerateRequest& req)
    : service_(service), sink_(std::move(sink)), req_(req) {}

std::shared_ptr<InferenceService::GenerateCall> InferenceService::GenerateCall::Create(
    InferenceService& service, std::shared_ptr<GenerateSink> sink, const v1::GenerateRequest& req) {
  return std::shared_ptr<GenerateCall>(new GenerateCall(service, std::move(sink), req));
}

void InferenceService::GenerateCall::Launch() {
  service_.CallStarted();
  service_.workers_.Run([call = shared_from_this()] { call->Start(); });
}

// ---------------------------------------------------------------------------
// Step 2: the start, on a worker thread.

void InferenceService::GenerateCall::Start() {
  absl::Status st = Admit();
  if (st.ok()) st = Prepare();
  if (st.ok()) st = CheckOut();
  if (st.ok()) st = Submit();
  if (!st.ok()) End(st, nullptr);
}

// Shutting down, the concurrency bound, authentication: before anything is
// parsed or held.
absl::Status InferenceService::GenerateCall::Admit() {
  if (service_.stopping_.load()) return ShuttingDown();
  counted_ = true;
  if (service_.active_generate_.fetch_add(1) >= service_.limits_.max_concurrent_generate) {
    return absl::ResourceExhaustedError(
        absl::StrCat("more than ", service_.limits_.max_concurrent_generate, " concurrent Generate calls"));
  }
  absl::StatusOr<Caller> caller = sink_->Authenticate(*service_.auth_);
  if (!caller.ok()) return caller.status();
  caller_ = *std::move(caller);
  return absl::OkStatus();
}

// The model and parameters, checked before anything changes.
absl::Status InferenceService::GenerateCall::Prepare() {
  auto model_or = service_.models_->Find(req_.model());
  if (!model_or.ok()) return model_or.status();
  model_ = *model_or;
  trace_.model = model_->name;
  sampling_ = SamplingFromRequest(req_);
  if (absl::Status st = sampling_.Validate(); !st.ok()) return st;
  const v1::StopParams& stop = req_.stop();
  max_tokens_ = stop.has_max_tokens() ? stop.max_tokens() : service_.limits_.default_max_tokens;
  if (max_tokens_ < 0) return absl::InvalidArgumentError("stop.max_tokens must be >= 0");
  max_tokens_ = std::min(max_tokens_, service_.limits_.max_tokens_limit);
  if (absl::Status st = CheckStopParams(); !st.ok()) return st;
  if (req_.append() && req_.session_id().empty()) {
    return absl::InvalidArgumentError("append needs a session_id");
  }
  if (req_.create_session() && (req_.append() || req_.session_id().empty())) {
    return absl::InvalidArgumentError("create_session needs a session_id and the whole conversation (append = false)");
  }
  return CheckStatedHistory(req_);
}

absl::Status InferenceService::GenerateCall::CheckStopParams() const {
  const v1::StopParams& stop = req_.stop();
  const ServiceLimits& limits = service_.limits_;
  if (stop.stop_strings_size() > limits.max_stop_strings) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", limits.max_stop_strings, " stop strings"));
  }
  for (const std::string& s : stop.stop_strings()) {
    if (s.empty() || s.size() > static_cast<size_t>(limits.max_stop_string_bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop strings must have 1..", limits.max_stop_string_bytes, " bytes"));
    }
  }
  if (stop.stop_strings_size() > 0 && model_->tokenizer == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", model_->name, "' has no tokenizer: stop strings cannot match; send stop token ids"));
  }
  if (stop.stop_token_ids_size() > limits.max_stop_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", limits.max_stop_tokens, " stop tokens"));
  }
  for (int32_t id : stop.stop_token_ids()) {
    if (absl::Status st = CheckToken(*model_, id); !st.ok()) return st;
  }
  return absl::OkStatus();
}

// The session (exclusively this call's until it ends) or a fresh sequence's
// memory, and the prompt: the session's history (cut to the length the
// client states) when appending, then the request's new items.
absl::Status InferenceService::GenerateCall::CheckOut() {
  const History* base = nullptr;  // the conversation the request appends to
  std::optional<History> stated;  // the history cut to session_tokens
  if (!req_.session_id().empty()) {
    auto l = service_.AcquireSession(req_.session_id(), caller_, req_.create_session() ? model_ : nullptr);
    if (!l.ok()) return l.status();
    lease_ = std::move(*l);
    if (lease_->model != model_) {
      return absl::InvalidArgumentError(absl::StrCat("session '", req_.session_id(), "' runs model '",
                                                     lease_->model->name, "', not '", model_->name, "'"));
    }
    // Under the lease, so no other request comes between the cut and this
    // one. The cut becomes the session's only as the start of the history
    // a turn that ends OK commits.
    auto cut = StatedHistory(lease_->history, req_);
    if (!cut.ok()) return cut.status();
    stated = *std::move(cut);
    if (req_.append()) base = stated.has_value() ? &*stated : &lease_->history;
  }
  PromptRendering rendering;
  auto added = service_.large_work_.Run(req_.ByteSizeLong(), [&] {
    return BuildPrompt(*model_, service_.limits_, req_, base == nullptr || base->empty(), &rendering);
  });
  if (!added.ok()) return added.status();
  auto parser = ReplyParser::Create(*model_, rendering);
  if (!parser.ok()) return parser.status();
  if (*parser != nullptr) continue_tokens_ = TurnContinuingTokens(*model_->tokenizer, (*parser)->format());
  {
    absl::MutexLock lock(&mu_);
    parser_ = *std::move(parser);
  }
  if (base != nullptr) prompt_ = *base;
  prompt_.Append(*added);
  if (prompt_.empty()) return absl::InvalidArgumentError("empty prompt");
  const Pos positions = prompt_.PositionsOf(prompt_.size());
  if (positions >= model_->context_length()) {
    return ContextLengthExceeded(
        absl::StrCat("prompt of ", positions, " positions does not fit the context of ", model_->context_length()));
  }
  return ReserveSequence(positions);
}

// The live-memory budget: what the sequence can reach (the prompt, then up
// to max_tokens more, within the context), reserved before anything
// changes. A session's reservation is set to what its sequence really holds
// when the call ends, however it ends.
absl::Status InferenceService::GenerateCall::ReserveSequence(Pos positions) {
  MemoryBudget* const budget = service_.budget_;
  if (budget == nullptr) return absl::OkStatus();
  const int64_t rows = prompt_.RowsOf(prompt_.size());
  const int64_t reach = rows + std::min<int64_t>(max_tokens_, model_->context_length() - positions);
  const std::string what = absl::StrCat("a prompt of ", positions, " positions plus up to ", reach - rows,
                                        " new tokens on model '", model_->name, "'");
  if (lease_.get() != nullptr) {
    if (absl::Status st = lease_->memory.Grow(model_->SequenceBytes(reach), what); !st.ok()) return st;
    settle_memory_ = true;
    return absl::OkStatus();
  }
  auto r = budget->Reserve(model_->SequenceBytes(reach), what);
  if (!r.ok()) return r.status();
  temp_memory_ = std::move(*r);
  return absl::OkStatus();
}

absl::Status InferenceService::GenerateCall::Submit() {
  const v1::StopParams& stop = req_.stop();
  auto job = std::make_shared<GenerateJob>();
  job->seq = lease_.get() != nullptr ? lease_->seq.get() : nullptr;
  job->tenant = caller_.cache_tenant;
  job->prompt = std::move(prompt_);
  job->sampling = sampling_;
  job->max_tokens = max_tokens_;
  job->stop_tokens.assign(stop.stop_token_ids().begin(), stop.stop_token_ids().end());
  job->stop_strings.assign(stop.stop_strings().begin(), stop.stop_strings().end());
  job->ignore_eos = stop.ignore_eos();
  job->continue_tokens = continue_tokens_;
  job->stream_text = !req_.has_stream_text() || req_.stream_text();
  job->session_id = req_.session_id();
  job->received = received_;
  job->deadline = StopTime(sink_->Deadline());
  // The wake-up holds no reference: a call its transport is done with may
  // go while the scheduler still has the job.
  job->on_progress = [weak = weak_from_this()] {
    if (std::shared_ptr<GenerateCall> call = weak.lock()) call->Wake();
  };
  job->abort_stream = [weak = std::weak_ptr<GenerateSink>(sink_)] {
    if (std::shared_ptr<GenerateSink> sink = weak.lock()) sink->Abort();
  };
  {
    absl::MutexLock lock(&mu_);
    job_ = job;
    stoppable_session_ = lease_.get();
  }
  absl::Status st = model_->scheduler->Submit(job);
  // A cancel that came before the job existed.
  if (st.ok()) {
    bool cancelled;
    {
      absl::MutexLock lock(&mu_);
      cancelled = cancelled_;
    }
    if (cancelled) StopForClient(StopReason::kCancelled);
  }
  return st;
}

// ---------------------------------------------------------------------------
// Step 4: events to the stream.

// On the scheduler's thread: the write (and its serialization and the
// transport's work) goes to a worker, so that the scheduler's loop, which
// every request waits for, does not carry it. A write in flight takes the
// next event when it completes; one wake-up pending serves all events
// queued until it runs.
void InferenceService::GenerateCall::Wake() {
  {
    absl::MutexLock lock(&mu_);
    if (write_in_flight_ || pump_pending_ || concluding_) return;
    pump_pending_ = true;
  }
  service_.workers_.Run([call = shared_from_this()] { call->Pump(); });
}

void InferenceService::GenerateCall::Pump() {
  Next next;
  {
    absl::MutexLock lock(&mu_);
    pump_pending_ = false;
    next = TakeNext();
  }
  if (next == Next::kWrite) {
    sink_->Write(&message_);
  } else if (next == Next::kConclude) {
    service_.workers_.Run([call = shared_from_this()] { call->Conclude(); });
  }
}

InferenceService::GenerateCall::Next InferenceService::GenerateCall::TakeNext() {
  if (write_in_flight_ || concluding_ || job_ == nullptr) return Next::kNothing;
  // A stopped request sends nothing more (its status says it did not complete).
  if (client_gone_ || job_->stop_reason() != StopReason::kNone) pending_.clear();
  if (!pending_.empty()) {
    message_ = std::move(pending_.front());
    pending_.pop_front();
    writing_token_ = false;
    write_in_flight_ = true;
    return Next::kWrite;
  }
  while (std::optional<GenerateEvent> event = job_->TakeEvent()) {
    if (std::holds_alternative<GenerationFinished>(*event)) {
      finished_ = ToMessage(*event);             // sent by Conclude, with the session's final size
      if (!pending_.empty()) return TakeNext();  // the last tool calls go first
      continue;
    }
    const bool token = std::holds_alternative<TokenGenerated>(*event);
    // Once stopped, no more tokens go out: the turn ends without OK.
    if (token && job_->stop_reason() != StopReason::kNone) {
      held_back_ = true;
      continue;
    }
    if (client_gone_) continue;
    message_ = ToMessage(*event);
    writing_token_ = token;
    write_in_flight_ = true;
    return Next::kWrite;
  }
  if (!job_->done()) return Next::kNothing;
  concluding_ = true;
  return Next::kConclude;
}

v1::GenerateResponse InferenceService::GenerateCall::ToMessage(const GenerateEvent& event) {
  v1::GenerateResponse message = ToResponse(event);
  if (parser_ == nullptr) return message;
  std::vector<v1::ToolCall> calls;
  if (const auto* token = std::get_if<TokenGenerated>(&event)) {
    const TokenId id = token->token.id;
    const bool ends = !req_.stop().ignore_eos() && model_->tokenizer->IsEndOfGeneration(id) &&
                      std::find(continue_tokens_.begin(), continue_tokens_.end(), id) == continue_tokens_.end();
    parser_->Token(id, ends, message.mutable_token(), &calls);
  } else if (std::holds_alternative<GenerationFinished>(event)) {
    parser_->Finish(message.mutable_finished(), &calls);
  } else {
    message.mutable_prompt()->set_output_format(std::string(chat::output::OutputFormatName(parser_->format())));
  }
  for (v1::ToolCall& call : calls) *pending_.emplace_back().mutable_tool_call() = std::move(call);
  return message;
}

void InferenceService::GenerateCall::WriteDone(bool ok) {
  std::shared_ptr<GenerateJob> job;
  bool acknowledge = false;
  {
    absl::MutexLock lock(&mu_);
    job = job_;
    if (!ok) {
      client_gone_ = true;
    } else if (writing_token_) {
      ++written_tokens_;
      acknowledge = true;
      // What a busy session has streamed, for GetSession; while this write
      // is in flight the call cannot end.
      if (lease_.get() != nullptr) lease_->in_flight_tokens.store(written_tokens_);
    }
    write_in_flight_ = false;
  }
  if (!ok) StopForClient(StopReason::kCancelled);
  if (acknowledge) job->Acknowledge();
  Pump();
}

void InferenceService::GenerateCall::Cancel() {
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }
  StopForClient(StopReason::kCancelled);
}

void InferenceService::GenerateCall::StopForClient(StopReason reason) {
  std::shared_ptr<GenerateJob> job;
  {
    absl::MutexLock lock(&mu_);
    job = job_;
    // Under mu_: End clears it before the session is released.
    if (job != nullptr && stoppable_session_ != nullptr) service_.sessions_->MarkStopping(*stoppable_session_);
  }
  if (job == nullptr) return;  // Submit stops it
  // A transport also cancels a call whose deadline passed: that is the deadline.
  job->RequestStop(Clock::now() >= job->deadline ? StopReason::kDeadline : reason);
}

// ---------------------------------------------------------------------------
// Step 5: the end, on a worker thread.

namespace {

// The job's status, unless the request was stopped as it completed: without
// its last tokens it did not complete.
absl::Status FinalStatus(const GenerateJob& job, bool held_back) {
  absl::Status status = job.status();
  if (status.ok() && held_back) {
    status = job.stop_reason() == StopReason::kDeadline ? absl::DeadlineExceededError("deadline exceeded")
                                                        : absl::CancelledError("request cancelled");
  }
  return status;
}

// Session bookkeeping: see GenerateRequest.session_id in the proto. A turn
// that ends without OK changes nothing: the client may not have received
// what was generated (a cancel, a deadline, a broken stream), so nothing of
// it may become its conversation; what was computed stays in the checkpoint
// cache for the turn the client sends next.
std::optional<History> SessionHistoryAfter(const GenerateJob& job, const absl::Status& status) {
  if (!status.ok()) return std::nullopt;
  History after = job.prompt;
  for (TokenId t : job.streamed) after.AddToken(t);
  return after;
}

}  // namespace

void InferenceService::GenerateCall::Conclude() {
  std::shared_ptr<GenerateJob> job;
  size_t written = 0;
  bool held_back = false, client_gone = false;
  std::optional<v1::GenerateResponse> final;
  {
    absl::MutexLock lock(&mu_);
    job = job_;
    written = written_tokens_;
    held_back = held_back_;
    client_gone = client_gone_;
    final = std::move(finished_);
  }
  const absl::Status status = FinalStatus(*job, held_back);
  trace_.prefilled = job->prefilled;
  trace_.stats = job->stats;
  trace_.tokens = static_cast<int64_t>(written);
  if (final.has_value()) trace_.timings = final->finished().timings();
  if (lease_.get() != nullptr) {
    // Ended: the client's next request on the session waits for the
    // commit, the write to the session directory and the release, rather
    // than being refused as concurrent (its client may have given up on
    // this one just as it ended OK).
    service_.sessions_->MarkStopping(*lease_);
    if (std::optional<History> after = SessionHistoryAfter(*job, status); after.has_value()) {
      lease_->Commit(std::move(*after));
      service_.Persist(*lease_);
    }
  }
  if (!status.ok() || client_gone) final.reset();
  if (final.has_value()) {
    final->mutable_finished()->mutable_usage()->set_session_tokens(
        lease_.get() != nullptr ? static_cast<int32_t>(lease_->history.size()) : 0);
  }
  End(status, final.has_value() ? &*final : nullptr);
}

void InferenceService::GenerateCall::End(const absl::Status& status, const v1::GenerateResponse* final) {
  {
    absl::MutexLock lock(&mu_);
    job_.reset();  // done: the scheduler already freed a fresh sequence
    stoppable_session_ = nullptr;
  }
  // The session's reservation settles while its lease is still held; the
  // fresh sequence's goes after the scheduler freed it.
  if (settle_memory_) lease_->memory.Set(model_->HeldBytes(*lease_->seq, lease_->history.size()));
  lease_.Reset();
  temp_memory_.Reset();
  if (counted_) service_.active_generate_.fetch_sub(1);
  trace_.method = std::string(sink_->Method());
  RecordGenerate(service_.metrics_, req_, trace_, status,
                 std::chrono::duration<double>(Clock::now() - received_).count());
  service_.CallEnded();
  if (final != nullptr) message_ = *final;
  sink_->Finish(status, final != nullptr ? &message_ : nullptr);
}

}  // namespace cairn::service
