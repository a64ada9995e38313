#include "service/scheduling/scheduler.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/model/detokenizer.h"
#include "service/scheduling/stop_matcher.h"

namespace cairn::service {
namespace {

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

bool WaitsForWrites(const GenerateJob& job, int32_t generated, int32_t limit) {
  return generated - job.acknowledged() >= limit;
}

// Steps in a row a prompt may be left out (shorter ones served first)
// before it goes first.
constexpr int32_t kPromptPatience = 8;

}  // namespace

struct Scheduler::Running {
  std::shared_ptr<GenerateJob> job;
  // The sequence the request runs on: the job's (a session's), or `fresh`.
  checkpoint::Sequence* seq = nullptr;
  std::unique_ptr<checkpoint::Sequence> fresh;
  Sampler sampler;
  std::optional<StreamingDetokenizer> detok;
  StopMatcher stops;
  TokenId pending = 0;  // sampled and streamed, not yet absorbed
  Clock::time_point prefill_start, prefill_end, first_token, last_token;
  int32_t generated = 0;
  // Backpressure: acknowledged() when last seen moving, and when.
  int64_t progress_acked = -1;
  Clock::time_point progress_at;
  bool over = false;       // finished in this step
  GenerationFinished fin;  // reason, matched stop and trailing text; Complete adds the rest

  Running(std::shared_ptr<GenerateJob> j, const Tokenizer* tok)
      : job(std::move(j)), seq(job->seq), sampler(job->sampling), stops(job->stop_strings) {
    // Output continues the prompt: SPM's leading space on the first token
    // is a real space here, not the tokenizer's prefix.
    DetokenizeOptions opt;
    opt.strip_space_prefix = false;
    if (tok != nullptr && job->stream_text) detok.emplace(*tok, opt);
  }
};

Scheduler::Scheduler(const SchedulerModel& model, const SchedulerOptions& options) : model_(model), options_(options) {}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerModel& model,
                                                             const SchedulerOptions& options) {
  if (model.backend == nullptr || model.engine == nullptr) {
    return absl::InvalidArgumentError("scheduler needs a loaded model");
  }
  if (options.max_batch <= 0 || options.max_queue <= 0) {
    return absl::InvalidArgumentError("max_batch and max_queue must be positive");
  }
  std::unique_ptr<Scheduler> s(new Scheduler(model, options));
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

Scheduler::~Scheduler() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
  std::deque<std::shared_ptr<GenerateJob>> queued;
  {
    absl::MutexLock lock(&mu_);
    queued.swap(queue_);
  }
  for (auto& j : queued) EndUnstarted(*j, absl::UnavailableError("server shutting down"));
}

absl::Status Scheduler::Submit(std::shared_ptr<GenerateJob> job) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("server shutting down");
  if (queue_.size() >= static_cast<size_t>(options_.max_queue)) {
    return absl::ResourceExhaustedError(absl::StrCat("model '", model_.name, "' has ", queue_.size(),
                                                     " requests waiting (limit ", options_.max_queue, ")"));
  }
  // Releasing mu_ makes the loop re-evaluate HasWork with the job's new
  // acknowledged count or stop (no wake-up lost between its check and its
  // wait).
  job->wake_scheduler = [this] { absl::MutexLock l(&mu_); };
  queue_.push_back(std::move(job));
  if (options_.metrics != nullptr) options_.metrics->queue_depth->Set(static_cast<double>(queue_.size()));
  return absl::OkStatus();
}

size_t Scheduler::queue_depth() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

size_t Scheduler::running() const {
  absl::MutexLock lock(&mu_);
  return n_decoding_;
}

size_t Scheduler::paused() const {
  absl::MutexLock lock(&mu_);
  return n_paused_;
}

bool Scheduler::Paused(Running& r, Clock::time_point now) const {
  const int64_t acked = r.job->acknowledged();
  const bool paused = WaitsForWrites(*r.job, r.generated, options_.max_unacknowledged_tokens);
  if (!paused || acked != r.progress_acked) {
    r.progress_acked = acked;
    r.progress_at = now;
  }
  return paused;
}

bool Scheduler::Stalled(Running& r, Clock::time_point now) {
  if (!Paused(r, now) || now - r.progress_at < options_.stalled_stream) return false;
  // The reason first: aborting fails the stream's pending write, which
  // would record kCancelled, and the first reason recorded wins.
  r.job->RequestStop(StopReason::kStalled);
  if (r.job->abort_stream) r.job->abort_stream();
  return true;
}

