#include "checkpoint/reuse_planner.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace cairn::checkpoint {
namespace {

// Whether an index entry can be the base under a checkpoint-scope snapshot:
// it holds a whole state (a full snapshot or another sequence), not a
// checkpoint-scope one, and is not the sequence being restored.
bool CanBeBase(const IndexHit& h, uint64_t live_id) {
  return h.entry.kind != EntryKind::kCheckpoint && h.entry.id != live_id;
}

// ReusePlanner::Candidates' plans from the index, for one prompt and match.
class IndexPlans {
 public:
  IndexPlans(const Prompt& prompt, const IndexMatch& match, const std::vector<uint64_t>& excluded,
             const CheckpointStore& store, const MemoryCapabilities& static_caps, uint64_t live_id, size_t live_common)
      : prompt_(prompt),
        match_(match),
        excluded_(excluded),
        store_(store),
        static_caps_(static_caps),
        live_id_(live_id),
        live_common_(live_common) {}

  // Restoring the entry `h` on the prompt's path (with a base under it when
  // it is a checkpoint-scope snapshot beyond the sequence's own history);
  // nullopt when it cannot serve.
  std::optional<ReusePlan> OnPath(const IndexHit& h) const {
    const size_t n = prompt_.size();
    const size_t e = h.depth;
    if (e == 0 || e > n || Excluded(h.entry.id) || h.entry.id == live_id_) return std::nullopt;
    const bool logits = e == n && h.entry.has_logits;
    ReusePlan p;
    p.restored_depth = e;
    p.restored_pos = h.entry.pos;
    if (e == n && !logits) {
      // The state is at the prompt end but the last row's logits are
      // missing: usable only when it can be cut back one symbol.
      if (!CheckpointPolicy::CanCut(static_caps_, h.entry.pos, prompt_.pos_after(n - 1))) return std::nullopt;
      p.c.symbols = n - 1;
    } else {
      p.c.symbols = e;
    }
    p.c.positions = prompt_.pos_after(p.c.symbols);
    p.c.has_logits = logits;
    switch (h.entry.kind) {
      case EntryKind::kCheckpoint:
        if (p.c.symbols != e) return std::nullopt;  // a checkpoint scope snapshot cannot be cut further here
        p.ckpt_id = h.entry.id;
        if (live_common_ >= e) {
          p.c.kind = ReuseKind::kCheckpointOnLive;
          p.c.copy_bytes = h.entry.bytes;
        } else {
          if (!FindBase(e, p)) return std::nullopt;
          p.c.kind = ReuseKind::kBaseAndCheckpoint;
          p.c.copy_bytes += h.entry.bytes;
        }
        break;
      case EntryKind::kFull:
        p.c.kind = ReuseKind::kFullSnapshot;
        SetBase(p, h, e);
        break;
      case EntryKind::kLive:
        p.c.kind = ReuseKind::kOtherSequence;
        p.c.has_logits = false;
        if (e == n) {
          if (!CheckpointPolicy::CanCut(static_caps_, h.entry.pos, prompt_.pos_after(n - 1))) return std::nullopt;
          p.c.symbols = n - 1;
          p.c.positions = prompt_.pos_after(n - 1);
        }
        SetBase(p, h, p.c.symbols);
        break;
    }
    return p;
  }

  // A full state that continues differently (match.below): restored, then
  // cut back to the shared part (memories that can be cut that far only).
  std::optional<ReusePlan> Below(const IndexHit& h) const {
    if (h.entry.id == live_id_ || Excluded(h.entry.id)) return std::nullopt;
    const size_t d = std::min(match_.matched, prompt_.size() - 1);
    if (d == 0 || !CheckpointPolicy::CanCut(static_caps_, h.entry.pos, prompt_.pos_after(d))) return std::nullopt;
    ReusePlan p;
    p.c = {h.entry.kind == EntryKind::kFull ? ReuseKind::kFullSnapshot : ReuseKind::kOtherSequence, d,
           prompt_.pos_after(d), h.entry.bytes, false};
    SetBase(p, h, d);
    p.restored_depth = d;
    p.restored_pos = h.entry.pos;
    return p;
  }

