// A session as a portable snapshot (cairn.v1.SessionSnapshot: history plus
// full state) and back: SessionControl export and import, and the session
// directory that lets another replica continue a session.
#ifndef CAIRN_SERVICE_SESSIONS_SESSION_SNAPSHOT_H_
#define CAIRN_SERVICE_SESSIONS_SESSION_SNAPSHOT_H_

#include <string>

#include "absl/status/statusor.h"
#include "cairn/v1/inference.pb.h"
#include "service/host/memory_budget.h"
#include "service/host/models.h"
#include "service/sessions/caller.h"
#include "service/sessions/sessions.h"

namespace cairn::service {

enum class CaptureMode {
  // First run what the live sequence lacks of the history (after a rewind,
  // or the last generated token of a reply), so the state covers all of it:
  // an export, which a client may import anywhere.
  kWholeHistory,
  // The state as the sequence holds it now when that is a prefix of the
  // history, else no state: nothing is computed (persisting a session after
  // each request must not do the next request's work).
  kAsHeld,
};

// The caller leases `s`. `budget` (may be null) must hold the sequence's
// growth in kWholeHistory mode (RESOURCE_EXHAUSTED otherwise); errors from
// the engine and from Capture. The snapshot is sealed (snapshot_seal.h):
// signed with `key` unless the key is empty or the session's state is
// isolated (it came from an unauthenticated import, so this server cannot
// vouch for it).
absl::StatusOr<v1::SessionSnapshot> CaptureSession(Session& s, CaptureMode mode, MemoryBudget* budget,
                                                   const std::string& key);

// A new session from `snap`, leased to the caller, owned by `caller`.
// `model_name` empty: the snapshot's model. `id` empty: a new id (else the
// rules of SessionManager::Create). A state not signed with `key` (or any
// state when `key` is empty) is isolated (CheckpointEngine::Isolate): it
// serves this session and its forks only. INVALID_ARGUMENT for an unknown
// version, a missing or wrong checksum or malformed content, NOT_FOUND for an unserved model,
// FAILED_PRECONDITION for a snapshot of another model or a state that does
// not fit it, RESOURCE_EXHAUSTED for the context, session count or budget,
// ALREADY_EXISTS for an id in use. Nothing is left behind on error.
absl::StatusOr<SessionLease> RestoreSession(const v1::SessionSnapshot& snap, const std::string& model_name,
                                            const std::string& id, const Caller& caller, const ModelRegistry& models,
                                            SessionManager& sessions, MemoryBudget* budget, const std::string& key);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SESSIONS_SESSION_SNAPSHOT_H_