bool Scheduler::Stopping(GenerateJob& job, Clock::time_point now) {
  if (now >= job.deadline) job.RequestStop(StopReason::kDeadline);
  return job.stop_reason() != StopReason::kNone;
}

size_t Scheduler::CountPaused() const {
  return static_cast<size_t>(std::count_if(decoding_.begin(), decoding_.end(), [&](const auto& r) {
    return WaitsForWrites(*r->job, r->generated, options_.max_unacknowledged_tokens);
  }));
}

size_t Scheduler::CountIdle(Clock::time_point now) const {
  constexpr std::chrono::seconds kIdleAfter{1};
  return static_cast<size_t>(std::count_if(decoding_.begin(), decoding_.end(), [&](const auto& r) {
    return WaitsForWrites(*r->job, r->generated, options_.max_unacknowledged_tokens) &&
           r->progress_acked == r->job->acknowledged() && now - r->progress_at >= kIdleAfter;
  }));
}

bool Scheduler::HasWork() const {
  if (stopping_ || !queue_.empty() || !prefilling_.empty() || !shared_prefix_waits_.empty()) return true;
  for (const auto& r : decoding_) {
    if (r->job->stop_reason() != StopReason::kNone ||
        !WaitsForWrites(*r->job, r->generated, options_.max_unacknowledged_tokens)) {
      return true;
    }
  }
  return false;
}

// Only paused streams (or nothing) left: they end at their deadline or once
// stalled, so the loop looks again then.
Clock::time_point Scheduler::NextWake() const {
  Clock::time_point wake = Clock::time_point::max();
  for (const auto& r : decoding_) {
    wake = std::min({wake, r->job->deadline, r->progress_at + options_.stalled_stream});
  }
  return wake;
}

absl::Status Scheduler::StopStatus(const GenerateJob& job) const {
  switch (job.stop_reason()) {
    case StopReason::kDeadline:
      return absl::DeadlineExceededError("deadline exceeded");
    case StopReason::kShutdown:
      return absl::UnavailableError("server shutting down");
    case StopReason::kStalled:
      return absl::CancelledError(absl::StrCat(
          "the client stopped reading: ", options_.max_unacknowledged_tokens, " tokens unwritten for ",
          std::chrono::duration<double>(options_.stalled_stream).count(), " s (--stalled-stream-seconds)"));
    default:
      return absl::CancelledError("request cancelled");
  }
}

void Scheduler::EndUnstarted(GenerateJob& job, absl::Status status) { job.Finish(std::move(status)); }

void Scheduler::StartPrompt(std::shared_ptr<GenerateJob> job) {
  if (Stopping(*job, Clock::now())) {
    EndUnstarted(*job, StopStatus(*job));
    return;
  }
  checkpoint::Prompt prompt;
  absl::Status st = job->prompt.ToPrompt(model_.backend->info().n_embd, &prompt);
  if (st.ok() && HoldForSharedPrefix(job, prompt)) return;
  auto p = std::make_unique<Prefilling>();
  p->r = std::make_unique<Running>(job, model_.tokenizer);
  Running& r = *p->r;
  r.prefill_start = Clock::now();
  if (r.seq == nullptr) {
    auto fresh = model_.engine->NewSequence(job->tenant);
    if (!fresh.ok()) {
      job->Finish(fresh.status());
      return;
    }
    r.fresh = std::move(*fresh);
    r.seq = r.fresh.get();
  }
  if (st.ok()) {
    // Chooses and applies the reuse (cut, restore, shared prefix) now; the
    // rest of the prompt is computed in this loop's batched steps.
    absl::StatusOr<std::unique_ptr<checkpoint::PrefillJob>> pj = model_.engine->StartPrefill(*r.seq, prompt);
    if (pj.ok()) {
      p->job = std::move(*pj);
    } else {
      st = pj.status();
    }
  }
  if (!st.ok()) {
    Retire(r, st);
    return;
  }
  prefilling_.push_back(std::move(p));
}

