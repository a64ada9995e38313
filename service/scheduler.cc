#include "service/scheduler.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/model/detokenizer.h"
#include "service/metrics.h"
#include "service/models.h"
#include "service/stop_matcher.h"

namespace cairn::service {
namespace {

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

class FairBackend final : public Backend {
 public:
  explicit FairBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  const ModelInfo& info() const override { return inner_->info(); }
  absl::StatusOr<std::unique_ptr<SequenceMemory>> NewSequence() override {
    return inner_->NewSequence();
  }
  absl::StatusOr<std::vector<RunLogits>> Forward(std::span<const SequenceRun> batch) override {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t ticket = next_++;
    cv_.wait(lock, [&] { return serving_ == ticket; });
    lock.unlock();
    absl::StatusOr<std::vector<RunLogits>> out = inner_->Forward(batch);
    lock.lock();
    ++serving_;
    cv_.notify_all();
    return out;
  }

 private:
  std::unique_ptr<Backend> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ = 0;
  uint64_t serving_ = 0;
};

}  // namespace

std::unique_ptr<Backend> MakeFairBackend(std::unique_ptr<Backend> inner) {
  return std::make_unique<FairBackend>(std::move(inner));
}

// ---------------------------------------------------------------------------
// GenerateJob

void GenerateJob::RequestStop(StopReason reason) {
  int expected = 0;
  stop_.compare_exchange_strong(expected, static_cast<int>(reason));
  cancel_flag.store(true);
}

std::vector<v1::GenerateResponse> GenerateJob::WaitEvents(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !events_.empty() || done_; });
  std::vector<v1::GenerateResponse> out(std::make_move_iterator(events_.begin()),
                                        std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

bool GenerateJob::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && events_.empty();
}

absl::Status GenerateJob::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void GenerateJob::Emit(v1::GenerateResponse event) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(event));
  cv_.notify_all();
}

void GenerateJob::Finish(absl::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return;
  done_ = true;
  status_ = std::move(status);
  cv_.notify_all();
}

// ---------------------------------------------------------------------------
// Scheduler

struct Scheduler::Running {
  std::shared_ptr<GenerateJob> job;
  Sampler sampler;
  std::optional<StreamingDetokenizer> detok;
  StopMatcher stops;
  TokenId pending = 0;  // sampled and streamed, not yet absorbed
  Clock::time_point prefill_start, prefill_end, first_token, last_token;
  int32_t generated = 0;
  v1::Finished fin;  // reason, matched stop and trailing text; Complete adds the rest

  Running(std::shared_ptr<GenerateJob> j, const Tokenizer* tok)
      : job(std::move(j)), sampler(job->sampling), stops(job->stop_strings) {
    // Output continues the prompt: SPM's leading space on the first token
    // is a real space here, not the tokenizer's prefix.
    DetokenizeOptions opt;
    opt.strip_space_prefix = false;
    if (tok != nullptr && job->stream_text) detok.emplace(*tok, opt);
  }
};

Scheduler::Scheduler(ServedModel* model, const SchedulerOptions& options)
    : model_(model), options_(options) {}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(ServedModel* model,
                                                             const SchedulerOptions& options) {
  if (model == nullptr || model->engine == nullptr) {
    return absl::InvalidArgumentError("scheduler needs a loaded model");
  }
  if (options.max_batch <= 0 || options.max_queue <= 0) {
    return absl::InvalidArgumentError("max_batch and max_queue must be positive");
  }
  std::unique_ptr<Scheduler> s(new Scheduler(model, options));
  s->prefill_thread_ = std::thread([p = s.get()] { p->PrefillLoop(); });
  s->decode_thread_ = std::thread([p = s.get()] { p->DecodeLoop(); });
  return s;
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& j : queue_) j->RequestStop(StopReason::kShutdown);
    for (auto& r : running_) r->job->RequestStop(StopReason::kShutdown);
  }
  cv_.notify_all();
  prefill_thread_.join();
  decode_thread_.join();
  for (auto& j : queue_) j->Finish(absl::UnavailableError("server shutting down"));
  for (auto& r : running_) r->job->Finish(absl::UnavailableError("server shutting down"));
}

