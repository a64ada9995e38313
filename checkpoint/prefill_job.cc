#include "checkpoint/prefill_job.h"

#include <algorithm>
#include <utility>

#include "checkpoint/capturer.h"
#include "checkpoint/engine_stats.h"
#include "checkpoint/sequence_registry.h"
#include "checkpoint/sequence_state.h"

namespace cairn::checkpoint {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

PrefillJob::PrefillJob(std::shared_ptr<SequenceState> state, Capturer& capturer, SequenceRegistry& live,
                       EngineCounters& counters, bool snapshots_within_run)
    : state_(std::move(state)),
      capturer_(capturer),
      live_(live),
      counters_(counters),
      snapshots_within_run_(snapshots_within_run),
      lock_(state_->mu) {}

PrefillJob::~PrefillJob() {
  if (!finished_) Finish(absl::CancelledError("prefill job dropped")).IgnoreError();
}

bool PrefillJob::done() const { return !error_.ok() || i_ == prompt_.size(); }

void PrefillJob::CaptureDue() {
  SequenceState& s = *state_;
  s.mu.AssertHeld();  // lock_
  while (next_point_ < points_.size() && points_[next_point_].symbols <= i_) {
    const CapturePoint& pt = points_[next_point_++];
    if (pt.symbols != i_) continue;
    const bool spaced = pt.reason == CaptureReason::kSpaced;
    if (spaced && !capturer_.SpacedPointFits(s, spaced_bytes_)) continue;
    if (spaced) spaced_bytes_ += s.memory->Bytes(SnapshotScope::kCheckpoint);
    const double cost = static_cast<double>(s.history.positions() - s.history.pos_after(s.newest_depth));
    // Capture failures (budget, a memory inside a chunk) only cost reuse later.
    if (!capturer_.CaptureAt(s, pt.reason, pt.full, pt.keep_logits ? &result_.logits : nullptr, cost, &result_.stats)
             .ok()) {
      counters_.CaptureFailed();
    }
  }
}

bool PrefillJob::AddSharedPoint(size_t symbols) {
  if (!capturer_.enabled() || !error_.ok() || symbols <= i_ || symbols > prompt_.size()) return false;
  auto at = std::lower_bound(points_.begin() + static_cast<std::ptrdiff_t>(next_point_), points_.end(), symbols,
                             [](const CapturePoint& p, size_t n) { return p.symbols < n; });
  if (at != points_.end() && at->symbols == symbols) {
    at->full = true;  // a checkpoint-scope snapshot serves only a sequence holding the prefix
    return true;
  }
  CapturePoint point;
  point.symbols = symbols;
  // Where two prompts part: the reason the policy gives such points too.
  point.reason = CaptureReason::kDivergence;
  point.full = true;
  points_.insert(at, point);
  return true;
}

void PrefillJob::PlanSnapshotRows(size_t end) {
  SequenceState& s = *state_;
  s.mu.AssertHeld();  // lock_
  const size_t state_bytes = s.memory->Bytes(SnapshotScope::kCheckpoint);
  Pos newest = s.history.pos_after(s.newest_depth);
  for (size_t k = next_point_; k < points_.size() && points_[k].symbols < end; ++k) {
    if (points_[k].symbols <= i_) continue;
    const bool spaced = points_[k].reason == CaptureReason::kSpaced;
    if (spaced && !capturer_.SpacedPointFits(s, spaced_bytes_)) continue;
    // Only the points the store would admit: the others are not worth a copy.
    const Pos pos = prompt_.pos_after(points_[k].symbols);
    PutInfo info;
    info.cost = std::max<double>(pos - newest, 1);
    info.reason = points_[k].reason;
    info.path_key = PathKey(s.tenant, prompt_.keys().subspan(0, points_[k].symbols));
    if (!capturer_.WorthCapturing(SnapshotScope::kCheckpoint, state_bytes, pos, info)) continue;
    newest = pos;
    if (spaced) spaced_bytes_ += state_bytes;
    snapshot_rows_.push_back(static_cast<int32_t>(points_[k].symbols - i_ - 1));
    snapshot_reasons_.push_back(points_[k].reason);
  }
}

SequenceRun PrefillJob::NextRun(int32_t max_tokens) {
  SequenceState& s = *state_;
  s.mu.AssertHeld();  // lock_
  const size_t n = prompt_.size();
  size_t end = i_ + 1;
  // Capture points inside a token run become its snapshot rows where the
  // backend supports them: one Forward call instead of one per point.
  const bool in_run = snapshots_within_run_ && !prompt_.is_chunk(i_);
  snapshot_rows_.clear();
  snapshot_reasons_.clear();
  if (!prompt_.is_chunk(i_)) {
    size_t limit = std::min(n, i_ + static_cast<size_t>(std::max(max_tokens, 1)));
    // The run ends at the first point it cannot snapshot inside itself (a
    // full snapshot is taken between Forward calls).
    for (size_t k = next_point_; k < points_.size(); ++k) {
      if (points_[k].symbols > i_ && (!in_run || points_[k].full)) {
        limit = std::min(limit, points_[k].symbols);
        break;
      }
    }
    while (end < limit && !prompt_.is_chunk(end)) ++end;
  }
  if (in_run) PlanSnapshotRows(end);
  run_end_ = end;
  SequenceRun run;
  run.memory = s.memory.get();
  run.start_pos = s.memory->next_pos();
  int32_t rows = 1;
  if (prompt_.is_chunk(i_)) {
    run.chunk = &prompt_.chunk(i_);
    rows = run.chunk->n_rows();
  } else {
    tokens_.clear();
    for (size_t k = i_; k < end; ++k) tokens_.push_back(prompt_.token(k));
    run.tokens = tokens_;
    rows = static_cast<int32_t>(tokens_.size());
  }
  last_row_ = rows - 1;
  if (end == n) run.logit_rows = std::span<const int32_t>(&last_row_, 1);
  run.snapshot_rows = snapshot_rows_;
  run_started_ = std::chrono::steady_clock::now();
  return run;
}

absl::Status PrefillJob::Absorbed(RunLogits& logits) {
  SequenceState& s = *state_;
  s.mu.AssertHeld();  // lock_
  if (run_end_ <= i_ || s.memory->next_pos() != prompt_.pos_after(run_end_)) {
    return absl::FailedPreconditionError("Absorbed without a successful Forward of NextRun's run");
  }
  result_.stats.forward_seconds += SecondsSince(run_started_);
  ++result_.stats.forward_calls;
  const bool have_snapshots = logits.snapshots.size() == snapshot_rows_.size();
  size_t snap = 0;
  for (size_t k = i_; k < run_end_; ++k) {
    s.history.Push(prompt_.keys()[k], prompt_.pos_after(k + 1) - prompt_.pos_after(k));
    if (snap < snapshot_rows_.size() && static_cast<size_t>(snapshot_rows_[snap]) == k - i_) {
      const auto t0 = std::chrono::steady_clock::now();
      const double cost = static_cast<double>(s.history.positions() - s.history.pos_after(s.newest_depth));
      // As in CaptureDue: a checkpoint that is not kept only costs reuse later.
      if (!have_snapshots ||
          !capturer_
               .Keep(s, snapshot_reasons_[snap], std::move(logits.snapshots[snap]), nullptr, cost, &result_.stats, t0)
               .ok()) {
        counters_.CaptureFailed();
      }
      ++snap;
    }
  }
  result_.stats.recomputed += prompt_.pos_after(run_end_) - prompt_.pos_after(i_);
  i_ = run_end_;
  if (i_ == prompt_.size()) {
    if (logits.n_rows < 1) return absl::InvalidArgumentError("the prompt's last row has no logits");
    const std::span<const float> row = logits.row(0);
    result_.logits.assign(row.begin(), row.end());
  }
  CaptureDue();
  return absl::OkStatus();
}

absl::StatusOr<PrefillResult> PrefillJob::Finish(absl::Status error) {
  if (finished_) return absl::FailedPreconditionError("prefill job already finished");
  finished_ = true;
  SequenceState& s = *state_;
  s.mu.AssertHeld();  // lock_, released below
  if (error.ok()) error = error_;
  if (error.ok() && i_ != prompt_.size()) error = absl::CancelledError("prompt processing cancelled");
  if (error.ok()) {
    s.logits = result_.logits;
    s.logits_depth = prompt_.size();
  }
  live_.Publish(s);
  counters_.PromptEnded(result_.stats);
  if (lock_.owns_lock()) lock_.unlock();
  if (!error.ok()) return error;
  return std::move(result_);
}

}  // namespace cairn::checkpoint