bool Scheduler::HoldForSharedPrefix(const std::shared_ptr<GenerateJob>& job, const checkpoint::Prompt& prompt) {
  // What the request can reuse without waiting: its session's sequence, or
  // a state of the index on its path restorable onto any sequence (its own
  // earlier turn, parked).
  const std::string& tenant = job->seq != nullptr ? job->seq->tenant() : job->tenant;
  size_t reusable = job->seq != nullptr ? checkpoint::CommonPrefix(job->seq->history().keys(), prompt.keys()) : 0;
  for (const checkpoint::IndexHit& hit : model_.engine->index().Lookup(tenant, prompt.keys(), 0).on_path) {
    if (hit.entry.kind != checkpoint::EntryKind::kCheckpoint) reusable = std::max(reusable, hit.depth);
  }
  return shared_prefix_waits_.MaybeHold(job, prompt, tenant, reusable, PrefixLeaders());
}

std::vector<PrefixLeader> Scheduler::PrefixLeaders() const {
  std::vector<PrefixLeader> leaders;
  leaders.reserve(prefilling_.size());
  for (const auto& p : prefilling_) leaders.push_back(PrefixLeader{p->job.get(), p->r->seq->tenant()});
  return leaders;
}

void Scheduler::PromptDone(std::unique_ptr<Prefilling> p, absl::StatusOr<checkpoint::PrefillResult> res) {
  std::unique_ptr<Running> r = std::move(p->r);
  GenerateJob& job = *r->job;
  r->prefill_end = Clock::now();
  if (!res.ok()) {
    Retire(*r, job.stop_reason() != StopReason::kNone ? StopStatus(job) : res.status());
    return;
  }
  job.prefilled = true;
  job.stats = res->stats;
  if (const SchedulerMetrics* m = options_.metrics) {
    m->prompt_tokens->Increment(res->stats.prompt_positions);
    m->reused_tokens->Increment(res->stats.reused);
    m->recomputed_tokens->Increment(res->stats.recomputed);
  }
  job.Emit(PromptProcessed{res->stats, job.session_id});
  r->sampler.AddHistory(job.prompt.Tokens());
  if (job.max_tokens == 0) {
    Complete(*r, absl::OkStatus());
    return;
  }
  if (!Step(*r, res->logits)) decoding_.push_back(std::move(r));
}

// One step: wait for work, admit queued requests, drop the stopped ones,
// then one Forward over the decode rows and prompt runs, and what follows
// from its logits.
void Scheduler::Loop() {
  for (;;) {
    std::vector<std::shared_ptr<GenerateJob>> admitted, expired;
    if (!WaitAndAdmit(&admitted, &expired)) break;
    for (auto& job : expired) {
      Stopping(*job, Clock::now());
      EndUnstarted(*job, StopStatus(*job));
    }
    // Held requests whose shared prefix is computed (or whose leader is
    // gone) start before newly admitted ones: they arrived first.
    for (auto& job : shared_prefix_waits_.TakeReady(PrefixLeaders())) StartPrompt(std::move(job));
    for (auto& job : admitted) StartPrompt(std::move(job));
    // Stopped requests leave before the step (so within one step of the stop).
    const Clock::time_point now = Clock::now();
    RetireStoppedPrompts(now);
    RetireStoppedDecodes(now);
    StepBatch batch = BuildBatch(now);
    RunBatch(batch);
    FinishDecodeRows(batch);
    FinishPromptRuns(batch);
    PublishCounts();
  }
  EndInFlight();
}

