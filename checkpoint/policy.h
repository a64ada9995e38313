// CheckpointPolicy: the pure decisions of the checkpoint component (no I/O, no
// memory access): where to capture during a prompt and after generation, which
// snapshot scope to capture, and which reuse candidate to restore.
//
// Chosen from a memory's capabilities: a truncatable memory (full KV cache)
// can be cut back anywhere, so it needs no checkpoints; SWA, recurrent and
// hybrid memories do.
#ifndef CAIRN_CHECKPOINT_POLICY_H_
#define CAIRN_CHECKPOINT_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backends/memory.h"
#include "checkpoint/prompt.h"

namespace cairn::checkpoint {

// Where checkpoints are taken.
enum class Placement : uint8_t {
  // cairn's: message boundaries, intervals, tail points of the last message,
  // the prompt end, points inside replies, the end of a reply, branch
  // preservation, and divergence points (below).
  kCairn,
  // Marconi's admission (Pan et al., MLSys 2025, section 4.1): a state is
  // kept only where reuse is likely by its taxonomy: where a prompt leaves a
  // path the prefix tree knows (a prefix shared by inputs, e.g. a system
  // prompt, found by "speculative insertion" of the prompt before its
  // prefill) and after the last decoded token of each request (input plus
  // output, for the conversation's next turn). Branch preservation and parked
  // sequences stay as in cairn (they keep the attention KV that Marconi's
  // radix tree would hold for those paths).
  kMarconi,
};

struct PolicyOptions {
  // Off: no checkpoints at all (the benchmark baseline); live sequences are
  // still cut back where the memory itself allows.
  bool enabled = true;
  // Interval captures: at the first symbol boundary at or after every
  // multiple of this many positions, so a cancelled or diverging long prompt
  // resumes near where it stopped. Equal to the prefill chunk by default, so
  // the points fall on chunk ends and cost no extra Forward call. 0 disables
  // interval captures.
  Pos every_n = 512;
  // Inside the last message of a prompt (the one a client most often edits),
  // capture every this many positions as well, so an edit resumes at most
  // this many positions before the changed token. Where the backend
  // snapshots inside a run (recurrent, hybrid) a point costs a state copy
  // and store bytes, not a Forward call; an SWA ring's slack covers the tail
  // without any. (A backend without in-run snapshots pays a split Forward
  // call per point: 16-position points once made append turns 1.6x slower
  // on a 190 MiB mamba2.) 0 disables them.
  Pos tail_every = 8;
  // Tail points cover at most this many positions before the prompt end (a
  // long single-message prompt relies on the every_n points instead).
  Pos tail_span = 128;
  // Inside an unmarked prompt (no message boundary before its end: a client
  // sending plain token prompts), where a later prompt may leave it anywhere
  // (an early turn trimmed right after an unmarked system prompt, an edit),
  // capture at marks spaced from position 0: `spaced_first` positions apart
  // at first, then `spaced_fraction` of the mark's position, so a divergence
  // at position p recomputes at most max(spaced_first, p * spaced_fraction)
  // positions more than the minimum, with a number of points logarithmic in
  // the prompt's length. Marks stop where every_n intervals are denser, and
  // widen under a small budget like tail points (SpacedScale). 0 disables.
  Pos spaced_first = 32;
  double spaced_fraction = 1.0 / 8;
  // The spaced marks' least scale (SpacedScale). Where the backend takes no
  // snapshot inside a run (SWA) each point splits a Forward call, which
  // re-reads every weight: the engine spaces them kSplitSpacedScale times
  // wider there.
  int spaced_min_scale = 1;
  // The tail points of one prompt take at most this fraction of the RAM
  // budget: a model with a large state (tens of MiB per checkpoint) gets
  // them further apart instead of flushing the store on every prompt.
  double tail_budget_fraction = 1.0 / 16;
  // After generation, capture when at least this many positions were added
  // since the newest checkpoint of the sequence.
  Pos min_generation_capture = 1;
  // During generation, capture every this many positions as well, so a
  // client that re-sends a reply cut short (a client-side stop, a template
  // that keeps part of it) resumes near the cut. Like tail points they last
  // until the sequence's next new turn. 0 disables them.
  Pos generation_every = 16;
  // Before cutting away at least this many positions of a sequence's history
  // (a branch, an edit far back), keep the abandoned state as a full snapshot
  // so that returning to it costs nothing. 0 disables it.
  Pos min_branch_preserve = 32;
  // Capture the full memory instead of the checkpoint part when it costs at
  // most this factor more bytes: a full snapshot can be restored onto any
  // sequence (shared prefixes), a checkpoint-scope one only onto a sequence
  // that already holds its prefix in attention.
  double full_scope_factor = 2.0;
  Placement placement = Placement::kCairn;
  // Capture where a prompt leaves a path the prefix index knows (another
  // conversation's, an earlier version of this one) when it is recomputed
  // through that point: a prefix two prompts shared is likely shared again
  // (a system prompt, the turns before an edited one), whether or not the
  // client marked a message boundary there. Taken as a full snapshot when
  // the path belongs to another conversation (any sequence can restore it).
  bool divergence_points = true;
  // A new turn leaves its predecessor's tail points and points inside the
  // reply in the store, marked stale, for the retention policy to weigh
  // (edits of earlier turns, forks, re-sent cut replies), instead of
  // erasing them.
  bool keep_turn_checkpoints = true;
  // A sequence destroyed while its history is not in the store as a full
  // snapshot (an expired or deleted session) is parked first, if the store
  // admits it: the conversation can resume from it on any sequence, where a
  // checkpoint-scope snapshot needs a live sequence holding its prefix.
  bool park_dropped = true;
  // Tail and reply points widen under a small budget (TailSpacing). Off: the
  // same points at every budget (bench/pressure's offline reference, which
  // needs the placement its reference stream was recorded with).
  bool budget_spacing = true;
};

// PolicyOptions::spaced_min_scale for a backend without snapshots inside a
// run: 128 positions apart at first, then half the mark (a trim after a
// 300-position system prompt recomputes 44 more positions; a 500-position
// prompt takes 3 extra Forward calls instead of 13).
inline constexpr int kSplitSpacedScale = 4;

enum class CaptureReason : uint8_t {
  kMessageBoundary,
  kInterval,
  kTail,       // inside the last message (see PolicyOptions::tail_every)
  kPromptEnd,  // keeps the last row's logits: a regenerate needs no forward
  kAfterGeneration,
  kDuringGeneration,  // every PolicyOptions::generation_every generated positions
  kBranch,            // full snapshot of a history about to be cut away
  kDivergence,        // where the prompt leaves a path the index knows
  kParked,            // full snapshot of a sequence its owner parks (a sessionless request's)
  kDropped,           // full snapshot of a sequence destroyed unparked (an expired session's)
  kSpaced,            // at a spaced mark inside an unmarked prompt (PolicyOptions::spaced_first)
};
inline constexpr size_t kCaptureReasons = 11;
const char* CaptureReasonName(CaptureReason reason);

struct CapturePoint {
  size_t symbols = 0;  // capture after this many prompt symbols
  CaptureReason reason = CaptureReason::kMessageBoundary;
  bool keep_logits = false;
  bool full = false;  // a full snapshot (restorable onto any sequence)
};

// What an engine could reuse for a new prompt, for ChooseRestore.
enum class ReuseKind : uint8_t {
  kLive = 0,           // the sequence's own memory, cut back if needed
  kCheckpointOnLive,   // restore a checkpoint-scope snapshot onto it
  kFullSnapshot,       // restore a full snapshot
  kOtherSequence,      // copy another live sequence (full capture + restore)
  kBaseAndCheckpoint,  // full state from elsewhere, then a checkpoint on it
};
const char* ReuseKindName(ReuseKind kind);

struct ReuseCandidate {
  ReuseKind kind = ReuseKind::kLive;
  size_t symbols = 0;       // prompt symbols reused
  Pos positions = 0;        // positions reused (work saved)
  size_t copy_bytes = 0;    // bytes to copy to apply it
  bool has_logits = false;  // brings the logits of its last row
};

class CheckpointPolicy final {
 public:
  CheckpointPolicy(const MemoryCapabilities& caps, const PolicyOptions& options) : caps_(caps), options_(options) {}

