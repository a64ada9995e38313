// RetentionPolicy: which checkpoints a byte-budgeted CheckpointStore keeps
// when they do not all fit: whether a new checkpoint is worth its bytes
// (admission) and which stored one goes first (eviction). Pure decisions
// over what the store tells it (sizes, values, capture reasons, ages, uses);
// no I/O, no snapshot bytes. The store calls a policy under its own lock, so
// a policy must never call the store; calls are serialized by that lock.
//
// Implementations (selected by CheckpointOptions::retention):
//   ForecastRetention  cairn's default: hit density (reuse chance x saving
//                      per byte per prompt held) learned per kind of
//                      checkpoint, with admission control (see its comment).
//   LruRetention       least recently used first, admits everything: the
//                      plain prefix-cache baseline.
//   MarconiRetention   Marconi's eviction (Pan et al., MLSys 2025): recency
//                      plus alpha times FLOP efficiency, both min-max
//                      normalized, among checkpoints with at most one branch
//                      below them. Marconi's admission is a placement rule
//                      (CheckpointPolicy, Placement::kMarconi), not a store one.
#ifndef CAIRN_CHECKPOINT_RETENTION_H_
#define CAIRN_CHECKPOINT_RETENTION_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "backends/memory.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/policy.h"

namespace cairn::checkpoint {

// The store's two clocks: `tick` counts its operations (puts and gets),
// `request` counts prompts (CheckpointStore::BeginRequest). Ages in requests
// do not depend on how many checkpoints a placement takes per prompt.
struct RetentionClock {
  uint64_t tick = 0;
  uint64_t request = 0;
};

// What the store knows of one checkpoint.
struct RetentionFacts {
  CheckpointId id = 0;
  size_t bytes = 0;
  // Positions a restore saves beyond the next shallower checkpoint on its
  // path when it was taken (> 0).
  double cost = 1;
  Pos pos = 0;
  SnapshotScope scope = SnapshotScope::kCheckpoint;
  CaptureReason reason = CaptureReason::kMessageBoundary;
  // A turn checkpoint (tail point, point inside a reply) whose conversation
  // has moved on to a new turn: kept only for later edits and forks.
  bool stale = false;
  uint64_t path_key = 0;  // PathKey(tenant, symbols); 0 when unknown
  RetentionClock added;
  RetentionClock last_use;  // of its Put or its latest Get
  uint32_t uses = 0;        // Gets
  // Continuations below its path in the owner's prefix index (other
  // conversations, later turns); -1 when no index answered.
  int32_t branches = -1;
  // RetentionEvent::kCredited only: the positions a restore of it saved
  // beyond the best plan without it.
  double saved = 0;
  // kRemoved (pushed out for room) and kRefused only: the store remembers
  // its path for a while, and reports exactly one kMissed or kForgotten for
  // it later (only to a policy that wants_misses(), and only with a path
  // key).
  bool remembered = false;
};

enum class RetentionEvent : uint8_t {
  kAdded,     // admitted by Put
  kUsed,      // served by Get (the facts as they were before this use)
  kEvicted,   // left RAM (spilled to disk or gone)
  kCredited,  // a restore of it saved RetentionFacts::saved positions
  kRemoved,   // gone from every tier (dropped or erased)
  kRefused,   // not admitted (Admit said no to a Put or a WouldAdmit)
  // A prompt would have restored a checkpoint the store pushed out or
  // refused (facts as when it went; `now` is the prompt's): the use a policy
  // that learns from uses would never see otherwise.
  kMissed,
  // A remembered one that no prompt missed while the store remembered it
  // (facts as when it went; `now` is when it is forgotten: kept, it would
  // have sat unused until then).
  kForgotten,
};

class RetentionPolicy {
 public:
  virtual ~RetentionPolicy() = default;

  virtual std::string name() const = 0;

  // How much keeping `e` is worth now (higher: kept longer). Orders the disk
  // tier's evictions and Persist, and ChooseVictim's default.
  virtual double Score(const RetentionFacts& e, const RetentionClock& now) const = 0;