 private:
  // Excluded ids failed earlier in this call; snapshots may also have been
  // evicted since the lookup (by this call's own captures, or other sessions).
  bool Excluded(uint64_t id) const {
    if (std::find(excluded_.begin(), excluded_.end(), id) != excluded_.end()) return true;
    return !SequenceRegistry::IsLiveId(id) && !store_.Contains(id);
  }

  static void SetBase(ReusePlan& p, const IndexHit& h, size_t needs) {
    p.base_kind = h.entry.kind;
    p.base_id = h.entry.id;
    p.base_needs = needs;
    p.c.copy_bytes = h.entry.bytes;
  }

  // The cheapest base holding at least `need` prompt symbols (a full
  // snapshot or another sequence) into `p`; false when none.
  bool FindBase(size_t need, ReusePlan& p) const {
    bool found = false;
    auto consider = [&](const IndexHit& h) {
      if (!CanBeBase(h, live_id_) || Excluded(h.entry.id)) return;
      if (!found || h.entry.bytes < p.c.copy_bytes) {
        SetBase(p, h, need);
        found = true;
      }
    };
    for (const IndexHit& h : match_.on_path) {
      if (h.depth >= need) consider(h);
    }
    if (match_.matched >= need) {
      for (const IndexHit& h : match_.below) consider(h);
    }
    return found;
  }

  const Prompt& prompt_;
  const IndexMatch& match_;
  const std::vector<uint64_t>& excluded_;
  const CheckpointStore& store_;
  const MemoryCapabilities static_caps_;
  const uint64_t live_id_;
  const size_t live_common_;
};

}  // namespace

struct ReusePlanner::Fetched {
  std::shared_ptr<const Checkpoint> base;  // a stored full snapshot,
  Snapshot other;                          // or another sequence's state
  std::shared_ptr<const Checkpoint> ckpt;  // the checkpoint-scope snapshot on top
};

std::vector<ReusePlan> ReusePlanner::Candidates(SequenceState& s, const Prompt& prompt, const IndexMatch& match,
                                                const std::vector<uint64_t>& excluded) const {
  const size_t n = prompt.size();
  const size_t live_common = CommonPrefix(s.history.keys(), prompt.keys());
  std::vector<ReusePlan> out;
  {  // From scratch: always possible.
    ReusePlan p;
    p.c = {ReuseKind::kLive, 0, 0, 0, false};
    out.push_back(p);
  }
  {  // The sequence itself, cut back if needed.
    size_t d = std::min(live_common, n);
    const bool logits = d == n && s.logits_depth == n && !s.logits.empty();
    if (d == n && !logits) d = n - 1;
    if (CheckpointPolicy::CanCut(s.memory->caps(), s.memory->next_pos(), prompt.pos_after(d))) {
      ReusePlan p;
      p.c = {ReuseKind::kLive, d, prompt.pos_after(d), 0, logits};
      out.push_back(p);
    }
  }
  if (!enabled_) return out;
  const IndexPlans plans(prompt, match, excluded, *store_, backend_.info().caps, s.live_id, live_common);
  for (const IndexHit& h : match.on_path) {
    if (std::optional<ReusePlan> p = plans.OnPath(h)) out.push_back(*p);
  }
  for (const IndexHit& h : match.below) {
    if (std::optional<ReusePlan> p = plans.Below(h)) out.push_back(*p);
  }
  return out;
}

absl::StatusOr<Snapshot> ReusePlanner::CaptureOther(uint64_t live_id, const Prompt& prompt, size_t depth) {
  std::shared_ptr<SequenceState> other = live_.Find(live_id);
  if (other == nullptr) return absl::NotFoundError("sequence is gone");
  // Never wait for another session: if it is busy, use something else.
  if (!other->mu.TryLock()) return absl::UnavailableError("sequence is busy");
  absl::StatusOr<Snapshot> snap = absl::FailedPreconditionError("sequence moved on");
  if (CommonPrefix(other->history.keys(), prompt.keys()) >= depth) snap = other->memory->Capture(SnapshotScope::kFull);
  other->mu.Unlock();
  return snap;
}