  const PolicyOptions& options() const { return options_; }

  // Whether this memory gets checkpoints at all.
  bool captures() const { return options_.enabled && !caps_.truncatable && caps_.has_checkpoint_state; }

  // Whether a memory at `next_pos` can go back to `target` by Truncate alone.
  static bool CanCut(const MemoryCapabilities& caps, Pos next_pos, Pos target);

  // Capture points for processing prompt symbols (start, prompt.size()]:
  // message boundaries, interval crossings, tail points inside the last
  // message and the prompt end (with logits);
  // a boundary at `start` itself too when it is a message end. Points for
  // which `exists(symbols)` is true (already captured on this path) are
  // skipped. Ascending, no duplicates; every point is a symbol boundary, so
  // never inside a multimodal chunk. Empty when captures() is false.
  // `cut_window` is how far back the memory can be cut without a checkpoint
  // (its current rollback window): tail and interval points that close to
  // the prompt end are skipped, since a cut serves them (SWA rings).
  // `tail_every` overrides options().tail_every when >= 0 (see TailSpacing).
  // `divergence` (0: none) is where the prompt leaves a path the prefix
  // index knows; a point there (kDivergence) when options().divergence_points
  // and it lies in (start, prompt.size()]. With Placement::kMarconi the
  // divergence point is the only one. In a prompt without a message
  // boundary before its end, a point (kSpaced) at the first symbol boundary
  // at or after each spaced mark (SpacedMark) outside the tail points' span,
  // even within `cut_window` (the prompt that leaves it may come turns
  // later, when a ring has moved on);
  // `spaced_scale` overrides the marks' scale when >= 0 (see SpacedScale;
  // -1: options().spaced_min_scale when options().spaced_first > 0).
  std::vector<CapturePoint> PlanPrefill(const Prompt& prompt, size_t start, const std::function<bool(size_t)>& exists,
                                        Pos cut_window = 0, Pos tail_every = -1, size_t divergence = 0,
                                        int spaced_scale = -1) const;