  // Index into `candidates` (non-empty: RAM checkpoints that may go) of the
  // one to evict first. Default: the lowest Score, the least recently used
  // among equals.
  virtual size_t ChooseVictim(std::span<const RetentionFacts> candidates, const RetentionClock& now) const;

  // Whether `incoming` may displace `victims` (what ChooseVictim would evict
  // to make room for it, in order; empty when it fits). Default: always.
  virtual bool Admit(const RetentionFacts& incoming, std::span<const RetentionFacts> victims,
                     const RetentionClock& now) const;

  // Whether ChooseVictim reads RetentionFacts::branches (the store then asks
  // the engines' indexes, which costs a lookup per candidate).
  virtual bool wants_branches() const { return false; }

  // Whether the store should remember what it pushes out or refuses and
  // report kMissed / kForgotten (costs a hash per prompt symbol past the
  // resume point while it remembers any).
  virtual bool wants_misses() const { return false; }

  // What happened to a checkpoint, for policies that learn.
  virtual void Observe(RetentionEvent event, const RetentionFacts& e, const RetentionClock& now) {
    (void)event;
    (void)e;
    (void)now;
  }
};

// Value-based admission: true when `incoming` scores at least as high as
// every one of `victims` (it only pushes out what is worth less).
bool OutscoresVictims(const RetentionPolicy& policy, const RetentionFacts& incoming,
                      std::span<const RetentionFacts> victims, const RetentionClock& now);

// cairn's retention: keep what saves the most recomputation per byte per
// prompt it is held, its hit density (after LHD, Beckmann et al., NSDI 2018:
// "Least Hit Density"):
//   score = log2(P(used next) * saving / (bytes * E[prompts it stays]))
// where the stay counts until its next use or until it leaves unused, so a
// checkpoint that is rarely used pays for the whole time it would sit in the
// store (a ratio of reuse chance to wait given use, which it replaces,
// borrowed reuse chances from other kinds for ages a kind was seldom seen
// at and ranked never-used tail points above reused prompt ends). Both are
// learned per kind of checkpoint (capture reason, whether its turn has
// passed, whether it was used before, whether it is a full snapshot -
// restorable anywhere, and dozens of times the bytes of a checkpoint-scope
// one on a hybrid -, and its place in the prefix tree: the end of a path - a
// conversation's latest state, where it resumes -, a point a single path
// continues past, or a branch point two or more continuations share - a
// system prompt, the turns before alternatives) from what happened to
// earlier ones of the same kind:
// - P and the stay: over the checkpoints of the kind that stayed idle
//   (prompts since their last use) at least as long as this one, the share
//   whose next outcome was a use, and the prompts from this age to that
//   outcome (log-spaced age buckets), shrunk towards all kinds together where
//   a kind has little data. Conditioned on the checkpoint's own idle age, so
//   one unused for long is worth less where its kind's uses come early.
//   Outcomes include those of checkpoints the store pushed out or refused
//   (kMissed: a prompt would have resumed from it; kForgotten: none did
//   within CheckpointStore::kMissHorizon prompts), else a kind evicted or
//   refused before its uses come would never be seen used, and stay out.
// - The saving: what restores of the kind actually saved beyond the best
//   plan without them and without their neighbours in the same message
//   (CheckpointStore::Credit; a store under pressure rarely keeps a
//   message's points together), as a fraction of their position, applied
//   to this one's position; before any restore, its cost (the positions
//   beyond the nearest shallower checkpoint). Measured, not assumed: a
//   conversation's end, whose shallower neighbours tend to be gone when a
//   returning user needs it, is worth its whole turn or more, a prompt end
//   its last message.
// Counts decay so the forecast follows a changing workload. A regenerated
// prompt's end is worth keeping for the next few prompts, a returning
// user's conversation for longer, a system prompt's checkpoint used again
// and again for good, a tail point nobody edits hardly at all. Admission: a
// new checkpoint enters only when its density is at least the byte-weighted
// mean of what it would push out, so a burst of unlikely ones cannot flush a
// store of likely ones, while a large full snapshot is not refused because
// one of the many small ones it displaces is worth a bit more per byte.
class ForecastRetention final : public RetentionPolicy {
 public:
  ForecastRetention() = default;
  std::string name() const override { return "cairn"; }
  double Score(const RetentionFacts& e, const RetentionClock& now) const override;
  bool Admit(const RetentionFacts& incoming, std::span<const RetentionFacts> victims,
             const RetentionClock& now) const override;
  void Observe(RetentionEvent event, const RetentionFacts& e, const RetentionClock& now) override;
  bool wants_branches() const override { return true; }
  bool wants_misses() const override { return true; }

