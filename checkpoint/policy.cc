#include "checkpoint/policy.h"

#include <algorithm>
#include <limits>

namespace cairn::checkpoint {

const char* CaptureReasonName(CaptureReason reason) {
  switch (reason) {
    case CaptureReason::kMessageBoundary:
      return "message_boundary";
    case CaptureReason::kInterval:
      return "interval";
    case CaptureReason::kTail:
      return "tail";
    case CaptureReason::kPromptEnd:
      return "prompt_end";
    case CaptureReason::kAfterGeneration:
      return "after_generation";
    case CaptureReason::kDuringGeneration:
      return "during_generation";
    case CaptureReason::kBranch:
      return "branch";
    case CaptureReason::kDivergence:
      return "divergence";
    case CaptureReason::kParked:
      return "parked";
    case CaptureReason::kDropped:
      return "dropped";
    case CaptureReason::kSpaced:
      return "spaced";
  }
  return "unknown";
}

const char* ReuseKindName(ReuseKind kind) {
  switch (kind) {
    case ReuseKind::kLive:
      return "live";
    case ReuseKind::kCheckpointOnLive:
      return "checkpoint";
    case ReuseKind::kFullSnapshot:
      return "full_snapshot";
    case ReuseKind::kOtherSequence:
      return "other_sequence";
    case ReuseKind::kBaseAndCheckpoint:
      return "base_and_checkpoint";
  }
  return "unknown";
}

bool CheckpointPolicy::CanCut(const MemoryCapabilities& caps, Pos next_pos, Pos target) {
  if (target < 0 || target > next_pos) return false;
  if (target == next_pos || target == 0) return true;  // no-op and reset always work
  if (caps.truncatable) return true;
  return next_pos - target <= caps.rollback_window;
}

Pos CheckpointPolicy::TailSpacing(size_t checkpoint_bytes, size_t ram_budget, size_t sequences) const {
  return Widen(options_.tail_every, checkpoint_bytes, ram_budget, sequences);
}

Pos CheckpointPolicy::GenerationSpacing(size_t checkpoint_bytes, size_t ram_budget, size_t sequences) const {
  return Widen(options_.generation_every, checkpoint_bytes, ram_budget, sequences);
}

double CheckpointPolicy::PromptShare(size_t ram_budget, size_t sequences) const {
  if (!options_.budget_spacing) return -1;
  // Many live sequences divide the budget between them.
  const double share =
      std::min(options_.tail_budget_fraction, 1.0 / static_cast<double>(std::max<size_t>(sequences, 1)));
  return share * static_cast<double>(ram_budget);
}

int64_t CheckpointPolicy::PointsThatFit(size_t checkpoint_bytes, size_t ram_budget, size_t sequences) const {
  const double allowed = PromptShare(ram_budget, sequences);
  if (checkpoint_bytes == 0 || allowed < 0) return -1;
  return static_cast<int64_t>(allowed / static_cast<double>(checkpoint_bytes));
}

Pos CheckpointPolicy::Widen(Pos every, size_t checkpoint_bytes, size_t ram_budget, size_t sequences) const {
  if (every <= 0 || options_.tail_span <= 0) return every;
  const int64_t fit = PointsThatFit(checkpoint_bytes, ram_budget, sequences);
  if (fit < 0) return every;
  if (fit == 0) return 0;
  const int64_t points = (options_.tail_span + every - 1) / every;
  if (points <= fit) return every;
  return static_cast<Pos>((options_.tail_span + fit - 1) / fit);
}

Pos CheckpointPolicy::SpacedMark(Pos mark, int scale) const {
  if (options_.spaced_first <= 0 || scale <= 0 || mark < 0) return 0;
  const int64_t proportional = static_cast<int64_t>(static_cast<double>(mark) * options_.spaced_fraction);
  const int64_t gap = int64_t{scale} * std::max<int64_t>(options_.spaced_first, proportional);
  if (options_.every_n > 0 && gap > options_.every_n) return 0;  // the interval points are denser
  const int64_t next = int64_t{mark} + gap;
  return next > std::numeric_limits<Pos>::max() ? 0 : static_cast<Pos>(next);
}

int CheckpointPolicy::SpacedScale(Pos positions, size_t checkpoint_bytes, size_t ram_budget, size_t sequences) const {
  if (options_.spaced_first <= 0) return 0;
  const int64_t fit = PointsThatFit(checkpoint_bytes, ram_budget, sequences);
  const int least = std::max(options_.spaced_min_scale, 1);
  if (fit < 0) return least;
  if (fit == 0) return 0;
  // Doubling ends: once the first mark lies past the prompt, no mark counts.
  for (int scale = least;; scale *= 2) {
    int64_t marks = 0;
    for (Pos m = SpacedMark(0, scale); m > 0 && m < positions; m = SpacedMark(m, scale)) ++marks;
    if (marks <= fit) return scale;
  }
}

std::vector<CapturePoint> CheckpointPolicy::PlanPrefill(const Prompt& prompt, size_t start,
                                                        const std::function<bool(size_t)>& exists, Pos cut_window,
                                                        Pos tail_every, size_t divergence, int spaced_scale) const {
  std::vector<CapturePoint> points;
  if (!captures() || start > prompt.size()) return points;
  const bool diverges = options_.divergence_points && divergence > start && divergence <= prompt.size() &&
                        !(exists && exists(divergence));
  if (options_.placement == Placement::kMarconi) {
    if (diverges) points.push_back({divergence, CaptureReason::kDivergence, divergence == prompt.size()});
    return points;
  }
  const Pos n = options_.every_n;
  const Pos tail = tail_every >= 0 ? tail_every : options_.tail_every;
  // The last message starts after the last boundary before the prompt end.
  size_t last_start = 0;
  for (size_t m : prompt.message_ends()) {
    if (m < prompt.size()) last_start = m;
  }
  const Pos tail_from =
      std::max(prompt.pos_after(last_start), prompt.positions() - std::max<Pos>(options_.tail_span, 0));
  // Spaced marks only where the client marked nothing: a marked prompt gets
  // its points at the boundaries, where divergences happen.
  const int scale =
      last_start > 0 ? 0
                     : (spaced_scale >= 0 ? spaced_scale : (options_.spaced_first > 0 ? options_.spaced_min_scale : 0));
  Pos mark = SpacedMark(0, scale);
  while (mark > 0 && mark <= prompt.pos_after(start)) mark = SpacedMark(mark, scale);
  for (size_t s = start; s <= prompt.size(); ++s) {
    if (s == 0) continue;  // an empty sequence needs no snapshot
    bool marked = false;   // the symbol reaches a spaced mark
    for (; mark > 0 && mark <= prompt.pos_after(s); mark = SpacedMark(mark, scale)) marked = true;
    CapturePoint point{s, CaptureReason::kMessageBoundary, false};
    bool capture = false;
    if (s == prompt.size()) {
      point.reason = CaptureReason::kPromptEnd;
      point.keep_logits = true;
      capture = true;
    } else if (s > start && n > 0 && prompt.pos_after(s) / n > prompt.pos_after(s - 1) / n) {
      // The symbol crossed a multiple of n: first boundary at or after it.
      point.reason = CaptureReason::kInterval;
      capture = true;
    }
    if (!capture && s > start && s > last_start && tail > 0 && prompt.pos_after(s - 1) >= tail_from) {
      const Pos from = tail_from;
      if ((prompt.pos_after(s) - from) / tail > (prompt.pos_after(s - 1) - from) / tail) {
        point.reason = CaptureReason::kTail;
        capture = true;
      }
    }
    if (!capture && marked && !(tail > 0 && prompt.pos_after(s - 1) >= tail_from)) {
      point.reason = CaptureReason::kSpaced;  // tail points, where there are, are denser
      capture = true;
    }
    if (prompt.IsMessageEnd(s) && !capture) {
      point.reason = CaptureReason::kMessageBoundary;
      capture = true;
    }
    if (diverges && s == divergence) {
      // A shared prefix, whatever else the point is: the reason says so.
      point.reason = CaptureReason::kDivergence;
      capture = true;
    }
    if (!capture) continue;
    // Not spaced points: the later prompt that leaves one comes turns later,
    // when the ring has moved on past anything a cut could reach.
    if ((point.reason == CaptureReason::kTail || point.reason == CaptureReason::kInterval) &&
        prompt.positions() - prompt.pos_after(s) <= cut_window) {
      continue;
    }
    // The prompt end is captured even when a snapshot exists there if this
    // one keeps logits: the engine decides by asking `exists` with that in
    // mind, so the policy just skips existing points.
    if (exists && exists(s)) continue;
    points.push_back(point);
  }
  return points;
}

int CheckpointPolicy::ChooseRestore(std::span<const ReuseCandidate> candidates) {
  int best = -1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const ReuseCandidate& c = candidates[i];
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const ReuseCandidate& b = candidates[best];
    // A candidate with logits at the same position saves the last row too.
    auto effective = [](const ReuseCandidate& x) { return 2 * int64_t{x.positions} + x.has_logits; };
    if (effective(c) != effective(b)) {
      if (effective(c) > effective(b)) best = static_cast<int>(i);
      continue;
    }
    if (c.kind != b.kind) {
      if (c.kind < b.kind) best = static_cast<int>(i);
      continue;
    }
    if (c.copy_bytes < b.copy_bytes) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace cairn::checkpoint