bool Scheduler::WaitAndAdmit(std::vector<std::shared_ptr<GenerateJob>>* admitted,
                             std::vector<std::shared_ptr<GenerateJob>>* expired) {
  absl::MutexLock lock(&mu_);
  const absl::Condition has_work(this, &Scheduler::HasWork);
  const Clock::time_point wake = NextWake();
  if (wake == Clock::time_point::max()) {
    mu_.Await(has_work);
  } else {
    mu_.AwaitWithTimeout(has_work, absl::FromChrono(std::max(wake - Clock::now(), Clock::duration::zero())));
  }
  if (stopping_) return false;
  // Waiting requests past their deadline (or stopped) leave the queue now;
  // the loop stops them (RequestStop wakes the loop through mu_, so not
  // under it).
  const Clock::time_point now = Clock::now();
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (now >= (*it)->deadline || (*it)->stop_reason() != StopReason::kNone) {
      expired->push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  // Streams paused for a while take no place in the batch: stalled
  // clients must not keep the others waiting. (A stream briefly paused
  // while its handler catches up keeps its place.)
  const size_t idle = CountIdle(now);
  while (!queue_.empty() &&
         decoding_.size() - idle + prefilling_.size() + shared_prefix_waits_.size() + admitted->size() <
             static_cast<size_t>(options_.max_batch)) {
    admitted->push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  if (options_.metrics != nullptr) options_.metrics->queue_depth->Set(static_cast<double>(queue_.size()));
  return true;
}

void Scheduler::RetireStoppedPrompts(Clock::time_point now) {
  for (auto it = prefilling_.begin(); it != prefilling_.end();) {
    if (Stopping(*(*it)->r->job, now)) {
      std::unique_ptr<Prefilling> p = std::move(*it);
      it = prefilling_.erase(it);
      const absl::Status stop = StopStatus(*p->r->job);
      // The sequence keeps the prompt prefix absorbed so far.
      p->job->Finish(stop).IgnoreError();
      p->job.reset();
      PromptDone(std::move(p), stop);
    } else {
      ++it;
    }
  }
}

void Scheduler::RetireStoppedDecodes(Clock::time_point now) {
  for (auto it = decoding_.begin(); it != decoding_.end();) {
    if (Stopping(*(*it)->job, now) || Stalled(**it, now)) {
      Complete(**it, StopStatus(*(*it)->job));
      it = decoding_.erase(it);
    } else {
      ++it;
    }
  }
}

// The next token of every decoding sequence, then prompt runs of the
// prefilling ones within the step's token budget (at least one run per
// step, so prompts progress however many sequences decode).
//
// Decode rows run on Sequence::memory() under a SequenceHold each, from
// before the run is built until Append: a prefill on another thread (an
// RPC thread's CheckpointEngine::Prefill, e.g. SessionControl export of
// another session) may pick one of these sequences as a copy source
// through the prefix index (CheckpointEngine::CaptureOther); it try_locks
// it and, while held here, skips it instead of copying a memory this
// Forward writes. The prompt runs' sequences are held by their
// PrefillJobs. Deadlock-free: other threads only try_lock a sequence
// while holding another (engine.h, "Locks").
// Paused streams sit this step out.
Scheduler::StepBatch Scheduler::BuildBatch(Clock::time_point now) {
  static const int32_t kRow0 = 0;
  StepBatch b;
  b.holds.reserve(decoding_.size());
  for (auto& r : decoding_) {
    if (Paused(*r, now)) continue;
    b.stepping.push_back(r.get());
    b.holds.emplace_back(*r->seq);
    SequenceMemory* mem = r->seq->memory();
    SequenceRun run;
    run.memory = mem;
    run.start_pos = mem->next_pos();
    run.tokens = std::span<const TokenId>(&r->pending, 1);
    run.logit_rows = std::span<const int32_t>(&kRow0, 1);
    b.runs.push_back(run);
  }
  const size_t n_decode = b.runs.size();
  int64_t budget = options_.step_tokens - static_cast<int64_t>(n_decode);
  if (n_decode > 0 && options_.decode_step_tokens > 0) budget = std::min<int64_t>(budget, options_.decode_step_tokens);
  budget = std::max<int64_t>(budget, 1);
  for (Prefilling* p : PromptOrder()) {
    if (p->job->done()) continue;
    if (budget <= 0) {
      ++p->left_out;
      continue;
    }
    p->left_out = 0;
    SequenceRun run = p->job->NextRun(static_cast<int32_t>(budget));
    budget -= run.chunk != nullptr ? run.chunk->n_rows() : static_cast<int64_t>(run.tokens.size());
    b.runs.push_back(run);
    b.prompt_runs.push_back(p);
  }
  return b;
}

std::vector<Scheduler::Prefilling*> Scheduler::PromptOrder() const {
  std::vector<Prefilling*> order;
  order.reserve(prefilling_.size());
  for (const auto& p : prefilling_) order.push_back(p.get());
  auto left = [](const Prefilling* p) { return p->job->prompt().size() - p->job->absorbed(); };
  auto overdue = [](const Prefilling* p) { return p->left_out >= kPromptPatience; };
  // Stable: among the overdue, and among equal remainders, arrival order.
  std::stable_sort(order.begin(), order.end(), [&](const Prefilling* a, const Prefilling* b) {
    if (overdue(a) || overdue(b)) return overdue(a) && !overdue(b);
    return left(a) < left(b);
  });
  return order;
}

// b.out gets one result per run, built in place (no placeholder status per
// step: a status with a message is a heap allocation).
void Scheduler::RunBatch(StepBatch& b) {
  b.out.clear();
  if (b.runs.empty()) return;
  b.out.reserve(b.runs.size());
  if (const SchedulerMetrics* m = options_.metrics) {
    if (!b.stepping.empty()) m->batch_rows->Observe(static_cast<double>(b.stepping.size()));
  }
  absl::StatusOr<std::vector<RunLogits>> all = model_.backend->Forward(b.runs);
  if (all.ok()) {
    for (size_t i = 0; i < b.runs.size(); ++i) {
      if (i < all->size()) {
        b.out.emplace_back(std::move((*all)[i]));
      } else {
        b.out.emplace_back(absl::InternalError("the backend returned no logits for this run"));
      }
    }
    return;
  }
  // Isolate the failing run(s): one request's error must not end the others.
  for (const SequenceRun& run : b.runs) {
    absl::StatusOr<std::vector<RunLogits>> one = model_.backend->Forward(std::span<const SequenceRun>(&run, 1));
    if (one.ok()) {
      b.out.emplace_back(std::move((*one)[0]));
    } else {
      b.out.emplace_back(one.status());
    }
  }
}

void Scheduler::FinishDecodeRows(StepBatch& b) {
  for (size_t i = 0; i < b.stepping.size(); ++i) {
    Running& r = *b.stepping[i];
    absl::Status st = b.out[i].status();
    if (st.ok()) st = b.holds[i].Append(std::span<const TokenId>(&r.pending, 1));
    b.holds[i].Release();  // before Complete, whose engine calls take the sequence's lock
    if (!st.ok()) {
      Complete(r, st);
      r.over = true;
      continue;
    }
    r.over = Step(r, b.out[i]->row(0));
  }
  decoding_.erase(std::remove_if(decoding_.begin(), decoding_.end(), [](const auto& r) { return r->over; }),
                  decoding_.end());
}

// A finished prompt samples its first token and joins the decoding set for
// the next step.
void Scheduler::FinishPromptRuns(StepBatch& b) {
  const size_t n_decode = b.stepping.size();
  for (size_t k = 0; k < b.prompt_runs.size(); ++k) {
    Prefilling* p = b.prompt_runs[k];
    const size_t i = n_decode + k;
    absl::Status st = b.out[i].ok() ? p->job->Absorbed(*b.out[i]) : b.out[i].status();
    if (!st.ok()) p->error = st;
  }
  for (auto it = prefilling_.begin(); it != prefilling_.end();) {
    Prefilling& p = **it;
    if (!p.error.ok() || p.job->done()) {
      std::unique_ptr<Prefilling> own = std::move(*it);
      it = prefilling_.erase(it);
      absl::StatusOr<checkpoint::PrefillResult> res = own->job->Finish(own->error);
      own->job.reset();
      PromptDone(std::move(own), std::move(res));
    } else {
      ++it;
    }
  }
}

void Scheduler::PublishCounts() {
  absl::MutexLock lock(&mu_);
  n_decoding_ = decoding_.size();
  n_paused_ = CountPaused();
  if (options_.metrics != nullptr) options_.metrics->running_sequences->Set(static_cast<double>(n_decoding_));
}

void Scheduler::EndInFlight() {
  const absl::Status shutdown = absl::UnavailableError("server shutting down");
  for (auto& p : prefilling_) {
    p->job->Finish(shutdown).IgnoreError();
    p->job.reset();
    Retire(*p->r, shutdown);
  }
  prefilling_.clear();
  for (auto& r : decoding_) Retire(*r, shutdown);
  decoding_.clear();
  for (auto& job : shared_prefix_waits_.TakeAll()) EndUnstarted(*job, shutdown);
}

bool Scheduler::Step(Running& r, std::span<const float> logits) {
  GenerateJob& job = *r.job;
  absl::StatusOr<SampledToken> tok = r.sampler.Sample(logits);
  if (!tok.ok()) {
    Complete(r, tok.status());
    return true;
  }
  if (options_.forced_token) {
    if (std::optional<TokenId> forced = options_.forced_token(job, r.generated); forced.has_value()) tok->id = *forced;
  }
  const Clock::time_point now = Clock::now();
  if (r.generated == 0) r.first_token = now;
  if (const SchedulerMetrics* m = options_.metrics; m != nullptr && r.generated > 0) {
    m->inter_token->Observe(Seconds(r.last_token, now));
  }
  r.last_token = now;
  ++r.generated;

  TokenGenerated ev;
  ev.token = *tok;
  ev.logprobs = job.sampling.logprobs || job.sampling.top_logprobs > 0;
  std::optional<FinishReason> reason;  // none: the request goes on
  std::string matched;
  if (r.detok.has_value()) {
    std::string piece;
    r.detok->Push(tok->id, &piece).IgnoreError();  // ids come from the model's own vocabulary
    StopMatcher::Result sr = r.stops.Push(piece);
    ev.text = std::move(sr.emit);
    if (sr.stopped) {
      reason = FinishReason::kStopString;
      matched = sr.matched;
    }
  }
  job.streamed.push_back(tok->id);
  job.Emit(std::move(ev));
  if (const SchedulerMetrics* m = options_.metrics) m->generated_tokens->Increment();

  if (!reason.has_value()) {
    if (std::find(job.stop_tokens.begin(), job.stop_tokens.end(), tok->id) != job.stop_tokens.end()) {
      reason = FinishReason::kStopToken;
      matched = absl::StrCat(tok->id);
    } else if (!job.ignore_eos && model_.tokenizer != nullptr && model_.tokenizer->IsEndOfGeneration(tok->id) &&
               std::find(job.continue_tokens.begin(), job.continue_tokens.end(), tok->id) ==
                   job.continue_tokens.end()) {
      reason = FinishReason::kEndOfGeneration;
    } else if (r.generated >= job.max_tokens) {
      reason = FinishReason::kLength;
    } else if (r.seq->next_pos() + 1 >= model_.context_length) {
      // The pending token still needs a position, and the next one another.
      reason = FinishReason::kContextFull;
    }
  }
  if (!reason.has_value()) {
    r.pending = tok->id;
    return false;
  }
  // Finished: held-back text goes out with the final message.
  GenerationFinished& f = r.fin;
  f.reason = *reason;
  f.matched_stop = matched;
  if (*reason != FinishReason::kStopString && r.detok.has_value()) {
    std::string tail;
    r.detok->Flush(&tail);
    StopMatcher::Result sr = r.stops.Push(tail);
    std::string text = sr.emit;
    if (sr.stopped) {
      f.reason = FinishReason::kStopString;
      f.matched_stop = sr.matched;
    } else {
      text += r.stops.Flush();
    }
    f.text = text;
  }
  Complete(r, absl::OkStatus());
  return true;
}

void Scheduler::Complete(Running& r, absl::Status status) {
  GenerateJob& job = *r.job;
  if (status.ok()) {
    GenerationFinished& f = r.fin;
    if (r.generated == 0) f.reason = FinishReason::kLength;
    f.stats = job.stats;
    f.completion_tokens = r.generated;
    f.queue_seconds = Seconds(job.received, r.prefill_start);
    f.prefill_seconds = Seconds(r.prefill_start, r.prefill_end);
    if (r.generated > 0) {
      f.time_to_first_token_seconds = Seconds(job.received, r.first_token);
      f.decode_seconds = Seconds(r.first_token, r.last_token);
      if (r.generated > 1 && f.decode_seconds > 0) {
        f.decode_tokens_per_second = (r.generated - 1) / f.decode_seconds;
      }
    }
    if (const SchedulerMetrics* m = options_.metrics) {
      if (r.generated > 0) m->time_to_first_token->Observe(f.time_to_first_token_seconds);
      if (f.decode_tokens_per_second > 0) m->decode_tokens_per_second->Observe(f.decode_tokens_per_second);
    }
    job.Emit(f);
  }
  Retire(r, std::move(status));
}

void Scheduler::Retire(Running& r, absl::Status status) {
  GenerateJob& job = *r.job;
  if (job.prefilled) {
    // A failed capture loses a cache entry, never correctness.
    model_.engine->EndGeneration(*r.seq).IgnoreError();
  }
  if (r.fresh != nullptr) {
    // Sessionless: the state stays findable by the shared prefix index.
    if (job.prefilled) model_.engine->Park(*r.fresh).IgnoreError();
    r.fresh.reset();
    r.seq = nullptr;
  }
  job.Finish(std::move(status));
}

}  // namespace cairn::service