  // The forecast for `e` now: the chance that its next outcome is a use
  // (not leaving the store), and the prompts it is expected to stay until
  // either.
  struct Forecast {
    double chance = 0;
    double stay = 0;
  };
  Forecast Predict(const RetentionFacts& e, const RetentionClock& now) const;
  // The positions a restore of `e` is expected to save.
  double Saving(const RetentionFacts& e) const;

 private:
  // reason x stale x used before x branches below (0, 1, 2 or more) x
  // scope (full or checkpoint)
  static constexpr size_t kKinds = kCaptureReasons * 2 * 2 * 3 * 2;
  static constexpr int kAges = 24;  // idle ages 0, 1, 2-3, 4-7, ... in prompts
  static size_t Kind(const RetentionFacts& e);
  static int AgeBucket(uint64_t idle);
  struct Tally {
    std::array<double, kAges> used{};  // uses at that idle age
    std::array<double, kAges> left{};  // left unused at that idle age
    double credits = 0;                // restores credited
    double saved = 0, at = 0;          // their savings and positions
  };
  // A use (or a departure unused) of a checkpoint of `kind` at `idle`.
  void Count(size_t kind, bool used, uint64_t idle);
  void Credit(size_t kind, double saved, Pos pos);

  std::array<Tally, kKinds> tally_{};
  Tally all_;  // every kind together: the prior of each
};

// Least recently used first (the store's tick clock); admits everything.
class LruRetention final : public RetentionPolicy {
 public:
  std::string name() const override { return "lru"; }
  double Score(const RetentionFacts& e, const RetentionClock& now) const override;
};

// Marconi's eviction as its paper and artifact describe it: among the
// checkpoints with at most one branch below them in the prefix tree (leaves
// and single-child nodes: a branch point shared by several conversations is
// never a candidate while they hang below it), evict the lowest
//   utility = recency_norm + alpha * flop_efficiency_norm
// where recency = 1 / (ticks since last use), flop efficiency = FLOPs saved
// relative to the parent checkpoint per byte, and both are min-max
// normalized over the candidates. Deviations, forced by cairn's store: FLOPs
// are counted as positions (exact for recurrent layers, which dominate
// Marconi's hybrids; attention's quadratic term is left out); the parent is
// the shallower checkpoint on the path when this one was taken; a stored
// entry is a whole snapshot (cairn's full snapshots copy their attention KV,
// where Marconi's radix tree shares it between nodes); alpha is fixed here
// (Marconi tunes it by replaying a window of past requests with a grid of
// alphas, which needs a second cache to replay on: bench/pressure runs a few
// alphas and reports the best, which favours this baseline). Admits
// everything: Marconi's admission chooses what is captured
// (Placement::kMarconi).
class MarconiRetention final : public RetentionPolicy {
 public:
  explicit MarconiRetention(double alpha = 1.0) : alpha_(alpha) {}
  std::string name() const override;
  double Score(const RetentionFacts& e, const RetentionClock& now) const override;
  size_t ChooseVictim(std::span<const RetentionFacts> candidates, const RetentionClock& now) const override;
  bool wants_branches() const override { return true; }

 private:
  double alpha_;
};

// "cairn", "lru", "marconi" or "marconi:ALPHA"; INVALID_ARGUMENT otherwise.
absl::StatusOr<std::shared_ptr<RetentionPolicy>> MakeRetention(const std::string& name);

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_RETENTION_H_
