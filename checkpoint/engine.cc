#include "checkpoint/engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cairn::checkpoint {
namespace {

// Live sequence ids share the index's id space with store ids (which count
// up from 1): the top bits keep them apart.
constexpr uint64_t kLiveIdBase = uint64_t{1} << 62;
constexpr char kTagMagic[4] = {'C', 'K', 'T', '1'};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Whether an index entry can be the base under a checkpoint-scope snapshot:
// it holds a whole state (a full snapshot or another sequence), not a
// checkpoint-scope one, and is not the sequence being restored.
bool CanBeBase(const IndexHit& h, uint64_t live_id) {
  return h.entry.kind != EntryKind::kCheckpoint && h.entry.id != live_id;
}

}  // namespace

struct Sequence::State {
  std::mutex mu;  // held by engine calls on this sequence; others try_lock to copy it
  uint64_t live_id = 0;
  std::string tenant;
  bool isolated = false;  // see CheckpointEngine::Isolate
  std::unique_ptr<SequenceMemory> memory;
  SymbolPath history;
  // Logits of the row before history position `logits_depth` (the end of
  // the last prompt); valid while the history keeps that prefix.
  std::vector<float> logits;
  size_t logits_depth = 0;
  // Symbols at the newest checkpoint on the current history (for the value
  // of the next one: the recomputation it saves beyond that one).
  size_t newest_depth = 0;
  // The checkpoint this sequence captured last, and why (0: none since the
  // last prompt began).
  uint64_t newest_id = 0;
  CaptureReason newest_reason = CaptureReason::kMessageBoundary;
  // Checkpoints that serve only the next turn (tail points of the last
  // message, points inside the reply), and the size of the latest prompt
  // (see DropStaleTurnCheckpoints).
  std::vector<uint64_t> turn_ids;
  size_t turn_prompt_size = 0;
};

struct CheckpointEngine::Plan {
  ReuseCandidate c;
  EntryKind base_kind = EntryKind::kFull;  // kFull: store id; kLive: live sequence id
  uint64_t base_id = 0;
  size_t base_needs = 0;    // symbols of the prompt the base must hold
  uint64_t ckpt_id = 0;     // checkpoint-scope snapshot to restore (last)
  size_t restored_depth = 0;  // symbols of the restored state (on the prompt's path)
  Pos restored_pos = -1;
};

Sequence::Sequence(CheckpointEngine* engine, std::shared_ptr<State> state)
    : engine_(engine), state_(std::move(state)) {}

Sequence::~Sequence() { engine_->Unregister(*state_); }

const std::string& Sequence::tenant() const { return state_->tenant; }
bool Sequence::isolated() const { return state_->isolated; }
const SymbolPath& Sequence::history() const { return state_->history; }
Pos Sequence::next_pos() const { return state_->memory->next_pos(); }
SequenceMemory* Sequence::memory() { return state_->memory.get(); }

CheckpointEngine::CheckpointEngine(Backend* backend, std::shared_ptr<CheckpointStore> store,
                                   std::unique_ptr<PrefixIndex> index,
                                   const CheckpointOptions& options)
    : backend_(backend),
      store_(std::move(store)),
      index_(std::move(index)),
      options_(options),
      policy_(backend->info().caps, options.policy()) {}

absl::StatusOr<std::unique_ptr<CheckpointEngine>> CheckpointEngine::Create(
    Backend* backend, std::shared_ptr<CheckpointStore> store, const CheckpointOptions& options) {
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
  std::unique_ptr<CheckpointEngine> engine(
      new CheckpointEngine(backend, std::move(store), std::move(*index), options));
  if (engine->store_ != nullptr) {
    PrefixIndex* idx = engine->index_.get();
    CheckpointEngine* self = engine.get();
    engine->listener_ = engine->store_->AddDropListener([self](CheckpointId id) { self->Forget(id); });
    engine->branch_counter_ = engine->store_->AddBranchCounter([idx](CheckpointId id) { return idx->Branches(id); });
    engine->ReindexRecovered();
  }
  return engine;
}

CheckpointEngine::~CheckpointEngine() {
  if (store_ != nullptr && listener_ != 0) store_->RemoveDropListener(listener_);
  if (store_ != nullptr && branch_counter_ != 0) store_->RemoveBranchCounter(branch_counter_);
}