absl::Status ReusePlanner::Fetch(const Prompt& prompt, const ReusePlan& plan, Fetched& fetched, uint64_t* failed_id) {
  if (plan.c.kind != ReuseKind::kCheckpointOnLive) {
    const Pos target = prompt.pos_after(plan.c.symbols);
    if (plan.base_kind == EntryKind::kFull) {
      absl::StatusOr<std::shared_ptr<const Checkpoint>> got = store_->Get(plan.base_id);
      if (!got.ok()) {
        *failed_id = plan.base_id;
        return got.status();
      }
      fetched.base = std::move(*got);
    } else {
      absl::StatusOr<Snapshot> got = CaptureOther(plan.base_id, prompt, plan.base_needs);
      if (!got.ok()) {
        *failed_id = plan.base_id;
        return got.status();
      }
      // The other sequence may have moved past the shared part: check the
      // cut is possible before touching this sequence.
      if (plan.ckpt_id == 0 && got->pos != target &&
          !CheckpointPolicy::CanCut(backend_.info().caps, got->pos, target)) {
        *failed_id = plan.base_id;
        return absl::FailedPreconditionError("other sequence cannot be cut back to the shared part");
      }
      fetched.other = std::move(*got);
    }
  }
  if (plan.ckpt_id != 0) {
    absl::StatusOr<std::shared_ptr<const Checkpoint>> got = store_->Get(plan.ckpt_id);
    if (!got.ok()) {
      *failed_id = plan.ckpt_id;
      return got.status();
    }
    fetched.ckpt = std::move(*got);
  }
  return absl::OkStatus();
}

absl::Status ReusePlanner::Apply(SequenceState& s, const Prompt& prompt, const ReusePlan& plan,
                                 std::vector<float>* logits, uint64_t* failed_id) {
  const size_t d = plan.c.symbols;
  const Pos target = prompt.pos_after(d);
  if (plan.c.kind == ReuseKind::kLive) {
    if (s.memory->next_pos() != target) {
      if (absl::Status st = s.memory->Truncate(target); !st.ok()) return st;
    }
    s.history.Resize(d);
    if (plan.c.has_logits) *logits = s.logits;
    return absl::OkStatus();
  }
  // Fetch everything first: a missing or corrupt snapshot then changes nothing.
  Fetched fetched;
  if (absl::Status st = Fetch(prompt, plan, fetched, failed_id); !st.ok()) return st;
  if (plan.c.kind != ReuseKind::kCheckpointOnLive) {
    const Snapshot& snap = fetched.base ? fetched.base->snapshot : fetched.other;
    if (absl::Status st = s.memory->Restore(snap); !st.ok()) {
      *failed_id = plan.base_id;
      return st;
    }
    // From here on the sequence no longer holds its old history.
    s.history.AssignPrefix(prompt.path(), 0);
    s.logits.clear();
    s.logits_depth = 0;
    if (plan.ckpt_id == 0 && s.memory->next_pos() != target) {
      if (absl::Status st = s.memory->Truncate(target); !st.ok()) {
        *failed_id = plan.base_id;
        return st;
      }
    }
    if (plan.ckpt_id == 0 && plan.c.has_logits && fetched.base) *logits = fetched.base->logits;
  }
  if (fetched.ckpt) {
    if (absl::Status st = s.memory->Restore(fetched.ckpt->snapshot); !st.ok()) {
      *failed_id = plan.ckpt_id;
      return st;
    }
    if (plan.c.has_logits) *logits = fetched.ckpt->logits;
  }
  if (s.memory->next_pos() != target) {
    return absl::InternalError("restored state is not at the planned position");
  }
  s.history.AssignPrefix(prompt.path(), d);
  return absl::OkStatus();
}

