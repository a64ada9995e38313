#include "checkpoint/engine.h"

#include <chrono>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "checkpoint/capturer.h"
#include "checkpoint/reuse_planner.h"
#include "checkpoint/sequence_registry.h"

namespace cairn::checkpoint {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The policy's options for this backend: spaced points wider where each
// one splits a Forward call.
PolicyOptions PolicyFor(const ModelInfo& info, const CheckpointOptions& options) {
  PolicyOptions p = options.policy();
  if (!info.snapshots_within_run) p.spaced_min_scale = kSplitSpacedScale;
  return p;
}

}  // namespace

CheckpointEngine::CheckpointEngine(Backend* backend, std::shared_ptr<CheckpointStore> store,
                                   std::unique_ptr<PrefixIndex> index, const CheckpointOptions& options)
    : backend_(backend),
      store_(std::move(store)),
      index_(std::move(index)),
      options_(options),
      policy_(backend->info().caps, PolicyFor(backend->info(), options)),
      live_(std::make_unique<SequenceRegistry>(*index_, enabled())),
      capturer_(std::make_unique<Capturer>(store_.get(), *index_, policy_, *live_, counters_, enabled())),
      planner_(std::make_unique<ReusePlanner>(*backend_, store_.get(), *live_, *capturer_, counters_, enabled())) {}

absl::StatusOr<std::unique_ptr<CheckpointEngine>> CheckpointEngine::Create(Backend* backend,
                                                                           std::shared_ptr<CheckpointStore> store,
                                                                           const CheckpointOptions& options) {
  if (backend == nullptr) return absl::InvalidArgumentError("checkpoint engine needs a backend");
  if (options.enabled && store == nullptr) {
    return absl::InvalidArgumentError("checkpointing is on but no store was given");
  }
  if (options.prefill_chunk <= 0 || options.every_n < 0 || options.min_branch_preserve < 0) {
    return absl::InvalidArgumentError("bad checkpoint options");
  }
  if (absl::StatusOr<std::shared_ptr<RetentionPolicy>> r = MakeRetention(options.cache_policy); !r.ok()) {
    return r.status();
  }
  absl::StatusOr<std::unique_ptr<PrefixIndex>> index = PrefixIndex::Create();
  if (!index.ok()) return index.status();
  std::unique_ptr<CheckpointEngine> engine(new CheckpointEngine(backend, std::move(store), std::move(*index), options));
  if (engine->store_ != nullptr) {
    PrefixIndex* idx = engine->index_.get();
    Capturer* capturer = engine->capturer_.get();
    engine->listener_ = engine->store_->AddDropListener([capturer](CheckpointId id) { capturer->Forget(id); });
    engine->branch_counter_ = engine->store_->AddBranchCounter([idx](CheckpointId id) { return idx->Branches(id); });
    engine->ReindexRecovered();
  }
  return engine;
}

CheckpointEngine::~CheckpointEngine() {
  if (store_ != nullptr && listener_ != 0) store_->RemoveDropListener(listener_);
  if (store_ != nullptr && branch_counter_ != 0) store_->RemoveBranchCounter(branch_counter_);
}

void CheckpointEngine::ReindexRecovered() {
  // This model's snapshot layout, from an empty sequence's snapshot.
  absl::StatusOr<std::unique_ptr<SequenceMemory>> probe = backend_->NewSequence();
  if (!probe.ok()) return;
  absl::StatusOr<Snapshot> empty = (*probe)->Capture(SnapshotScope::kFull);
  if (!empty.ok()) return;
  capturer_->ReindexRecovered(empty->layout);
}

absl::StatusOr<std::unique_ptr<Sequence>> CheckpointEngine::NewSequence(const std::string& tenant) {
  absl::StatusOr<std::unique_ptr<SequenceMemory>> memory = backend_->NewSequence();
  if (!memory.ok()) return memory.status();
  return std::unique_ptr<Sequence>(new Sequence(this, live_->Add(tenant, std::move(*memory))));
}

absl::StatusOr<std::unique_ptr<Sequence>> CheckpointEngine::Fork(Sequence& source) {
  SequenceState& src = *source.state_;
  SequenceLock src_lock(src.mu);
  absl::StatusOr<std::unique_ptr<Sequence>> fork = NewSequence(src.tenant);
  if (!fork.ok()) return fork.status();
  SequenceState& dst = *(*fork)->state_;
  SequenceLock dst_lock(dst.mu);  // new: nobody else holds it
  if (src.memory->next_pos() > 0) {
    absl::StatusOr<Snapshot> snap = src.memory->Capture(SnapshotScope::kFull);
    if (!snap.ok()) return snap.status();
    if (absl::Status s = dst.memory->Restore(*snap); !s.ok()) return s;
  }
  dst.isolated = src.isolated;
  dst.history = src.history;
  dst.logits = src.logits;
  dst.logits_depth = src.logits_depth;
  dst.newest_depth = src.newest_depth;
  return fork;
}