std::string CheckpointEngine::EncodeTag(const std::string& tenant, std::span<const SymbolKey> path,
                                        bool has_logits) const {
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

void CheckpointEngine::ReindexRecovered() {
  absl::StatusOr<std::unique_ptr<SequenceMemory>> probe = backend_->NewSequence();
  if (!probe.ok()) return;
  absl::StatusOr<Snapshot> empty = (*probe)->Capture(SnapshotScope::kFull);
  if (!empty.ok()) return;
  for (const CheckpointInfo& info : store_->List()) {
    if (info.layout != empty->layout) continue;  // another model's
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
    index_->Insert(tenant, path, e).IgnoreError();
  }
}

absl::StatusOr<std::unique_ptr<Sequence>> CheckpointEngine::NewSequence(const std::string& tenant) {
  absl::StatusOr<std::unique_ptr<SequenceMemory>> memory = backend_->NewSequence();
  if (!memory.ok()) return memory.status();
  auto state = std::make_shared<Sequence::State>();
  state->tenant = tenant;
  state->memory = std::move(*memory);
  {
    absl::MutexLock lock(&mu_);
    state->live_id = kLiveIdBase + next_live_++;
    live_[state->live_id] = state;
  }
  return std::unique_ptr<Sequence>(new Sequence(this, std::move(state)));
}

absl::StatusOr<std::unique_ptr<Sequence>> CheckpointEngine::Fork(Sequence& source) {
  absl::StatusOr<std::unique_ptr<Sequence>> fork = NewSequence(source.state_->tenant);
  if (!fork.ok()) return fork.status();
  Sequence::State& src = *source.state_;
  Sequence::State& dst = *(*fork)->state_;
  std::lock_guard<std::mutex> lock(src.mu);
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
  Sequence::State& s = *seq.state_;
  std::lock_guard<std::mutex> lock(s.mu);
  absl::StatusOr<Snapshot> snap = s.memory->Capture(SnapshotScope::kFull);
  if (!snap.ok()) return snap.status();
  return Exported{std::move(*snap), s.history};
}

absl::StatusOr<std::unique_ptr<Sequence>> CheckpointEngine::Import(const Exported& exported,
                                                                  const std::string& tenant) {
  if (exported.snapshot.scope != SnapshotScope::kFull ||
      exported.snapshot.pos != exported.history.positions()) {
    return absl::InvalidArgumentError("export is not a full snapshot at the end of its history");
  }
  absl::StatusOr<std::unique_ptr<Sequence>> seq = NewSequence(tenant);
  if (!seq.ok()) return seq.status();
  Sequence::State& s = *(*seq)->state_;
  if (absl::Status st = s.memory->Restore(exported.snapshot); !st.ok()) return st;
  s.history = exported.history;
  return seq;
}

void CheckpointEngine::Isolate(Sequence& seq) {
  Sequence::State& s = *seq.state_;
  std::lock_guard<std::mutex> lock(s.mu);
  index_->Remove(s.live_id);
  if (s.isolated) return;
  // 128 random bits after a byte no tenant derived from a caller holds: no
  // other sequence can share this partition except by forking this one.
  std::random_device rd;
  s.tenant = absl::StrCat(s.tenant, std::string("\0isolated:", 10), absl::Hex(rd()), absl::Hex(rd()),
                          absl::Hex(rd()), absl::Hex(rd()));
  s.isolated = true;
}

void CheckpointEngine::Unregister(Sequence::State& s) {
  if (enabled() && policy_.options().park_dropped) {
    // Never wait here: a sequence still held (a job its owner forgot) is
    // just not parked.
    std::unique_lock<std::mutex> lock(s.mu, std::try_to_lock);
    if (lock.owns_lock()) ParkLocked(s, CaptureReason::kDropped).IgnoreError();
  }
  {
    absl::MutexLock lock(&mu_);
    live_.erase(s.live_id);
  }
  index_->Remove(s.live_id);
}

void CheckpointEngine::Publish(Sequence::State& s) {
  if (!enabled()) return;
  index_->Remove(s.live_id);
  if (s.history.empty()) return;
  IndexEntry e;
  e.kind = EntryKind::kLive;
  e.id = s.live_id;
  e.pos = s.memory->next_pos();
  e.bytes = s.memory->Bytes(SnapshotScope::kFull);
  index_->Insert(s.tenant, s.history.keys(), e).IgnoreError();
}

size_t CheckpointEngine::LiveSequences() const {
  absl::MutexLock lock(&mu_);
  return live_.size();
}

EngineStats CheckpointEngine::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status CheckpointEngine::Validate(const Prompt& prompt) const {
  const ModelInfo& info = backend_->info();
  if (prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt.is_chunk(i)) {
      if (!info.accepts_embeddings) {
        return absl::InvalidArgumentError(
            absl::StrCat("model ", info.name, " does not take embedding chunks"));
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
    return absl::ResourceExhaustedError(absl::StrCat("prompt of ", prompt.positions(),
                                                     " positions exceeds the context of ",
                                                     info.n_ctx_train));
  }
  return absl::OkStatus();
}

std::vector<CheckpointEngine::Plan> CheckpointEngine::Candidates(
    Sequence::State& s, const Prompt& prompt, const IndexMatch& match,
    const std::vector<uint64_t>& excluded) const {
  const size_t n = prompt.size();
  const size_t L = CommonPrefix(s.history.keys(), prompt.keys());
  const MemoryCapabilities caps = s.memory->caps();
  const MemoryCapabilities static_caps = backend_->info().caps;
  const Pos next = s.memory->next_pos();
  // Excluded ids failed earlier in this call; snapshots may also have been
  // evicted since the lookup (by this call's own captures, or other sessions).
  auto is_excluded = [&](uint64_t id) {
    if (std::find(excluded.begin(), excluded.end(), id) != excluded.end()) return true;
    return id < kLiveIdBase && store_ != nullptr && !store_->Contains(id);
  };
  std::vector<Plan> out;
  {  // From scratch: always possible.
    Plan p;
    p.c = {ReuseKind::kLive, 0, 0, 0, false};
    out.push_back(p);
  }
  {  // The sequence itself, cut back if needed.
    size_t d = std::min(L, n);
    const bool logits = d == n && s.logits_depth == n && !s.logits.empty();
    if (d == n && !logits) d = n - 1;
    if (CheckpointPolicy::CanCut(caps, next, prompt.pos_after(d))) {
      Plan p;
      p.c = {ReuseKind::kLive, d, prompt.pos_after(d), 0, logits};
      out.push_back(p);
    }
  }
  if (!enabled()) return out;

  // Cheapest base holding at least `need` prompt symbols (a full snapshot or
  // another sequence); false when none.
  auto find_base = [&](size_t need, Plan& p) {
    bool found = false;
    auto consider = [&](const IndexHit& h) {
      if (!CanBeBase(h, s.live_id) || is_excluded(h.entry.id)) return;
      if (!found || h.entry.bytes < p.c.copy_bytes) {
        p.base_kind = h.entry.kind;
        p.base_id = h.entry.id;
        p.base_needs = need;
        p.c.copy_bytes = h.entry.bytes;
        found = true;
      }
    };
    for (const IndexHit& h : match.on_path) {
      if (h.depth >= need) consider(h);
    }
    if (match.matched >= need) {
      for (const IndexHit& h : match.below) consider(h);
    }
    return found;
  };

  for (const IndexHit& h : match.on_path) {
    const size_t e = h.depth;
    if (e == 0 || e > n || is_excluded(h.entry.id) || h.entry.id == s.live_id) continue;
    const bool logits = e == n && h.entry.has_logits;
    Plan p;
    p.restored_depth = e;
    p.restored_pos = h.entry.pos;
    if (e == n && !logits) {
      // The state is at the prompt end but the last row's logits are
      // missing: usable only when it can be cut back one symbol.
      if (!CheckpointPolicy::CanCut(static_caps, h.entry.pos, prompt.pos_after(n - 1))) continue;
      p.c.symbols = n - 1;
    } else {
      p.c.symbols = e;
    }
    p.c.positions = prompt.pos_after(p.c.symbols);
    p.c.has_logits = logits;
    switch (h.entry.kind) {
      case EntryKind::kCheckpoint: {
        if (p.c.symbols != e) continue;  // a checkpoint scope snapshot cannot be cut further here
        p.ckpt_id = h.entry.id;
        if (L >= e) {
          p.c.kind = ReuseKind::kCheckpointOnLive;
          p.c.copy_bytes = h.entry.bytes;
        } else {
          if (!find_base(e, p)) continue;
          p.c.kind = ReuseKind::kBaseAndCheckpoint;
          p.c.copy_bytes += h.entry.bytes;
        }
        break;
      }
      case EntryKind::kFull:
        p.c.kind = ReuseKind::kFullSnapshot;
        p.base_kind = EntryKind::kFull;
        p.base_id = h.entry.id;
        p.base_needs = e;
        p.c.copy_bytes = h.entry.bytes;
        break;
      case EntryKind::kLive:
        p.c.kind = ReuseKind::kOtherSequence;
        p.c.has_logits = false;
        if (e == n) {
          if (!CheckpointPolicy::CanCut(static_caps, h.entry.pos, prompt.pos_after(n - 1))) continue;
          p.c.symbols = n - 1;
          p.c.positions = prompt.pos_after(n - 1);
        }
        p.base_kind = EntryKind::kLive;
        p.base_id = h.entry.id;
        p.base_needs = p.c.symbols;
        p.c.copy_bytes = h.entry.bytes;
        break;
    }
    out.push_back(p);
  }
  // Full states that continue differently: restore, then cut back to the
  // shared part (memories that can be cut that far only).
  for (const IndexHit& h : match.below) {
    if (h.entry.id == s.live_id || is_excluded(h.entry.id)) continue;
    const size_t d = std::min(match.matched, n - 1);
    if (d == 0 || !CheckpointPolicy::CanCut(static_caps, h.entry.pos, prompt.pos_after(d))) continue;
    Plan p;
    p.c = {h.entry.kind == EntryKind::kFull ? ReuseKind::kFullSnapshot : ReuseKind::kOtherSequence,
           d, prompt.pos_after(d), h.entry.bytes, false};
    p.base_kind = h.entry.kind;
    p.base_id = h.entry.id;
    p.base_needs = d;
    p.restored_depth = d;
    p.restored_pos = h.entry.pos;
    out.push_back(p);
  }
  return out;
}

absl::StatusOr<Snapshot> CheckpointEngine::CaptureOther(uint64_t live_id, const Prompt& prompt,
                                                        size_t depth) {
  std::shared_ptr<Sequence::State> other;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(live_id);
    if (it != live_.end()) other = it->second.lock();
  }
  if (other == nullptr) return absl::NotFoundError("sequence is gone");
  // Never wait for another session: if it is busy, use something else.
  std::unique_lock<std::mutex> lock(other->mu, std::try_to_lock);
  if (!lock.owns_lock()) return absl::UnavailableError("sequence is busy");
  if (CommonPrefix(other->history.keys(), prompt.keys()) < depth) {
    return absl::FailedPreconditionError("sequence moved on");
  }
  return other->memory->Capture(SnapshotScope::kFull);
}

absl::Status CheckpointEngine::Apply(Sequence::State& s, const Prompt& prompt, const Plan& plan,
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
  std::shared_ptr<const Checkpoint> base_cp, ckpt;
  Snapshot other;
  const bool has_base = plan.c.kind != ReuseKind::kCheckpointOnLive;
  if (has_base) {
    if (plan.base_kind == EntryKind::kFull) {
      absl::StatusOr<std::shared_ptr<const Checkpoint>> got = store_->Get(plan.base_id);
      if (!got.ok()) {
        *failed_id = plan.base_id;
        return got.status();
      }
      base_cp = std::move(*got);
    } else {
      absl::StatusOr<Snapshot> got = CaptureOther(plan.base_id, prompt, plan.base_needs);
      if (!got.ok()) {
        *failed_id = plan.base_id;
        return got.status();
      }
      // The other sequence may have moved past the shared part: check the
      // cut is possible before touching this sequence.
      if (plan.ckpt_id == 0 && got->pos != target &&
          !CheckpointPolicy::CanCut(backend_->info().caps, got->pos, target)) {
        *failed_id = plan.base_id;
        return absl::FailedPreconditionError("other sequence cannot be cut back to the shared part");
      }
      other = std::move(*got);
    }
  }
  if (plan.ckpt_id != 0) {
    absl::StatusOr<std::shared_ptr<const Checkpoint>> got = store_->Get(plan.ckpt_id);
    if (!got.ok()) {
      *failed_id = plan.ckpt_id;
      return got.status();
    }
    ckpt = std::move(*got);
  }
  if (has_base) {
    const Snapshot& snap = base_cp ? base_cp->snapshot : other;
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
    if (plan.ckpt_id == 0 && plan.c.has_logits && base_cp) *logits = base_cp->logits;
  }
  if (ckpt) {
    if (absl::Status st = s.memory->Restore(ckpt->snapshot); !st.ok()) {
      *failed_id = plan.ckpt_id;
      return st;
    }
    if (plan.c.has_logits) *logits = ckpt->logits;
  }
  if (s.memory->next_pos() != target) {
    return absl::InternalError("restored state is not at the planned position");
  }
  s.history.AssignPrefix(prompt.path(), d);
  return absl::OkStatus();
}

PutInfo CheckpointEngine::Describe(const Sequence::State& s, CaptureReason reason, double cost) const {
  PutInfo info;
  info.cost = std::max(cost, 1.0);
  info.reason = reason;
  info.path_key = PathKey(s.tenant, s.history.keys());
  return info;
}

bool CheckpointEngine::WorthCapturing(SnapshotScope scope, size_t bytes, Pos pos, const PutInfo& info) const {
  return store_->WouldAdmit(bytes, scope, pos, info);
}

absl::Status CheckpointEngine::CaptureAt(Sequence::State& s, CaptureReason reason, bool force_full,
                                         const std::vector<float>* logits, double cost,
                                         PrefillStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  const SnapshotScope scope =
      force_full ? SnapshotScope::kFull
                 : policy_.ScopeFor(s.memory->Bytes(SnapshotScope::kCheckpoint),
                                    s.memory->Bytes(SnapshotScope::kFull));
  const size_t logits_bytes = logits != nullptr ? logits->size() * sizeof(float) : 0;
  if (!WorthCapturing(scope, s.memory->Bytes(scope) + logits_bytes, s.memory->next_pos(),
                      Describe(s, reason, cost))) {
    return absl::ResourceExhaustedError("the store would not admit this checkpoint");
  }
  absl::StatusOr<Snapshot> snap = s.memory->Capture(scope);
  if (!snap.ok()) return snap.status();
  return Keep(s, reason, std::move(*snap), logits, cost, stats, t0);
}

absl::Status CheckpointEngine::Keep(Sequence::State& s, CaptureReason reason, Snapshot snapshot,
                                    const std::vector<float>* logits, double cost, PrefillStats* stats,
                                    std::chrono::steady_clock::time_point started) {
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
  if (absl::Status st = index_->Insert(s.tenant, s.history.keys(), e); !st.ok()) {
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
  absl::MutexLock lock(&mu_);
  ++stats_.captures;
  stats_.capture_bytes += bytes;
  stats_.capture_seconds += secs;
  return absl::OkStatus();
}

void CheckpointEngine::Forget(uint64_t id) {
  std::vector<PrefixIndex::Reparented> below;
  index_->Remove(id, &below);
  for (const PrefixIndex::Reparented& r : below) store_->SetCost(r.id, static_cast<double>(r.pos - r.parent_pos));
}

void CheckpointEngine::RetireTurnCheckpoints(Sequence::State& s) {
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

void CheckpointEngine::CaptureDuringGeneration(Sequence::State& s) {
  if (!enabled() || s.history.empty()) return;
  const Pos since = s.history.positions() - s.history.pos_after(s.newest_depth);
  const Pos every = policy_.GenerationSpacing(s.memory->Bytes(SnapshotScope::kCheckpoint),
                                             store_->options().ram_budget_bytes, LiveSequences());
  if (!policy_.CaptureDuringGeneration(since, every)) return;
  if (!CaptureAt(s, CaptureReason::kDuringGeneration, false, nullptr, static_cast<double>(since), nullptr).ok()) {
    absl::MutexLock l(&mu_);
    ++stats_.capture_failures;
  }
}

absl::Status CheckpointEngine::PreserveIfUseful(Sequence::State& s, size_t keep_symbols) {
  if (!enabled() || s.history.empty()) return absl::OkStatus();
  const Pos dropped = s.memory->next_pos() - s.history.pos_after(std::min(keep_symbols, s.history.size()));
  if (!policy_.PreserveBranch(dropped)) return absl::OkStatus();
  // Already kept (after-generation capture, an earlier preservation)? It
  // is now the end of an abandoned branch, which its retention should know.
  const IndexMatch m = index_->Lookup(s.tenant, s.history.keys(), 0);
  for (const IndexHit& h : m.on_path) {
    if (h.depth == s.history.size() && h.entry.kind == EntryKind::kFull) {
      store_->Reclassify(h.entry.id, CaptureReason::kBranch);
      return absl::OkStatus();
    }
  }
  const std::vector<float>* logits =
      s.logits_depth == s.history.size() && !s.logits.empty() ? &s.logits : nullptr;
  return CaptureAt(s, CaptureReason::kBranch, /*force_full=*/true, logits,
                   static_cast<double>(dropped), nullptr);
}

absl::StatusOr<std::unique_ptr<PrefillJob>> CheckpointEngine::StartPrefill(Sequence& seq,
                                                                          const Prompt& prompt) {
  if (absl::Status st = Validate(prompt); !st.ok()) return st;
  std::unique_ptr<PrefillJob> job(new PrefillJob());
  job->engine_ = this;
  job->state_ = seq.state_;
  job->lock_ = std::unique_lock<std::mutex>(seq.state_->mu);
  Sequence::State& s = *job->state_;
  if (s.memory->next_pos() != s.history.positions()) {
    job->finished_ = true;  // nothing to publish: the caller broke the sequence
    return absl::FailedPreconditionError(absl::StrCat(
        "sequence memory is at ", s.memory->next_pos(), " but its history ends at ",
        s.history.positions(), ": call Append after running Forward on it"));
  }
  job->prompt_ = prompt;
  PrefillStats& stats = job->result_.stats;
  stats.prompt_symbols = prompt.size();
  stats.prompt_positions = prompt.positions();
  const size_t n = prompt.size();

  IndexMatch& match = job->match_;
  if (enabled()) {
    store_->BeginRequest();
    match = index_->Lookup(s.tenant, prompt.keys());
  }
  const size_t live_common = CommonPrefix(s.history.keys(), prompt.keys());

  // Choose and apply the best reuse; a candidate that fails (evicted,
  // corrupt, busy, moved on) is excluded and the choice made again.
  std::vector<uint64_t>& excluded = job->excluded_;
  std::vector<float> logits;
  bool preserved = false;
  const auto t_restore = std::chrono::steady_clock::now();
  Plan chosen;
  std::vector<Plan> candidates;
  for (int attempt = 0;; ++attempt) {
    candidates = Candidates(s, prompt, match, excluded);
    std::vector<ReuseCandidate> options;
    for (const Plan& p : candidates) options.push_back(p.c);
    chosen = candidates[CheckpointPolicy::ChooseRestore(options)];
    if (attempt >= 4) chosen = candidates[0];  // from scratch: Truncate(0) cannot fail
    const bool changes = !(chosen.c.kind == ReuseKind::kLive && chosen.c.symbols == s.history.size());
    if (changes && !preserved) {
      preserved = true;
      PreserveIfUseful(s, std::min(live_common, chosen.c.symbols)).IgnoreError();  // an optimization
    }
    uint64_t failed_id = 0;
    logits.clear();
    absl::Status st = Apply(s, prompt, chosen, &logits, &failed_id);
    if (st.ok()) break;
    {
      absl::MutexLock l(&mu_);
      ++stats_.restore_failures;
    }
    if (failed_id != 0) {
      excluded.push_back(failed_id);
      if (st.code() == absl::StatusCode::kNotFound || st.code() == absl::StatusCode::kDataLoss) {
        Forget(failed_id);
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
  if (enabled()) {
    // What the restored checkpoint saved beyond the best plan without it
    // and without the other snapshots inside its own message (tail points,
    // the prompt end, points inside a reply, which a store under pressure
    // rarely keeps together): its realized value, for the store's
    // retention policy. Crediting a prompt end only the few positions past
    // the tail point beside it made both look worthless.
    const uint64_t used = chosen.ckpt_id != 0 ? chosen.ckpt_id
                                              : (chosen.base_kind == EntryKind::kFull ? chosen.base_id : 0);
    if (used != 0 && chosen.c.kind != ReuseKind::kLive && chosen.c.kind != ReuseKind::kOtherSequence) {
      Pos without = 0;
      size_t message_start = 0;
      for (size_t m : prompt.message_ends()) {
        if (m < chosen.c.symbols) message_start = std::max(message_start, m);
      }
      for (const Plan& p : candidates) {
        const bool stored = p.ckpt_id != 0 || (p.base_kind == EntryKind::kFull && p.base_id != 0);
        if (stored && p.c.symbols > message_start) continue;
        if (p.ckpt_id != used && !(p.base_kind == EntryKind::kFull && p.base_id == used)) {
          without = std::max(without, p.c.positions);
        }
      }
      store_->Credit(used, static_cast<double>(std::max<Pos>(chosen.c.positions - without, 0)));
    }
  }
  const size_t i = s.history.size();
  job->i_ = i;
  if (enabled() && i < n && store_->RemembersMissed()) {
    // Would a checkpoint the store pushed out or refused have resumed this
    // prompt further on? Its policy learns from the answer. A checkpoint
    // scope snapshot serves only up to where this sequence's own history or
    // a full base (Candidates) holds the rest of the memory.
    size_t partial_up_to = std::min(live_common, n);
    for (const IndexHit& h : match.on_path) {
      if (CanBeBase(h, s.live_id)) partial_up_to = std::max(partial_up_to, h.depth);
    }
    if (std::any_of(match.below.begin(), match.below.end(),
                    [&](const IndexHit& h) { return CanBeBase(h, s.live_id); })) {
      partial_up_to = std::max(partial_up_to, match.matched);
    }
    store_->NoteMissed(PrefixPathKeys(s.tenant, prompt.keys(), i, n), n - std::max(partial_up_to, i));
  }
  if (s.logits_depth > i) {
    s.logits.clear();
    s.logits_depth = 0;
  }
  stats.source = chosen.c.kind;
  if (chosen.c.kind != ReuseKind::kLive) {
    stats.restored_pos = chosen.restored_pos;
    stats.restore_seconds = SecondsSince(t_restore);
    absl::MutexLock l(&mu_);
    ++stats_.restores;
    stats_.restore_seconds += stats.restore_seconds;
  }
  // The newest snapshot on this path at or before the resume point.
  s.newest_id = 0;
  if (chosen.c.kind == ReuseKind::kLive) {
    s.newest_depth = std::min(s.newest_depth, i);
  } else {
    s.newest_depth = chosen.restored_depth <= i ? chosen.restored_depth : i;
  }
  for (const IndexHit& h : match.on_path) {
    if (h.entry.kind != EntryKind::kLive && h.depth <= i) s.newest_depth = std::max(s.newest_depth, h.depth);
  }
  stats.reused = prompt.pos_after(i);
  if (enabled()) {
    // This prompt goes on past the one the turn's checkpoints served (a new
    // turn, not an edit or a regenerate): they are stale.
    if (n > s.turn_prompt_size && i >= s.turn_prompt_size) RetireTurnCheckpoints(s);
    s.turn_prompt_size = n;
  }

  if (i == n) {  // full reuse with logits: no forward pass at all
    if (logits.size() != static_cast<size_t>(backend_->info().n_vocab)) {
      job->error_ = absl::InternalError("reused logits have the wrong size");
      return job;
    }
    stats.logits_from_checkpoint = true;
    job->result_.logits = std::move(logits);
    return job;
  }
  // Capture points for the rest; the ones already on this path are skipped.
  if (enabled()) {
    // Where the prompt leaves the deepest path the index knows, when this
    // prefill recomputes through it. Beyond the sequence's own history the
    // path is another conversation's: a shared prefix, kept restorable onto
    // any sequence.
    const size_t divergence = match.matched > i ? std::min(match.matched, n) : 0;
    const bool shared = match.matched > live_common;
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
    const Pos tail_every = policy_.TailSpacing(s.memory->Bytes(SnapshotScope::kCheckpoint),
                                               store_->options().ram_budget_bytes, LiveSequences());
    job->points_ = policy_.PlanPrefill(job->prompt_, i, exists, cut_window, tail_every, divergence);
    for (CapturePoint& pt : job->points_) pt.full = pt.reason == CaptureReason::kDivergence && shared;
  }
  job->CaptureDue();
  return job;
}

PrefillJob::~PrefillJob() {
  if (!finished_) Finish(absl::CancelledError("prefill job dropped")).IgnoreError();
}

bool PrefillJob::done() const { return !error_.ok() || i_ == prompt_.size(); }

void PrefillJob::CaptureDue() {
  Sequence::State& s = *state_;
  while (next_point_ < points_.size() && points_[next_point_].symbols <= i_) {
    const CapturePoint& pt = points_[next_point_++];
    if (pt.symbols != i_) continue;
    const double cost = static_cast<double>(s.history.positions() - s.history.pos_after(s.newest_depth));
    // Capture failures (budget, a memory inside a chunk) only cost reuse later.
    if (!engine_->CaptureAt(s, pt.reason, pt.full, pt.keep_logits ? &result_.logits : nullptr, cost,
                            &result_.stats)
             .ok()) {
      absl::MutexLock l(&engine_->mu_);
      ++engine_->stats_.capture_failures;
    }
  }
}

SequenceRun PrefillJob::NextRun(int32_t max_tokens) {
  Sequence::State& s = *state_;
  const size_t n = prompt_.size();
  size_t end = i_ + 1;
  // Capture points inside a token run become its snapshot rows where the
  // backend supports them: one Forward call instead of one per point.
  const bool in_run = engine_->backend_->info().snapshots_within_run && !prompt_.is_chunk(i_);
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
  if (in_run) {
    const size_t state_bytes = s.memory->Bytes(SnapshotScope::kCheckpoint);
    Pos newest = s.history.pos_after(s.newest_depth);
    for (size_t k = next_point_; k < points_.size() && points_[k].symbols < end; ++k) {
      if (points_[k].symbols <= i_) continue;
      // Only the points the store would admit: the others are not worth a copy.
      const Pos pos = prompt_.pos_after(points_[k].symbols);
      PutInfo info;
      info.cost = std::max<double>(pos - newest, 1);
      info.reason = points_[k].reason;
      info.path_key = PathKey(s.tenant, prompt_.keys().subspan(0, points_[k].symbols));
      if (!engine_->WorthCapturing(SnapshotScope::kCheckpoint, state_bytes, pos, info)) continue;
      newest = pos;
      snapshot_rows_.push_back(static_cast<int32_t>(points_[k].symbols - i_ - 1));
      snapshot_reasons_.push_back(points_[k].reason);
    }
  }
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
  Sequence::State& s = *state_;
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
          !engine_->Keep(s, snapshot_reasons_[snap], std::move(logits.snapshots[snap]), nullptr, cost,
                         &result_.stats, t0)
               .ok()) {
        absl::MutexLock l(&engine_->mu_);
        ++engine_->stats_.capture_failures;
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
  Sequence::State& s = *state_;
  if (error.ok()) error = error_;
  if (error.ok() && i_ != prompt_.size()) error = absl::CancelledError("prompt processing cancelled");
  if (error.ok()) {
    s.logits = result_.logits;
    s.logits_depth = prompt_.size();
  }
  engine_->Publish(s);
  {
    const PrefillStats& stats = result_.stats;
    absl::MutexLock l(&engine_->mu_);
    ++engine_->stats_.prompts;
    engine_->stats_.prompt_positions += stats.prompt_positions;
    engine_->stats_.reused += stats.reused;
    engine_->stats_.recomputed += stats.recomputed;
    engine_->stats_.forward_seconds += stats.forward_seconds;
  }
  if (lock_.owns_lock()) lock_.unlock();
  if (!error.ok()) return error;
  return std::move(result_);
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
  Sequence::State& s = *seq.state_;
  std::lock_guard<std::mutex> lock(s.mu);
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
  {
    absl::MutexLock l(&mu_);
    stats_.forward_seconds += SecondsSince(t0);
  }
  CaptureDuringGeneration(s);
  const std::span<const float> r = (*out)[0].row(0);
  return std::vector<float>(r.begin(), r.end());
}

absl::Status CheckpointEngine::Append(Sequence& seq, std::span<const TokenId> tokens) {
  SequenceHold hold(seq);
  return hold.Append(tokens);
}

SequenceHold::SequenceHold(Sequence& seq) : engine_(seq.engine_), state_(seq.state_), lock_(state_->mu) {}

absl::Status SequenceHold::Append(std::span<const TokenId> tokens) {
  if (!lock_.owns_lock()) return absl::FailedPreconditionError("sequence hold was released");
  Sequence::State& s = *state_;
  if (s.memory->next_pos() != s.history.positions() + static_cast<Pos>(tokens.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sequence memory is at ", s.memory->next_pos(), " but its history ends at ",
        s.history.positions(), " + ", tokens.size(), " appended tokens"));
  }
  for (TokenId t : tokens) s.history.Push(static_cast<SymbolKey>(static_cast<uint32_t>(t)), 1);
  engine_->CaptureDuringGeneration(s);
  return absl::OkStatus();
}

void SequenceHold::Release() {
  if (lock_.owns_lock()) lock_.unlock();
}

absl::Status CheckpointEngine::EndGeneration(Sequence& seq) {
  Sequence::State& s = *seq.state_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (enabled() && s.newest_id != 0 && s.newest_depth == s.history.size() &&
      s.newest_reason == CaptureReason::kDuringGeneration) {
    // The reply ended on a point taken inside it: that checkpoint is the end
    // of the conversation (the next turn's start), not a short-lived one.
    store_->Reclassify(s.newest_id, CaptureReason::kAfterGeneration);
    s.turn_ids.erase(std::remove(s.turn_ids.begin(), s.turn_ids.end(), s.newest_id), s.turn_ids.end());
    s.newest_reason = CaptureReason::kAfterGeneration;
  }
  if (enabled() && !s.history.empty() &&
      policy_.CaptureAfterGeneration(s.history.positions() - s.history.pos_after(s.newest_depth))) {
    const IndexMatch m = index_->Lookup(s.tenant, s.history.keys(), 0);
    bool exists = false;
    for (const IndexHit& h : m.on_path) {
      exists |= h.depth == s.history.size() && h.entry.kind != EntryKind::kLive;
    }
    if (!exists) {
      const double cost = static_cast<double>(s.history.positions() - s.history.pos_after(s.newest_depth));
      // A capture that does not fit only costs reuse later: not an error.
      if (!CaptureAt(s, CaptureReason::kAfterGeneration, false, nullptr, cost, nullptr).ok()) {
        absl::MutexLock l(&mu_);
        ++stats_.capture_failures;
      }
    }
  }
  Publish(s);
  return absl::OkStatus();
}

absl::Status CheckpointEngine::Park(Sequence& seq) {
  Sequence::State& s = *seq.state_;
  std::lock_guard<std::mutex> lock(s.mu);
  return ParkLocked(s, CaptureReason::kParked);
}

absl::Status CheckpointEngine::ParkLocked(Sequence::State& s, CaptureReason reason) {
  if (!enabled() || s.history.empty() || s.memory->next_pos() != s.history.positions()) {
    return absl::OkStatus();
  }
  const size_t depth = s.history.size();
  const IndexMatch m = index_->Lookup(s.tenant, s.history.keys(), 0);
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

}  // namespace cairn::checkpoint