absl::Status Scheduler::Submit(std::shared_ptr<GenerateJob> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("server shutting down");
    if (queue_.size() >= static_cast<size_t>(options_.max_queue)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "model '", model_->name, "' has ", queue_.size(), " requests waiting (limit ",
          options_.max_queue, ")"));
    }
    queue_.push_back(std::move(job));
    if (options_.metrics) options_.metrics->queue_depth->Set(static_cast<double>(queue_.size()));
  }
  cv_.notify_all();
  return absl::OkStatus();
}

size_t Scheduler::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

size_t Scheduler::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return decoding_;
}

absl::Status Scheduler::StopStatus(const GenerateJob& job) const {
  switch (job.stop_reason()) {
    case StopReason::kDeadline: return absl::DeadlineExceededError("deadline exceeded");
    case StopReason::kShutdown: return absl::UnavailableError("server shutting down");
    default: return absl::CancelledError("request cancelled");
  }
}

void Scheduler::PrefillLoop() {
  for (;;) {
    std::shared_ptr<GenerateJob> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ ||
               (!queue_.empty() && decoding_ < static_cast<size_t>(options_.max_batch));
      });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      ++prefilling_;
      if (options_.metrics) options_.metrics->queue_depth->Set(static_cast<double>(queue_.size()));
    }
    auto done_prefilling = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      --prefilling_;
    };
    if (job->stop_reason() != StopReason::kNone) {
      job->Finish(StopStatus(*job));
      done_prefilling();
      continue;
    }
    auto r = std::make_unique<Running>(job, model_->tokenizer.get());
    r->prefill_start = Clock::now();
    checkpoint::Prompt prompt;
    absl::Status st = job->prompt.ToPrompt(model_->info().n_embd, &prompt);
    absl::StatusOr<checkpoint::PrefillResult> res = absl::UnknownError("not run");
    if (!st.ok()) {
      res = st;
    } else {
      checkpoint::PrefillControl control;
      control.cancel = &job->cancel_flag;
      res = model_->engine->Prefill(*job->seq, prompt, control);
    }
    r->prefill_end = Clock::now();
    if (!res.ok()) {
      job->Finish(job->stop_reason() != StopReason::kNone ? StopStatus(*job) : res.status());
      done_prefilling();
      continue;
    }
    job->prefilled = true;
    job->stats = res->stats;
    if (Metrics* m = options_.metrics) {
      m->prompt_tokens->Increment(res->stats.prompt_positions);
      m->reused_tokens->Increment(res->stats.reused);
      m->recomputed_tokens->Increment(res->stats.recomputed);
    }
    {
      v1::GenerateResponse ev;
      v1::PromptInfo* p = ev.mutable_prompt();
      p->set_prompt_tokens(static_cast<int32_t>(res->stats.prompt_symbols));
      p->set_prompt_positions(res->stats.prompt_positions);
      p->set_reused_tokens(res->stats.reused);
      p->set_recomputed_tokens(res->stats.recomputed);
      p->set_restored_checkpoint_pos(res->stats.restored_pos);
      p->set_reuse_source(res->stats.reused == 0 ? "none"
                                                 : checkpoint::ReuseKindName(res->stats.source));
      p->set_session_id(job->session_id);
      job->Emit(std::move(ev));
    }
    r->sampler.AddHistory(job->prompt.Tokens());
    bool over = false;
    if (job->max_tokens == 0) {
      Complete(*r, absl::OkStatus());
      over = true;
    } else {
      over = Step(*r, res->logits);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --prefilling_;
      if (!over) {
        running_.push_back(std::move(r));
        ++decoding_;
      }
      if (options_.metrics) options_.metrics->running_sequences->Set(static_cast<double>(decoding_));
    }
    cv_.notify_all();
  }
}