  // The spaced mark after `mark` (0: the first) at `scale` (>= 1) times the
  // options' spacing: mark + scale * max(spaced_first, mark * spaced_fraction);
  // 0 (no more marks) when that gap is wider than every_n (interval points
  // are denser from there) or spaced points are off.
  Pos SpacedMark(Pos mark, int scale) const;
  // The scale of spaced marks for an unmarked prompt of `positions` with
  // checkpoints of `checkpoint_bytes` each: options().spaced_min_scale,
  // doubled until its marks fit
  // one prompt's share of the RAM budget (as for TailSpacing); 0 (none)
  // when off or not even one point fits.
  int SpacedScale(Pos positions, size_t checkpoint_bytes, size_t ram_budget, size_t sequences = 1) const;
  // The bytes of one prompt's share of a RAM budget of `ram_budget` shared
  // by `sequences` live sequences (tail_budget_fraction of it, or budget /
  // sequences); -1 (no limit) when budget spacing is off.
  double PromptShare(size_t ram_budget, size_t sequences) const;

  // The tail spacing for checkpoints of `checkpoint_bytes` each under a RAM
  // budget of `ram_budget` bytes shared by `sequences` live sequences:
  // options().tail_every, widened until the tail_span / spacing points fit
  // one prompt's share of the budget (tail_budget_fraction of it, or less
  // with more sequences than 1 / tail_budget_fraction: budget / sequences);
  // 0 (no tail points) when not even one does.
  Pos TailSpacing(size_t checkpoint_bytes, size_t ram_budget, size_t sequences = 1) const;
  // The spacing of checkpoints inside a reply, widened the same way from
  // options().generation_every (the points of a tail_span-long reply fit
  // its share); 0 when off or not even one fits.
  Pos GenerationSpacing(size_t checkpoint_bytes, size_t ram_budget, size_t sequences = 1) const;

  // After generation: capture when the sequence moved `since_newest`
  // positions past its newest checkpoint.
  bool CaptureAfterGeneration(Pos since_newest) const {
    return captures() && since_newest >= options_.min_generation_capture;
  }
  // After each generated token: capture when the sequence moved at least
  // `every` (GenerationSpacing) positions past its newest checkpoint.
  bool CaptureDuringGeneration(Pos since_newest, Pos every) const {
    return captures() && options_.placement == Placement::kCairn && every > 0 && since_newest >= every;
  }

  // Keep a full snapshot of the history before cutting `dropped` positions
  // away. Applies to every family: even a transformer would otherwise have
  // to recompute an abandoned branch when the client returns to it.
  bool PreserveBranch(Pos dropped) const {
    return options_.enabled && options_.min_branch_preserve > 0 && dropped >= options_.min_branch_preserve;
  }

  // Scope to capture given what each would cost now.
  SnapshotScope ScopeFor(size_t checkpoint_bytes, size_t full_bytes) const {
    return static_cast<double>(full_bytes) <= options_.full_scope_factor * static_cast<double>(checkpoint_bytes)
               ? SnapshotScope::kFull
               : SnapshotScope::kCheckpoint;
  }

  // Index of the best candidate: the most positions reused (fewest to
  // recompute); ties go to the cheaper kind, then to fewer bytes copied.
  // -1 when `candidates` is empty.
  static int ChooseRestore(std::span<const ReuseCandidate> candidates);

 private:
  // `every`, widened until tail_span / spacing checkpoints of
  // `checkpoint_bytes` fit one prompt's share of the budget (TailSpacing).
  Pos Widen(Pos every, size_t checkpoint_bytes, size_t ram_budget, size_t sequences) const;
  // How many checkpoints of `checkpoint_bytes` one prompt's share of the
  // budget holds (-1: no limit, as when budget spacing is off).
  int64_t PointsThatFit(size_t checkpoint_bytes, size_t ram_budget, size_t sequences) const;

  MemoryCapabilities caps_;
  PolicyOptions options_;
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_POLICY_H_
