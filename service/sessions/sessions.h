// Sessions: conversations kept live between requests. Each holds a History
// (the truth) and a checkpoint::Sequence (its cached state), on one model.
#ifndef CAIRN_SERVICE_SESSIONS_SESSIONS_H_
#define CAIRN_SERVICE_SESSIONS_SESSIONS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "checkpoint/engine.h"
#include "service/host/memory_budget.h"
#include "service/scheduling/history.h"

namespace cairn::service {

struct ServedModel;

struct Session {
  std::string id;      // 32 hex digits (128 random bits), or chosen by the client
  std::string tenant;  // owner ("" without authentication)
  ServedModel* model = nullptr;
  // seq's bytes in the live-memory budget (see memory_budget.h), used under
  // the lease. Declared before seq, so released after it is freed.
  MemoryReservation memory;
  std::unique_ptr<checkpoint::Sequence> seq;
  // The committed history: the conversation as it stands. The lease holder
  // reads it freely and changes it only through Commit; other threads read
  // it through Committed (GetSession and ListSessions on a busy session), so
  // what they report is final: a request changes it only when it ends OK.
  History history;
  // While busy: the tokens the running Generate has written to its stream,
  // which join the history only if it ends OK. Set by the lease holder.
  std::atomic<size_t> in_flight_tokens{0};

  void Commit(History h) ABSL_LOCKS_EXCLUDED(history_mu);
  History Committed() const ABSL_LOCKS_EXCLUDED(history_mu);
  // Orders Commit against Committed (the lease holder's own reads need it
  // not).
  mutable absl::Mutex history_mu;
};

struct SessionOptions {
  int32_t max_sessions = 1024;
  std::chrono::seconds idle_timeout{3600};
};

// A session checked out for exclusive use; released (not busy, idle clock
// restarted) when destroyed.
class SessionLease {
 public:
  SessionLease() = default;
  SessionLease(SessionLease&& o) noexcept : mgr_(o.mgr_), s_(std::move(o.s_)) { o.mgr_ = nullptr; }
  SessionLease& operator=(SessionLease&& o) noexcept {
    if (this != &o) {
      Reset();
      mgr_ = o.mgr_;
      s_ = std::move(o.s_);
      o.mgr_ = nullptr;
    }
    return *this;
  }
  ~SessionLease() { Reset(); }
  // Releases the session now.
  void Reset();
  Session* operator->() const { return s_.get(); }
  Session& operator*() const { return *s_; }
  Session* get() const { return s_.get(); }

 private:
  friend class SessionManager;
  SessionLease(class SessionManager* mgr, std::shared_ptr<Session> s) : mgr_(mgr), s_(std::move(s)) {}
  class SessionManager* mgr_ = nullptr;
  std::shared_ptr<Session> s_;
};

// Thread-safe. Bounded: at most max_sessions live sessions; sessions idle
// longer than idle_timeout are deleted by Sweep (which the server calls
// periodically) and are then NOT_FOUND.
class SessionManager final {
 public:
  // `budget` (borrowed, may be null: nothing counted) bounds the sessions'
  // sequence memory together with the service's other sequences.
  explicit SessionManager(const SessionOptions& options, MemoryBudget* budget = nullptr)
      : options_(options), budget_(budget) {}
  ~SessionManager();

  // RESOURCE_EXHAUSTED at the session limit (after sweeping idle ones) or
  // when the memory budget cannot hold a fresh sequence of the model, or
  // `reserve_bytes` when more (an import's state); `what` names the
  // operation in that error (default: "a new session on model ...").
  // `tenant` owns the session; `cache_tenant` is its prefix-cache partition.
  // `id` empty: a new random id; otherwise the client's choice, checked by
  // ValidateId, ALREADY_EXISTS when a live session has it.
  absl::StatusOr<SessionLease> Create(ServedModel* model, const std::string& tenant, const std::string& cache_tenant,
                                      size_t reserve_bytes = 0, const std::string& what = "",
                                      const std::string& id = "");
  // OK for a session id a client may choose: 1 to 128 characters from
  // [A-Za-z0-9_-] (also safe as a file name); INVALID_ARGUMENT otherwise.
  static absl::Status ValidateId(const std::string& id);
  // A new session holding a copy of `source`'s history and state (which
  // `source`'s holder leases). RESOURCE_EXHAUSTED as Create, for a copy of
  // the source's sequence memory.
  absl::StatusOr<SessionLease> Fork(Session& source);
  // Exclusive use. NOT_FOUND for an unknown or expired id, PERMISSION_DENIED
  // for another tenant's session. Busy: when its request was stopped
  // (MarkStopping: cancelled, its client gone), which ends it within a
  // scheduler step, the call waits for it until `wait_until`
  // (DEADLINE_EXCEEDED then); otherwise, unless the stop comes within
  // kStopNotice, ABORTED: a concurrent request, which may retry once the
  // other ends. `wait_until` past: ABORTED at once.
  absl::StatusOr<SessionLease> Acquire(const std::string& id, const std::string& tenant,
                                       absl::Time wait_until = absl::InfinitePast());
  // How long Acquire waits for a busy session's stop (a cancel arriving
  // just after the next request) before ABORTED.
  static constexpr absl::Duration kStopNotice = absl::Milliseconds(250);
  // The request holding `s` was stopped, or has ended and is being settled:
  // Acquire waits for its end.
  void MarkStopping(const Session& s);
  // NOT_FOUND / PERMISSION_DENIED as Acquire; ABORTED when busy.
  absl::Status Delete(const std::string& id, const std::string& tenant);

  // A session as GetSession and ListSessions report it: the committed
  // history, busy or not, and what a running request has streamed.
  struct Summary {
    std::string id;
    std::string model;
    size_t tokens = 0;
    Pos positions = 0;
    double idle_seconds = 0;  // 0 while busy
    bool busy = false;
    size_t in_flight_tokens = 0;
    std::vector<TokenId> token_ids;  // with Find's include_tokens
  };
  // The tenant's sessions.
  std::vector<Summary> List(const std::string& tenant) const;
  // One session without taking it; NOT_FOUND / PERMISSION_DENIED as Acquire.
  absl::StatusOr<Summary> Find(const std::string& id, const std::string& tenant, bool include_tokens) const;
  // Deletes idle sessions; returns how many.
  size_t Sweep();
  size_t size() const;
  // Keeps a full snapshot of every idle session's state in its model's
  // checkpoint store (CheckpointEngine::Park), e.g. before a shutdown that
  // persists the store: the conversation is then reused after a restart
  // when sent again. Returns how many were parked.
  size_t ParkAll();
  // Drops every session (before the models go).
  void Clear();

 private:
  friend class SessionLease;
  void Release(const std::shared_ptr<Session>& s);
  absl::StatusOr<SessionLease> Insert(std::shared_ptr<Session> s, const std::string& id = "");
  static std::string NewId();

  // A live session and whether it is leased (the lease holder alone uses
  // the session then) and its request stopped, and since when it is idle.
  struct Entry {
    std::shared_ptr<Session> session;
    bool busy = false;
    bool stopping = false;
    std::chrono::steady_clock::time_point last_used;
  };
  static Summary Summarize(const Entry& e, std::chrono::steady_clock::time_point now, bool include_tokens);

  const SessionOptions options_;
  MemoryBudget* const budget_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> sessions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SESSIONS_SESSIONS_H_