void Scheduler::DecodeLoop() {
  std::vector<std::unique_ptr<Running>> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !running_.empty(); });
      if (stopping_) return;
      batch = std::move(running_);
      running_.clear();
    }
    const size_t taken = batch.size();
    // Stopped requests leave before the step (within one step of the stop).
    std::vector<std::unique_ptr<Running>> live;
    for (auto& r : batch) {
      if (r->job->stop_reason() != StopReason::kNone) {
        Complete(*r, StopStatus(*r->job));
      } else {
        live.push_back(std::move(r));
      }
    }
    batch.clear();
    std::vector<SequenceRun> runs(live.size());
    static const int32_t kRow0 = 0;
    for (size_t i = 0; i < live.size(); ++i) {
      SequenceMemory* mem = live[i]->job->seq->memory();
      runs[i].memory = mem;
      runs[i].start_pos = mem->next_pos();
      runs[i].tokens = std::span<const TokenId>(&live[i]->pending, 1);
      runs[i].logit_rows = std::span<const int32_t>(&kRow0, 1);
    }
    std::vector<absl::StatusOr<std::vector<float>>> logits(live.size(), absl::UnknownError(""));
    if (!runs.empty()) {
      if (Metrics* m = options_.metrics) m->batch_rows->Observe(static_cast<double>(runs.size()));
      // Batched decode on Sequence::memory() then CheckpointEngine::Append, as
      // engine.h prescribes. Known gap (engine side): a concurrent Prefill of
      // another sequence may copy one of these memories through the prefix
      // index (CaptureOther) while this Forward writes it, since the engine's
      // per-sequence lock is not held here; the fix is an engine call that
      // decodes a batch of sequences under their locks.
      absl::StatusOr<std::vector<RunLogits>> out = model_->backend->Forward(runs);
      if (out.ok()) {
        for (size_t i = 0; i < live.size(); ++i) logits[i] = std::move((*out)[i].values);
      } else {
        // Isolate the failing sequence(s): one request's error must not end
        // the others.
        for (size_t i = 0; i < live.size(); ++i) {
          absl::StatusOr<std::vector<RunLogits>> one =
              model_->backend->Forward(std::span<const SequenceRun>(&runs[i], 1));
          if (one.ok()) {
            logits[i] = std::move((*one)[0].values);
          } else {
            logits[i] = one.status();
          }
        }
      }
    }
    std::vector<std::unique_ptr<Running>> keep;
    for (size_t i = 0; i < live.size(); ++i) {
      Running& r = *live[i];
      if (!logits[i].ok()) {
        Complete(r, logits[i].status());
        continue;
      }
      if (absl::Status st = model_->engine->Append(*r.job->seq, std::span<const TokenId>(&r.pending, 1));
          !st.ok()) {
        Complete(r, st);
        continue;
      }
      if (!Step(r, *logits[i])) keep.push_back(std::move(live[i]));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      decoding_ -= taken - keep.size();
      for (auto& r : running_) keep.push_back(std::move(r));
      running_ = std::move(keep);
      if (options_.metrics) options_.metrics->running_sequences->Set(static_cast<double>(decoding_));
    }
    cv_.notify_all();  // the prefill thread may admit again
  }
}