absl::StatusOr<CheckpointEngine::Exported> CheckpointEngine::Export(Sequence& seq) {
  SequenceState& s = *seq.state_;
  SequenceLock lock(s.mu);
  absl::StatusOr<Snapshot> snap = s.memory->Capture(SnapshotScope::kFull);
  if (!snap.ok()) return snap.status();
  return Exported{std::move(*snap), s.history};
}

absl::StatusOr<std::unique_ptr<Sequence>> CheckpointEngine::Import(const Exported& exported,
                                                                   const std::string& tenant) {
  if (exported.snapshot.scope != SnapshotScope::kFull || exported.snapshot.pos != exported.history.positions()) {
    return absl::InvalidArgumentError("export is not a full snapshot at the end of its history");
  }
  absl::StatusOr<std::unique_ptr<Sequence>> seq = NewSequence(tenant);
  if (!seq.ok()) return seq.status();
  SequenceState& s = *(*seq)->state_;
  SequenceLock lock(s.mu);  // new: nobody else holds it
  if (absl::Status st = s.memory->Restore(exported.snapshot); !st.ok()) return st;
  s.history = exported.history;
  return seq;
}

void CheckpointEngine::Isolate(Sequence& seq) {
  SequenceState& s = *seq.state_;
  SequenceLock lock(s.mu);
  live_->Unpublish(s.live_id);
  if (s.isolated) return;
  // 128 random bits after a byte no tenant derived from a caller holds: no
  // other sequence can share this partition except by forking this one.
  std::random_device rd;
  s.tenant = absl::StrCat(s.tenant, std::string("\0isolated:", 10), absl::Hex(rd()), absl::Hex(rd()), absl::Hex(rd()),
                          absl::Hex(rd()));
  s.isolated = true;
}

absl::Status CheckpointEngine::Park(Sequence& seq) {
  SequenceState& s = *seq.state_;
  SequenceLock lock(s.mu);
  return capturer_->Park(s, CaptureReason::kParked);
}

void CheckpointEngine::Unregister(SequenceState& s) {
  // Never wait here: a sequence still held (a job its owner forgot) is just
  // not parked.
  if (enabled() && policy_.options().park_dropped && s.mu.TryLock()) {
    capturer_->Park(s, CaptureReason::kDropped).IgnoreError();
    s.mu.Unlock();
  }
  live_->Remove(s.live_id);
}

size_t CheckpointEngine::LiveSequences() const { return live_->size(); }

EngineStats CheckpointEngine::stats() const { return counters_.Get(); }