ReusePlanner::Restored ReusePlanner::Restore(SequenceState& s, const Prompt& prompt, const IndexMatch& match,
                                             size_t live_common, std::vector<uint64_t>& excluded) {
  Restored r;
  bool preserved = false;
  for (int attempt = 0;; ++attempt) {
    r.candidates = Candidates(s, prompt, match, excluded);
    std::vector<ReuseCandidate> options;
    for (const ReusePlan& p : r.candidates) options.push_back(p.c);
    r.chosen = r.candidates[CheckpointPolicy::ChooseRestore(options)];
    if (attempt >= 4) r.chosen = r.candidates[0];  // from scratch: Truncate(0) cannot fail
    const bool changes = !(r.chosen.c.kind == ReuseKind::kLive && r.chosen.c.symbols == s.history.size());
    if (changes && !preserved) {
      preserved = true;
      capturer_.PreserveBranch(s, std::min(live_common, r.chosen.c.symbols)).IgnoreError();  // an optimization
    }
    uint64_t failed_id = 0;
    r.logits.clear();
    absl::Status st = Apply(s, prompt, r.chosen, &r.logits, &failed_id);
    if (st.ok()) return r;
    counters_.RestoreFailed();
    if (failed_id != 0) {
      excluded.push_back(failed_id);
      if (st.code() == absl::StatusCode::kNotFound || st.code() == absl::StatusCode::kDataLoss) {
        capturer_.Forget(failed_id);
      }
    }
    // Apply may have restored part of a state: start over from a known one.
    if (s.memory->next_pos() != s.history.positions() || failed_id == 0) {
      s.memory->Truncate(0).IgnoreError();
      s.history.Resize(0);
      s.logits.clear();
      s.logits_depth = 0;
    }
  }
}

void ReusePlanner::CreditRestored(const Restored& restored, const Prompt& prompt) {
  // What the restored checkpoint saved beyond the best plan without it and
  // without the other snapshots inside its own message (tail points, the
  // prompt end, points inside a reply, which a store under pressure rarely
  // keeps together): its realized value, for the store's retention policy.
  // Crediting a prompt end only the few positions past the tail point
  // beside it made both look worthless.
  const ReusePlan& chosen = restored.chosen;
  if (!enabled_) return;
  const uint64_t used =
      chosen.ckpt_id != 0 ? chosen.ckpt_id : (chosen.base_kind == EntryKind::kFull ? chosen.base_id : 0);
  if (used == 0 || chosen.c.kind == ReuseKind::kLive || chosen.c.kind == ReuseKind::kOtherSequence) return;
  Pos without = 0;
  size_t message_start = 0;
  for (size_t m : prompt.message_ends()) {
    if (m < chosen.c.symbols) message_start = std::max(message_start, m);
  }
  for (const ReusePlan& p : restored.candidates) {
    const bool stored = p.ckpt_id != 0 || (p.base_kind == EntryKind::kFull && p.base_id != 0);
    if (stored && p.c.symbols > message_start) continue;
    if (p.ckpt_id != used && !(p.base_kind == EntryKind::kFull && p.base_id == used)) {
      without = std::max(without, p.c.positions);
    }
  }
  store_->Credit(used, static_cast<double>(std::max<Pos>(chosen.c.positions - without, 0)));
}

void ReusePlanner::NoteMissed(SequenceState& s, const Prompt& prompt, const IndexMatch& match, size_t live_common) {
  const size_t n = prompt.size();
  const size_t i = s.history.size();
  if (!enabled_ || i >= n || !store_->RemembersMissed()) return;
  // A checkpoint scope snapshot serves only up to where this sequence's own
  // history or a full base (Candidates) holds the rest of the memory.
  size_t partial_up_to = std::min(live_common, n);
  for (const IndexHit& h : match.on_path) {
    if (CanBeBase(h, s.live_id)) partial_up_to = std::max(partial_up_to, h.depth);
  }
  if (std::any_of(match.below.begin(), match.below.end(), [&](const IndexHit& h) { return CanBeBase(h, s.live_id); })) {
    partial_up_to = std::max(partial_up_to, match.matched);
  }
  store_->NoteMissed(PrefixPathKeys(s.tenant, prompt.keys(), i, n), n - std::max(partial_up_to, i));
}

}  // namespace cairn::checkpoint
