#include "checkpoint/capturer.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace cairn::checkpoint {
namespace {

constexpr char kTagMagic[4] = {'C', 'K', 'T', '1'};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void Capturer::StartPrompt(SequenceState& s, size_t prompt_size, const IndexMatch& match,
                           std::optional<size_t> restored_depth) {
  const size_t i = s.history.size();
  // The newest snapshot on this path at or before the resume point.
  s.newest_id = 0;
  if (!restored_depth.has_value()) {
    s.newest_depth = std::min(s.newest_depth, i);
  } else {
    s.newest_depth = *restored_depth <= i ? *restored_depth : i;
  }
  for (const IndexHit& h : match.on_path) {
    if (h.entry.kind != EntryKind::kLive && h.depth <= i) s.newest_depth = std::max(s.newest_depth, h.depth);
  }
  if (enabled_) {
    // This prompt goes on past the one the turn's checkpoints served (a new
    // turn, not an edit or a regenerate): they are stale.
    if (prompt_size > s.turn_prompt_size && i >= s.turn_prompt_size) RetireTurnCheckpoints(s);
    s.turn_prompt_size = prompt_size;
  }
}

std::vector<CapturePoint> Capturer::PlanPrefill(SequenceState& s, const Prompt& prompt, size_t start,
                                                const IndexMatch& match, std::span<const uint64_t> excluded,
                                                size_t live_common) const {
  if (!enabled_) return {};
  const size_t n = prompt.size();
  // Where the prompt leaves the deepest path the index knows, when this
  // prefill recomputes through it. Beyond the sequence's own history the
  // path is another conversation's: a shared prefix, kept restorable onto
  // any sequence.
  const size_t divergence = match.matched > start ? std::min(match.matched, n) : 0;
  const bool shared = match.matched > live_common;
  // The points already on this path are skipped.
  auto exists = [&](size_t depth) {
    for (const IndexHit& h : match.on_path) {
      if (h.depth != depth || h.entry.kind == EntryKind::kLive) continue;
      if (std::find(excluded.begin(), excluded.end(), h.entry.id) != excluded.end()) continue;
      if (depth == n && !h.entry.has_logits) continue;
      // A shared prefix needs a snapshot any sequence can restore.
      if (depth == divergence && shared && h.entry.kind != EntryKind::kFull) continue;
      return true;
    }
    return false;
  };
  // An SWA ring with slack can be cut back that far later: no checkpoints
  // needed there. The window the prompt will leave: its slack once a ring
  // wraps, the whole sequence before.
  const MemoryCapabilities caps = s.memory->caps();
  const Pos cut_window =
      caps.truncatable ? 0 : std::max(caps.rollback_window, std::min(prompt.positions(), caps.rollback_slack));
  const size_t checkpoint_bytes = s.memory->Bytes(SnapshotScope::kCheckpoint);
  const size_t budget = store_->options().ram_budget_bytes;
  const Pos tail_every = policy_.TailSpacing(checkpoint_bytes, budget, live_.size());
  const int spaced_scale = policy_.SpacedScale(prompt.positions(), checkpoint_bytes, budget, live_.size());
  std::vector<CapturePoint> points =
      policy_.PlanPrefill(prompt, start, exists, cut_window, tail_every, divergence, spaced_scale);
  for (CapturePoint& pt : points) pt.full = pt.reason == CaptureReason::kDivergence && shared;
  return points;
}

bool Capturer::SpacedPointFits(SequenceState& s, size_t used) const {
  const double share = policy_.PromptShare(store_->options().ram_budget_bytes, live_.size());
  return share < 0 || static_cast<double>(used + s.memory->Bytes(SnapshotScope::kCheckpoint)) <= share;
}

PutInfo Capturer::Describe(const SequenceState& s, CaptureReason reason, double cost) const {
  PutInfo info;
  info.cost = std::max(cost, 1.0);
  info.reason = reason;
  info.path_key = PathKey(s.tenant, s.history.keys());
  return info;
}

absl::Status Capturer::CaptureAt(SequenceState& s, CaptureReason reason, bool force_full,
                                 const std::vector<float>* logits, double cost, PrefillStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  const SnapshotScope scope =
      force_full ? SnapshotScope::kFull
                 : policy_.ScopeFor(s.memory->Bytes(SnapshotScope::kCheckpoint), s.memory->Bytes(SnapshotScope::kFull));
  const size_t logits_bytes = logits != nullptr ? logits->size() * sizeof(float) : 0;
  if (!WorthCapturing(scope, s.memory->Bytes(scope) + logits_bytes, s.memory->next_pos(), Describe(s, reason, cost))) {
    return absl::ResourceExhaustedError("the store would not admit this checkpoint");
  }
  absl::StatusOr<Snapshot> snap = s.memory->Capture(scope);
  if (!snap.ok()) return snap.status();
  return Keep(s, reason, std::move(*snap), logits, cost, stats, t0);
}

absl::Status Capturer::Keep(SequenceState& s, CaptureReason reason, Snapshot snapshot, const std::vector<float>* logits,
                            double cost, PrefillStats* stats, std::chrono::steady_clock::time_point started) {
  const SnapshotScope scope = snapshot.scope;
  Checkpoint cp;
  cp.snapshot = std::move(snapshot);
  const bool has_logits = logits != nullptr && !logits->empty();
  if (has_logits) cp.logits = *logits;
  cp.tag = EncodeTag(s.tenant, s.history.keys(), has_logits);
  IndexEntry e;
  e.kind = scope == SnapshotScope::kFull ? EntryKind::kFull : EntryKind::kCheckpoint;
  e.pos = cp.snapshot.pos;
  e.has_logits = has_logits;
  e.bytes = cp.snapshot.bytes();
  const size_t bytes = cp.bytes();
  absl::StatusOr<CheckpointId> id = store_->Put(std::move(cp), Describe(s, reason, cost));
  if (!id.ok()) return id.status();
  e.id = *id;
  if (absl::Status st = index_.Insert(s.tenant, s.history.keys(), e); !st.ok()) {
    store_->Erase(*id);
    return st;
  }
  // A drop between Put and Insert would leave a dangling index entry.
  if (!store_->Contains(*id)) Forget(*id);
  if (reason == CaptureReason::kTail || reason == CaptureReason::kDuringGeneration) s.turn_ids.push_back(*id);
  s.newest_depth = s.history.size();
  s.newest_id = *id;
  s.newest_reason = reason;
  const double secs = SecondsSince(started);
  if (stats != nullptr) {
    ++stats->captured;
    stats->captured_bytes += bytes;
    stats->capture_seconds += secs;
  }
  counters_.Captured(bytes, secs);
  return absl::OkStatus();
}

void Capturer::DuringGeneration(SequenceState& s) {
  if (!enabled_ || s.history.empty()) return;
  const Pos since = s.history.positions() - s.history.pos_after(s.newest_depth);
  const Pos every = policy_.GenerationSpacing(s.memory->Bytes(SnapshotScope::kCheckpoint),
                                              store_->options().ram_budget_bytes, live_.size());
  if (!policy_.CaptureDuringGeneration(since, every)) return;
  if (!CaptureAt(s, CaptureReason::kDuringGeneration, false, nullptr, static_cast<double>(since), nullptr).ok()) {
    counters_.CaptureFailed();
  }
}

void Capturer::AfterGeneration(SequenceState& s) {
  if (!enabled_) return;
  if (s.newest_id != 0 && s.newest_depth == s.history.size() && s.newest_reason == CaptureReason::kDuringGeneration) {
    // The reply ended on a point taken inside it: that checkpoint is the end
    // of the conversation (the next turn's start), not a short-lived one.
    store_->Reclassify(s.newest_id, CaptureReason::kAfterGeneration);
    s.turn_ids.erase(std::remove(s.turn_ids.begin(), s.turn_ids.end(), s.newest_id), s.turn_ids.end());
    s.newest_reason = CaptureReason::kAfterGeneration;
  }
  if (s.history.empty()) return;
  const Pos since = s.history.positions() - s.history.pos_after(s.newest_depth);
  if (!policy_.CaptureAfterGeneration(since)) return;
  const IndexMatch m = index_.Lookup(s.tenant, s.history.keys(), 0);
  for (const IndexHit& h : m.on_path) {
    if (h.depth == s.history.size() && h.entry.kind != EntryKind::kLive) return;  // kept there already
  }
  // A capture that does not fit only costs reuse later: not an error.
  if (!CaptureAt(s, CaptureReason::kAfterGeneration, false, nullptr, static_cast<double>(since), nullptr).ok()) {
    counters_.CaptureFailed();
  }
}

absl::Status Capturer::PreserveBranch(SequenceState& s, size_t keep_symbols) {
  if (!enabled_ || s.history.empty()) return absl::OkStatus();
  const Pos dropped = s.memory->next_pos() - s.history.pos_after(std::min(keep_symbols, s.history.size()));
  if (!policy_.PreserveBranch(dropped)) return absl::OkStatus();
  // Already kept (after-generation capture, an earlier preservation)? It
  // is now the end of an abandoned branch, which its retention should know.
  const IndexMatch m = index_.Lookup(s.tenant, s.history.keys(), 0);
  for (const IndexHit& h : m.on_path) {
    if (h.depth == s.history.size() && h.entry.kind == EntryKind::kFull) {
      store_->Reclassify(h.entry.id, CaptureReason::kBranch);
      return absl::OkStatus();
    }
  }
  const std::vector<float>* logits = s.logits_depth == s.history.size() && !s.logits.empty() ? &s.logits : nullptr;
  return CaptureAt(s, CaptureReason::kBranch, /*force_full=*/true, logits, static_cast<double>(dropped), nullptr);
}

absl::Status Capturer::Park(SequenceState& s, CaptureReason reason) {
  if (!enabled_ || s.history.empty() || s.memory->next_pos() != s.history.positions()) {
    return absl::OkStatus();
  }
  const size_t depth = s.history.size();
  const IndexMatch m = index_.Lookup(s.tenant, s.history.keys(), 0);
  // Worth what a fresh sequence would otherwise recompute: from the deepest
  // full snapshot on the path.
  size_t full_depth = 0;
  std::vector<uint64_t> superseded;
  for (const IndexHit& h : m.on_path) {
    if (h.entry.kind == EntryKind::kFull) {
      if (h.depth == depth) return absl::OkStatus();
      full_depth = std::max(full_depth, h.depth);
    }
    if (h.entry.kind == EntryKind::kCheckpoint && h.depth == depth) superseded.push_back(h.entry.id);
  }
  const std::vector<float>* logits = s.logits_depth == depth && !s.logits.empty() ? &s.logits : nullptr;
  absl::Status st = CaptureAt(s, reason, true, logits,
                              static_cast<double>(s.history.positions() - s.history.pos_after(full_depth)), nullptr);
  // A store that declines it (worth less than what it holds) is no error.
  if (absl::IsResourceExhausted(st)) return absl::OkStatus();
  if (!st.ok()) return st;
  for (uint64_t id : superseded) {
    Forget(id);
    store_->Erase(id);
  }
  return absl::OkStatus();
}

void Capturer::RetireTurnCheckpoints(SequenceState& s) {
  for (uint64_t id : s.turn_ids) {
    if (policy_.options().keep_turn_checkpoints) {
      store_->MarkStale(id);
    } else {
      Forget(id);
      store_->Erase(id);
    }
  }
  s.turn_ids.clear();
}

void Capturer::Forget(uint64_t id) {
  std::vector<PrefixIndex::Reparented> below;
  index_.Remove(id, &below);
  for (const PrefixIndex::Reparented& r : below) store_->SetCost(r.id, static_cast<double>(r.pos - r.parent_pos));
}

std::string Capturer::EncodeTag(const std::string& tenant, std::span<const SymbolKey> path, bool has_logits) const {
  // Only a disk tier outlives the process: without one the index is the
  // only reader and the tag would be wasted bytes.
  if (store_ == nullptr || store_->options().disk_dir.empty()) return {};
  std::string tag(kTagMagic, sizeof(kTagMagic));
  const uint32_t tl = static_cast<uint32_t>(tenant.size());
  const uint64_t n = path.size();
  tag.append(reinterpret_cast<const char*>(&tl), sizeof(tl));
  tag.append(tenant);
  tag.push_back(has_logits ? 1 : 0);
  tag.append(reinterpret_cast<const char*>(&n), sizeof(n));
  tag.append(reinterpret_cast<const char*>(path.data()), path.size() * sizeof(SymbolKey));
  return tag;
}

void Capturer::ReindexRecovered(uint64_t layout) {
  for (const CheckpointInfo& info : store_->List()) {
    if (info.layout != layout) continue;  // another model's
    const std::string& t = info.tag;
    if (t.size() < 4 + 4 || std::memcmp(t.data(), kTagMagic, 4) != 0) continue;
    uint32_t tl = 0;
    std::memcpy(&tl, t.data() + 4, 4);
    if (t.size() < 8 + size_t{tl} + 1 + 8) continue;
    std::string tenant = t.substr(8, tl);
    const bool has_logits = t[8 + tl] != 0;
    uint64_t n = 0;
    std::memcpy(&n, t.data() + 9 + tl, 8);
    if (t.size() != 17 + size_t{tl} + n * sizeof(SymbolKey)) continue;
    std::vector<SymbolKey> path(n);
    std::memcpy(path.data(), t.data() + 17 + tl, n * sizeof(SymbolKey));
    IndexEntry e;
    e.kind = info.scope == SnapshotScope::kFull ? EntryKind::kFull : EntryKind::kCheckpoint;
    e.id = info.id;
    e.pos = info.pos;
    e.has_logits = has_logits;
    e.bytes = info.bytes;
    index_.Insert(tenant, path, e).IgnoreError();
  }
}

}  // namespace cairn::checkpoint