absl::Status CheckpointEngine::Validate(const Prompt& prompt) const {
  const ModelInfo& info = backend_->info();
  if (prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt.is_chunk(i)) {
      if (!info.accepts_embeddings) {
        return absl::InvalidArgumentError(absl::StrCat("model ", info.name, " does not take embedding chunks"));
      }
      // The chunk key hashed n_rows * n_embd floats; Forward reads as many.
      continue;
    }
    const TokenId t = prompt.token(i);
    if (t < 0 || t >= info.n_vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", t, " at ", i, " is outside the vocabulary [0, ", info.n_vocab, ")"));
    }
  }
  if (info.n_ctx_train > 0 && prompt.positions() > info.n_ctx_train) {
    return absl::ResourceExhaustedError(
        absl::StrCat("prompt of ", prompt.positions(), " positions exceeds the context of ", info.n_ctx_train));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PrefillJob>> CheckpointEngine::StartPrefill(Sequence& seq, const Prompt& prompt) {
  if (absl::Status st = Validate(prompt); !st.ok()) return st;
  std::unique_ptr<PrefillJob> job(
      new PrefillJob(seq.state_, *capturer_, *live_, counters_, backend_->info().snapshots_within_run));
  SequenceState& s = *job->state_;
  s.mu.AssertHeld();  // the job's lock
  if (s.memory->next_pos() != s.history.positions()) {
    job->finished_ = true;  // nothing to publish: the caller broke the sequence
    return absl::FailedPreconditionError(absl::StrCat("sequence memory is at ", s.memory->next_pos(),
                                                      " but its history ends at ", s.history.positions(),
                                                      ": call Append after running Forward on it"));
  }
  job->prompt_ = prompt;
  PrefillStats& stats = job->result_.stats;
  stats.prompt_symbols = prompt.size();
  stats.prompt_positions = prompt.positions();
  const size_t n = prompt.size();
  if (enabled()) {
    store_->BeginRequest();
    job->match_ = index_->Lookup(s.tenant, prompt.keys());
  }
  const IndexMatch& match = job->match_;
  const size_t live_common = CommonPrefix(s.history.keys(), prompt.keys());

  // Choose and apply the best reuse, then tell the store what it was worth
  // and what would have served further.
  const auto t_restore = std::chrono::steady_clock::now();
  ReusePlanner::Restored restored = planner_->Restore(s, prompt, match, live_common, job->excluded_);
  const ReusePlan& chosen = restored.chosen;
  planner_->CreditRestored(restored, prompt);
  planner_->NoteMissed(s, prompt, match, live_common);
  const size_t i = s.history.size();
  job->i_ = i;
  if (s.logits_depth > i) {
    s.logits.clear();
    s.logits_depth = 0;
  }
  stats.source = chosen.c.kind;
  if (chosen.c.kind != ReuseKind::kLive) {
    stats.restored_pos = chosen.restored_pos;
    stats.restore_seconds = SecondsSince(t_restore);
    counters_.Restored(stats.restore_seconds);
  }
  stats.reused = prompt.pos_after(i);
  capturer_->StartPrompt(s, n, match,
                         chosen.c.kind == ReuseKind::kLive ? std::nullopt : std::optional(chosen.restored_depth));

  if (i == n) {  // full reuse with logits: no forward pass at all
    if (restored.logits.size() != static_cast<size_t>(backend_->info().n_vocab)) {
      job->error_ = absl::InternalError("reused logits have the wrong size");
      return job;
    }
    stats.logits_from_checkpoint = true;
    job->result_.logits = std::move(restored.logits);
    return job;
  }
  job->points_ = capturer_->PlanPrefill(s, job->prompt_, i, match, job->excluded_, live_common);
  job->CaptureDue();
  return job;
}

absl::StatusOr<PrefillResult> CheckpointEngine::Prefill(Sequence& seq, const Prompt& prompt,
                                                        const PrefillControl& control) {
  absl::StatusOr<std::unique_ptr<PrefillJob>> started = StartPrefill(seq, prompt);
  if (!started.ok()) return started.status();
  PrefillJob& job = **started;
  while (!job.done()) {
    if (control.cancel != nullptr && control.cancel->load(std::memory_order_relaxed)) {
      return job.Finish(absl::CancelledError("prompt processing cancelled"));
    }
    SequenceRun run = job.NextRun(options_.prefill_chunk);
    absl::StatusOr<std::vector<RunLogits>> out = backend_->Forward(std::span<const SequenceRun>(&run, 1));
    if (!out.ok()) return job.Finish(out.status());  // memory unchanged: history still matches
    if (absl::Status st = job.Absorbed((*out)[0]); !st.ok()) return job.Finish(st);
  }
  return job.Finish();
}

absl::StatusOr<std::vector<float>> CheckpointEngine::Decode(Sequence& seq, TokenId token) {
  const ModelInfo& info = backend_->info();
  if (token < 0 || token >= info.n_vocab) {
    return absl::InvalidArgumentError(absl::StrCat("token id ", token, " is outside the vocabulary"));
  }
  SequenceState& s = *seq.state_;
  SequenceLock lock(s.mu);
  SequenceRun run;
  run.memory = s.memory.get();
  run.start_pos = s.memory->next_pos();
  run.tokens = std::span<const TokenId>(&token, 1);
  const int32_t row = 0;
  run.logit_rows = std::span<const int32_t>(&row, 1);
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<RunLogits>> out = backend_->Forward(std::span<const SequenceRun>(&run, 1));
  if (!out.ok()) return out.status();
  s.history.Push(static_cast<SymbolKey>(static_cast<uint32_t>(token)), 1);
  counters_.Forwarded(SecondsSince(t0));
  capturer_->DuringGeneration(s);
  const std::span<const float> r = (*out)[0].row(0);
  return std::vector<float>(r.begin(), r.end());
}

absl::Status CheckpointEngine::Append(Sequence& seq, std::span<const TokenId> tokens) {
  SequenceHold hold(seq);
  return hold.Append(tokens);
}

absl::Status CheckpointEngine::AppendHeld(SequenceState& s, std::span<const TokenId> tokens) {
  if (s.memory->next_pos() != s.history.positions() + static_cast<Pos>(tokens.size())) {
    return absl::FailedPreconditionError(absl::StrCat("sequence memory is at ", s.memory->next_pos(),
                                                      " but its history ends at ", s.history.positions(), " + ",
                                                      tokens.size(), " appended tokens"));
  }
  for (TokenId t : tokens) s.history.Push(static_cast<SymbolKey>(static_cast<uint32_t>(t)), 1);
  capturer_->DuringGeneration(s);
  return absl::OkStatus();
}

absl::Status CheckpointEngine::EndGeneration(Sequence& seq) {
  SequenceState& s = *seq.state_;
  SequenceLock lock(s.mu);
  capturer_->AfterGeneration(s);
  live_->Publish(s);
  return absl::OkStatus();
}

}  // namespace cairn::checkpoint
