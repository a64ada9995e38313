#include "service/sessions/sessions.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/host/models.h"

namespace cairn::service {

void Session::Commit(History h) {
  absl::MutexLock lock(&history_mu);
  history = std::move(h);
}

History Session::Committed() const {
  absl::MutexLock lock(&history_mu);
  return history;
}

void SessionLease::Reset() {
  if (mgr_ != nullptr && s_ != nullptr) mgr_->Release(s_);
  mgr_ = nullptr;
  s_.reset();
}

SessionManager::~SessionManager() { Clear(); }

namespace {

// Ids from the OS CSPRNG (std::random_device reads getrandom on
// Linux/glibc), one reader at a time.
class RandomIds {
 public:
  std::string Next() ABSL_LOCKS_EXCLUDED(mu_) {
    uint32_t words[4];
    {
      absl::MutexLock lock(&mu_);
      for (uint32_t& w : words) w = device_();
    }
    char buf[33];
    std::snprintf(buf, sizeof(buf), "%08x%08x%08x%08x", words[0], words[1], words[2], words[3]);
    return buf;
  }

 private:
  absl::Mutex mu_;
  std::random_device device_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::string SessionManager::NewId() {
  static RandomIds ids;
  return ids.Next();
}

absl::Status SessionManager::ValidateId(const std::string& id) {
  const bool ok = !id.empty() && id.size() <= 128 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("session id '", id.substr(0, 140), "' is not 1 to 128 characters from [A-Za-z0-9_-]"));
}

absl::StatusOr<SessionLease> SessionManager::Insert(std::shared_ptr<Session> s, const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (sessions_.size() >= static_cast<size_t>(options_.max_sessions)) {
    return absl::ResourceExhaustedError(absl::StrCat("session limit reached (", options_.max_sessions,
                                                     " sessions); delete some or wait for idle ones to expire"));
  }
  if (!id.empty()) {
    if (sessions_.count(id)) return absl::AlreadyExistsError(absl::StrCat("session '", id, "' already exists"));
    s->id = id;
  } else {
    do {
      s->id = NewId();
    } while (sessions_.count(s->id));
  }
  sessions_[s->id] = Entry{s, true, false, std::chrono::steady_clock::now()};
  return SessionLease(this, std::move(s));
}

absl::StatusOr<SessionLease> SessionManager::Create(ServedModel* model, const std::string& tenant,
                                                    const std::string& cache_tenant, size_t reserve_bytes,
                                                    const std::string& what, const std::string& id) {
  if (!id.empty()) {
    if (absl::Status st = ValidateId(id); !st.ok()) return st;
  }
  Sweep();
  {
    absl::MutexLock lock(&mu_);
    if (sessions_.size() >= static_cast<size_t>(options_.max_sessions)) {
      return absl::ResourceExhaustedError(absl::StrCat("session limit reached (", options_.max_sessions, " sessions)"));
    }
  }
  auto s = std::make_shared<Session>();
  if (budget_ != nullptr) {
    const size_t fresh = model->SequenceBytes(0);
    auto r = budget_->Reserve(std::max(fresh, reserve_bytes),
                              !what.empty() ? what : absl::StrCat("a new session on model '", model->name, "'"));
    if (!r.ok()) return r.status();
    s->memory = std::move(*r);
  }
  auto seq = model->engine->NewSequence(cache_tenant);
  if (!seq.ok()) return seq.status();
  s->tenant = tenant;
  s->model = model;
  s->seq = std::move(*seq);
  return Insert(std::move(s), id);
}

absl::StatusOr<SessionLease> SessionManager::Fork(Session& source) {
  Sweep();
  auto s = std::make_shared<Session>();
  if (budget_ != nullptr) {
    // The copy holds what the source's memory holds now.
    auto r =
        budget_->Reserve(source.model->HeldBytes(*source.seq, source.history.size()),
                         absl::StrCat("a fork of session '", source.id, "' (", source.seq->next_pos(), " positions)"));
    if (!r.ok()) return r.status();
    s->memory = std::move(*r);
  }
  auto seq = source.model->engine->Fork(*source.seq);
  if (!seq.ok()) return seq.status();
  s->tenant = source.tenant;
  s->model = source.model;
  s->seq = std::move(*seq);
  s->history = source.history;
  return Insert(std::move(s));
}

namespace {

absl::Status Busy(const std::string& id) {
  return absl::AbortedError(absl::StrCat("session '", id, "' is busy with another request: retry when it has ended"));
}

}  // namespace

absl::StatusOr<SessionLease> SessionManager::Acquire(const std::string& id, const std::string& tenant,
                                                     absl::Time wait_until) {
  absl::MutexLock lock(&mu_);
  bool noticed_no_stop = false;
  for (;;) {
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("session '", id, "' not found (deleted or expired)"));
    }
    Entry& e = it->second;
    if (e.session->tenant != tenant) {
      return absl::PermissionDeniedError(absl::StrCat("session '", id, "' belongs to another client"));
    }
    if (!e.busy) {
      e.busy = true;
      e.session->in_flight_tokens.store(0);
      return SessionLease(this, e.session);
    }
    const absl::Time now = absl::Now();
    // A request whose own deadline passed (before or while it waited) ends
    // as that deadline: its client sees DEADLINE_EXCEEDED anyway. ABORTED
    // says "retry" to one that met a running request, or did not wait.
    if (now >= wait_until && wait_until != absl::InfinitePast()) {
      return absl::DeadlineExceededError(absl::StrCat("session '", id, "' was still busy at the deadline"));
    }
    if (now >= wait_until || (!e.stopping && noticed_no_stop)) return Busy(id);
    // A stopped request ends within a scheduler step: wait for it. One not
    // (yet) stopped may be about to: a client's cancel reaches its call a
    // moment after the client could send its next request, so give the
    // notice kStopNotice to come before refusing.
    const bool stopping = e.stopping;
    const absl::Time until = stopping ? wait_until : std::min(wait_until, now + kStopNotice);
    const Session* held = e.session.get();
    auto changed = [this, &id, held, stopping]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto f = sessions_.find(id);
      return f == sessions_.end() || f->second.session.get() != held || !f->second.busy ||
             f->second.stopping != stopping;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&changed), until)) {
      if (stopping) {
        return absl::DeadlineExceededError(
            absl::StrCat("session '", id, "' was still finishing a stopped request at the deadline"));
      }
      noticed_no_stop = true;
    }
  }
}