bool Scheduler::Step(Running& r, std::span<const float> logits) {
  GenerateJob& job = *r.job;
  absl::StatusOr<SampledToken> tok = r.sampler.Sample(logits);
  if (!tok.ok()) {
    Complete(r, tok.status());
    return true;
  }
  const Clock::time_point now = Clock::now();
  if (r.generated == 0) r.first_token = now;
  r.last_token = now;
  ++r.generated;

  v1::GenerateResponse ev;
  v1::TokenDelta* d = ev.mutable_token();
  d->set_id(tok->id);
  if (job.sampling.logprobs || job.sampling.top_logprobs > 0) {
    d->set_logprob(tok->logprob);
    for (const auto& [id, lp] : tok->top) {
      v1::TopLogprob* t = d->add_top_logprobs();
      t->set_id(id);
      t->set_logprob(lp);
    }
  }
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  std::string matched;
  if (r.detok.has_value()) {
    std::string piece;
    r.detok->Push(tok->id, &piece).IgnoreError();  // ids come from the model's own vocabulary
    StopMatcher::Result sr = r.stops.Push(piece);
    d->set_text(std::move(sr.emit));
    if (sr.stopped) {
      reason = v1::FINISH_REASON_STOP_STRING;
      matched = sr.matched;
    }
  }
  job.streamed.push_back(tok->id);
  job.Emit(std::move(ev));
  if (Metrics* m = options_.metrics) m->generated_tokens->Increment();

  if (reason == v1::FINISH_REASON_UNSPECIFIED) {
    if (std::find(job.stop_tokens.begin(), job.stop_tokens.end(), tok->id) != job.stop_tokens.end()) {
      reason = v1::FINISH_REASON_STOP_TOKEN;
      matched = absl::StrCat(tok->id);
    } else if (!job.ignore_eos && model_->tokenizer != nullptr &&
               model_->tokenizer->IsEndOfGeneration(tok->id)) {
      reason = v1::FINISH_REASON_END_OF_GENERATION;
    } else if (r.generated >= job.max_tokens) {
      reason = v1::FINISH_REASON_LENGTH;
    } else if (job.seq->next_pos() + 1 >= model_->context_length()) {
      // The pending token still needs a position, and the next one another.
      reason = v1::FINISH_REASON_CONTEXT_FULL;
    }
  }
  if (reason == v1::FINISH_REASON_UNSPECIFIED) {
    r.pending = tok->id;
    return false;
  }
  // Finished: held-back text goes out with the final message.
  v1::Finished* f = &r.fin;
  f->set_reason(reason);
  f->set_matched_stop(matched);
  if (reason != v1::FINISH_REASON_STOP_STRING && r.detok.has_value()) {
    std::string tail;
    r.detok->Flush(&tail);
    StopMatcher::Result sr = r.stops.Push(tail);
    std::string text = sr.emit;
    if (sr.stopped) {
      f->set_reason(v1::FINISH_REASON_STOP_STRING);
      f->set_matched_stop(sr.matched);
    } else {
      text += r.stops.Flush();
    }
    f->set_text(text);
  }
  Complete(r, absl::OkStatus());
  return true;
}

void Scheduler::Complete(Running& r, absl::Status status) {
  GenerateJob& job = *r.job;
  if (status.ok()) {
    v1::GenerateResponse fin;
    v1::Finished* f = fin.mutable_finished();
    *f = std::move(r.fin);
    if (r.generated == 0) f->set_reason(v1::FINISH_REASON_LENGTH);
    v1::Usage* u = f->mutable_usage();
    u->set_prompt_tokens(static_cast<int32_t>(job.stats.prompt_symbols));
    u->set_reused_tokens(job.stats.reused);
    u->set_recomputed_tokens(job.stats.recomputed);
    u->set_completion_tokens(r.generated);
    v1::Timings* t = f->mutable_timings();
    t->set_queue_seconds(Seconds(job.received, r.prefill_start));
    t->set_prefill_seconds(Seconds(r.prefill_start, r.prefill_end));
    if (r.generated > 0) {
      t->set_time_to_first_token_seconds(Seconds(job.received, r.first_token));
      const double dec = Seconds(r.first_token, r.last_token);
      t->set_decode_seconds(dec);
      if (r.generated > 1 && dec > 0) t->set_decode_tokens_per_second((r.generated - 1) / dec);
    }
    if (Metrics* m = options_.metrics) {
      m->requests_ok->Increment();
      if (r.generated > 0) m->time_to_first_token->Observe(t->time_to_first_token_seconds());
      if (t->decode_tokens_per_second() > 0) m->decode_tokens_per_second->Observe(t->decode_tokens_per_second());
    }
    job.Emit(std::move(fin));
  } else if (Metrics* m = options_.metrics) {
    m->requests_failed->Increment();
  }
  job.Finish(std::move(status));
}

}  // namespace cairn::service
