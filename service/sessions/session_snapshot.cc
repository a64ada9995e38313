#include "service/sessions/session_snapshot.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/prompt.h"
#include "service/sessions/history_proto.h"
#include "service/sessions/snapshot_seal.h"

namespace cairn::service {

namespace {

constexpr int32_t kSnapshotVersion = 2;

absl::StatusOr<v1::SessionSnapshot> CaptureUnsealed(Session& s, CaptureMode mode, MemoryBudget* budget) {
  ServedModel& model = *s.model;
  v1::SessionSnapshot snap;
  snap.set_version(kSnapshotVersion);
  snap.set_model(model.name);
  snap.set_arch(model.info().arch);
  snap.set_n_vocab(model.info().n_vocab);
  snap.set_session_id(s.id);
  HistoryToProto(s.history, &snap);
  if (s.history.empty()) return snap;
  checkpoint::Prompt p;
  if (absl::Status st = s.history.ToPrompt(model.info().n_embd, &p); !st.ok()) return st;
  const auto held = s.seq->history().keys();
  const size_t common = checkpoint::CommonPrefix(held, p.keys());
  if (mode == CaptureMode::kAsHeld) {
    if (held.empty() || common != held.size()) return snap;  // no state: recomputed where restored
  } else if (held.size() != p.size() || common != p.size()) {
    if (budget != nullptr) {
      const int64_t rows = s.history.RowsOf(s.history.size());
      if (absl::Status st = s.memory.Grow(model.SequenceBytes(rows),
                                          absl::StrCat("exporting session '", s.id, "' (", rows, " rows)"));
          !st.ok()) {
        return st;
      }
    }
    auto r = model.engine->Prefill(*s.seq, p);
    if (budget != nullptr) s.memory.Set(model.HeldBytes(*s.seq, s.history.size()));
    if (!r.ok()) return r.status();
  }
  auto state = s.seq->memory()->Capture(SnapshotScope::kFull);
  if (!state.ok()) return state.status();
  snap.set_layout(state->layout);
  snap.set_pos(state->pos);
  snap.set_state(state->data.data(), state->data.size());
  return snap;
}

}  // namespace

absl::StatusOr<v1::SessionSnapshot> CaptureSession(Session& s, CaptureMode mode, MemoryBudget* budget,
                                                   const std::string& key) {
  auto snap = CaptureUnsealed(s, mode, budget);
  if (!snap.ok()) return snap;
  SealSnapshot(s.seq->isolated() ? std::string() : key, &*snap);
  return snap;
}

absl::StatusOr<SessionLease> RestoreSession(const v1::SessionSnapshot& snap, const std::string& model_name,
                                            const std::string& id, const Caller& caller, const ModelRegistry& models,
                                            SessionManager& sessions, MemoryBudget* budget, const std::string& key) {
  if (snap.version() != kSnapshotVersion) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported snapshot version ", snap.version(),
                                                   " (this server reads version ", kSnapshotVersion, ")"));
  }
  auto provenance = VerifySnapshot(key, snap);
  if (!provenance.ok()) return provenance.status();
  const std::string name = model_name.empty() ? snap.model() : model_name;
  auto model_or = models.Find(name);
  if (!model_or.ok()) return model_or.status();
  ServedModel& model = **model_or;
  if (snap.model() != model.name || snap.arch() != model.info().arch || snap.n_vocab() != model.info().n_vocab) {
    return absl::FailedPreconditionError(absl::StrCat("snapshot is of model '", snap.model(), "' (", snap.arch(),
                                                      "), not '", model.name, "' (", model.info().arch, ")"));
  }
  auto history = HistoryFromProto(model, snap);
  if (!history.ok()) return history.status();
  History& h = *history;
  if (h.PositionsOf(h.size()) >= model.context_length()) {
    return absl::ResourceExhaustedError("snapshot history does not fit the model's context");
  }
  Snapshot state;
  size_t k = 0;  // history items the state covers
  bool tokens_only = true;
  if (!snap.state().empty()) {
    state.pos = snap.pos();
    state.scope = SnapshotScope::kFull;
    state.layout = snap.layout();
    state.data.assign(snap.state().begin(), snap.state().end());
    while (k < h.size() && h.PositionsOf(k) < state.pos) {
      tokens_only &= !h.items[k].is_chunk();
      ++k;
    }
    if (state.pos <= 0 || h.PositionsOf(k) != state.pos) {
      return absl::InvalidArgumentError("snapshot state position does not match its history");
    }
  }
  // The budget must hold the restored state (bounded like any sequence of
  // that many rows) before the session exists.
  const int64_t state_rows = h.RowsOf(k);
  auto lease = sessions.Create(
      &model, caller.owner, caller.cache_tenant, state.data.empty() ? 0 : model.SequenceBytes(state_rows),
      absl::StrCat("an imported session of ", state_rows, " rows on model '", model.name, "'"), id);
  if (!lease.ok()) return lease.status();
  Session& s = **lease;
  if (!state.data.empty()) {
    if (*provenance != SnapshotProvenance::kAuthenticated) model.engine->Isolate(*s.seq);
    if (absl::Status st = s.seq->memory()->Restore(state); !st.ok()) {
      const std::string new_id = s.id;
      lease->Reset();  // releases the session so that it can be deleted
      sessions.Delete(new_id, caller.owner).IgnoreError();
      return absl::FailedPreconditionError(
          absl::StrCat("snapshot does not fit model '", model.name, "': ", st.message()));
    }
    // Tell the engine what the restored memory holds. A history with chunks
    // cannot be recorded this way: the state is dropped and the next
    // Generate recomputes it (exact either way).
    std::vector<TokenId> tokens;
    for (size_t i = 0; i < k; ++i) tokens.push_back(h.items[i].token);
    if (!tokens_only || !model.engine->Append(*s.seq, tokens).ok()) {
      s.seq->memory()->Truncate(0).IgnoreError();
    }
  }
  s.history = std::move(h);
  if (budget != nullptr) s.memory.Set(model.HeldBytes(*s.seq, s.history.size()));
  return lease;
}

}  // namespace cairn::service