void SessionManager::MarkStopping(const Session& s) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(s.id);
  if (it != sessions_.end() && it->second.session.get() == &s && it->second.busy) it->second.stopping = true;
}

void SessionManager::Release(const std::shared_ptr<Session>& s) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(s->id);
  if (it == sessions_.end() || it->second.session != s) return;  // cleared meanwhile
  it->second.busy = false;
  it->second.stopping = false;
  it->second.last_used = std::chrono::steady_clock::now();
}

absl::Status SessionManager::Delete(const std::string& id, const std::string& tenant) {
  std::shared_ptr<Session> gone;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("session '", id, "' not found"));
    if (it->second.session->tenant != tenant) {
      return absl::PermissionDeniedError(absl::StrCat("session '", id, "' belongs to another client"));
    }
    if (it->second.busy) return Busy(id);
    gone = std::move(it->second.session);
    sessions_.erase(it);
  }
  return absl::OkStatus();  // `gone` (its sequence) is freed outside the lock
}

SessionManager::Summary SessionManager::Summarize(const Entry& e, std::chrono::steady_clock::time_point now,
                                                  bool include_tokens) {
  const Session& s = *e.session;
  Summary x;
  x.id = s.id;
  x.model = s.model->name;
  x.busy = e.busy;
  if (e.busy) {
    x.in_flight_tokens = s.in_flight_tokens.load();
  } else {
    x.idle_seconds = std::chrono::duration<double>(now - e.last_used).count();
  }
  // Committed is what the history is and stays unless a request ends OK.
  const History h = s.Committed();
  x.tokens = h.size();
  x.positions = h.PositionsOf(h.size());
  if (include_tokens) x.token_ids = h.Tokens();
  return x;
}

std::vector<SessionManager::Summary> SessionManager::List(const std::string& tenant) const {
  std::vector<Summary> out;
  const auto now = std::chrono::steady_clock::now();
  absl::MutexLock lock(&mu_);
  for (const auto& [id, e] : sessions_) {
    if (e.session->tenant == tenant) out.push_back(Summarize(e, now, false));
  }
  return out;
}

absl::StatusOr<SessionManager::Summary> SessionManager::Find(const std::string& id, const std::string& tenant,
                                                             bool include_tokens) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return absl::NotFoundError(absl::StrCat("session '", id, "' not found"));
  if (it->second.session->tenant != tenant) {
    return absl::PermissionDeniedError(absl::StrCat("session '", id, "' belongs to another client"));
  }
  return Summarize(it->second, std::chrono::steady_clock::now(), include_tokens);
}

size_t SessionManager::Sweep() {
  std::vector<std::shared_ptr<Session>> gone;
  const auto now = std::chrono::steady_clock::now();
  {
    absl::MutexLock lock(&mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (!it->second.busy && now - it->second.last_used > options_.idle_timeout) {
        gone.push_back(std::move(it->second.session));
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return gone.size();
}

size_t SessionManager::size() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

size_t SessionManager::ParkAll() {
  std::vector<std::shared_ptr<Session>> idle;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, e] : sessions_) {
      if (!e.busy) idle.push_back(e.session);
    }
  }
  size_t parked = 0;
  for (const auto& s : idle) {
    if (s->seq != nullptr && s->model->engine->Park(*s->seq).ok()) ++parked;
  }
  return parked;
}

void SessionManager::Clear() {
  std::map<std::string, Entry> gone;
  {
    absl::MutexLock lock(&mu_);
    gone.swap(sessions_);
  }
  // The sequences are freed outside the lock.
}

}  // namespace cairn::service
