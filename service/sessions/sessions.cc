#include "service/sessions/sessions.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/host/models.h"

namespace cairn::service {

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
  return absl::InvalidArgumentError(absl::StrCat("session id '", id.substr(0, 140),
                                                 "' is not 1 to 128 characters from [A-Za-z0-9_-]"));
}

absl::StatusOr<SessionLease> SessionManager::Insert(std::shared_ptr<Session> s, const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (sessions_.size() >= static_cast<size_t>(options_.max_sessions)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "session limit reached (", options_.max_sessions, " sessions); delete some or wait for idle ones to expire"));
  }
  if (!id.empty()) {
    if (sessions_.count(id)) return absl::AlreadyExistsError(absl::StrCat("session '", id, "' already exists"));
    s->id = id;
  } else {
    do {
      s->id = NewId();
    } while (sessions_.count(s->id));
  }
  s->busy_tokens.store(s->history.size());
  sessions_[s->id] = Entry{s, true, std::chrono::steady_clock::now()};
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
      return absl::ResourceExhaustedError(absl::StrCat(
          "session limit reached (", options_.max_sessions, " sessions)"));
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
    auto r = budget_->Reserve(source.seq->memory()->Bytes(SnapshotScope::kFull),
                              absl::StrCat("a fork of session '", source.id, "' (",
                                           source.seq->next_pos(), " positions)"));
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

absl::StatusOr<SessionLease> SessionManager::Acquire(const std::string& id, const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    return absl::NotFoundError(absl::StrCat("session '", id, "' not found (deleted or expired)"));
  }
  Entry& e = it->second;
  if (e.session->tenant != tenant) {
    return absl::PermissionDeniedError(absl::StrCat("session '", id, "' belongs to another client"));
  }
  if (e.busy) {
    return absl::FailedPreconditionError(absl::StrCat("session '", id, "' is busy with another request"));
  }
  e.busy = true;
  e.session->busy_tokens.store(e.session->history.size());
  return SessionLease(this, e.session);
}

void SessionManager::Release(const std::shared_ptr<Session>& s) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(s->id);
  if (it == sessions_.end() || it->second.session != s) return;  // cleared meanwhile
  it->second.busy = false;
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
    if (it->second.busy) {
      return absl::FailedPreconditionError(absl::StrCat("session '", id, "' is busy with another request"));
    }
    gone = std::move(it->second.session);
    sessions_.erase(it);
  }
  return absl::OkStatus();  // `gone` (its sequence) is freed outside the lock
}

std::vector<SessionManager::Summary> SessionManager::List(const std::string& tenant) const {
  std::vector<Summary> out;
  const auto now = std::chrono::steady_clock::now();
  absl::MutexLock lock(&mu_);
  for (const auto& [id, e] : sessions_) {
    const Session& s = *e.session;
    if (s.tenant != tenant) continue;
    Summary x;
    x.id = id;
    x.model = s.model->name;
    x.busy = e.busy;
    // A busy session's history is being changed by its request: its
    // progress instead.
    x.tokens = s.busy_tokens.load();
    if (!e.busy) {
      x.tokens = s.history.size();
      x.positions = s.history.PositionsOf(s.history.size());
      x.idle_seconds = std::chrono::duration<double>(now - e.last_used).count();
    }
    out.push_back(std::move(x));
  }
  return out;
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
