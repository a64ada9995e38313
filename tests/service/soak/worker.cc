#include "tests/service/soak/worker.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/client_context.h"

namespace cairn::soak {
namespace {

using std::chrono::milliseconds;

// Calls that must not be cut short get this long; reaching it means a
// request was stuck.
constexpr milliseconds kCallDeadline{30000};
// How long past its deadline a call may take to end on the client.
constexpr milliseconds kGrace{2000};
// The longest deadline of the requests meant to race it (drawn from 1 ms
// up): a short reply on a golden model takes about that long.
constexpr milliseconds kShortDeadline{30};

const char* CodeName(grpc::StatusCode code) {
  static const char* const kNames[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i <= 16 ? kNames[i] : "?";
}

std::string Describe(const grpc::Status& st) {
  return absl::StrCat(CodeName(st.error_code()), ": ", st.error_message());
}

// "n tokens [a b c ... x y z]", short enough for a report line.
std::string Brief(const std::vector<int32_t>& ids) {
  if (ids.size() <= 12) return absl::StrCat(ids.size(), " [", absl::StrJoin(ids, " "), "]");
  return absl::StrCat(ids.size(), " [", absl::StrJoin(ids.begin(), ids.begin() + 6, " "), " ... ",
                      absl::StrJoin(ids.end() - 6, ids.end(), " "), "]");
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

void Tally::Call(const std::string& method, grpc::StatusCode code) {
  calls.fetch_add(1);
  absl::MutexLock lock(&mu_);
  ++by_code_[{method, CodeName(code)}];
}

void Tally::Violation(const std::string& what) {
  violations.fetch_add(1);
  std::fprintf(stderr, "VIOLATION: %s\n", what.c_str());
}

std::map<std::pair<std::string, std::string>, int64_t> Tally::CallsByCode() const {
  absl::MutexLock lock(&mu_);
  return by_code_;
}

void Tally::ResetCallsByCode() {
  absl::MutexLock lock(&mu_);
  by_code_.clear();
}

Worker::Worker(int index, uint64_t seed, const WorkerOptions& options, Tally& tally)
    : index_(index), options_(options), tally_(tally), rng_(seed) {}

void Worker::Connect(std::shared_ptr<grpc::Channel> server, std::shared_ptr<grpc::Channel> reference,
                     bool disk_faults) {
  server_ = v1::Inference::NewStub(server);
  reference_ = v1::Inference::NewStub(reference);
  disk_faults_ = disk_faults;
}

void Worker::RunUntil(std::chrono::steady_clock::time_point until) {
  while (std::chrono::steady_clock::now() < until) Step();
}

void Worker::Step() {
  if (sessions_.empty()) return CreateSession();
  View& s = sessions_[static_cast<size_t>(Uniform(0, static_cast<int>(sessions_.size()) - 1))];
  if (static_cast<int>(s.history.size()) > options_.max_history) {
    return Rewind(s, Uniform(0, options_.max_history / 3));
  }
  const int dice = Uniform(0, 99);
  if (dice < 25) return Turn(s, true);
  if (dice < 35) return Turn(s, false);
  if (dice < 47) return CutShort(s, true);
  if (dice < 59) return CutShort(s, false);
  if (dice < 71) return Sessionless();
  if (dice < 79) return Rewind(s, Uniform(0, static_cast<int>(s.history.size())));
  if (dice < 86) return Fork(s);
  if (dice < 90) return DeleteSession(static_cast<size_t>(&s - sessions_.data()));
  return CreateSession();
}

v1::GenerateRequest Worker::Request(const std::vector<int32_t>& prompt, int max_tokens) const {
  v1::GenerateRequest req;
  req.set_model(options_.model);
  auto* ids = req.add_parts()->mutable_tokens();
  for (int32_t t : prompt) ids->add_ids(t);
  req.mutable_sampling()->set_temperature(0.0f);
  req.mutable_stop()->set_max_tokens(max_tokens);
  req.mutable_stop()->set_ignore_eos(true);
  req.set_stream_text(false);
  return req;
}

Worker::Reply Worker::Generate(v1::Inference::Stub& stub, const v1::GenerateRequest& req, milliseconds deadline,
                               int cancel_after, bool count) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  const auto start = std::chrono::steady_clock::now();
  Reply r;
  auto reader = stub.Generate(&ctx, req);
  v1::GenerateResponse ev;
  while (reader->Read(&ev)) {
    if (!ev.has_token()) continue;
    r.ids.push_back(ev.token().id());
    if (cancel_after > 0 && static_cast<int>(r.ids.size()) == cancel_after) ctx.TryCancel();
  }
  r.status = reader->Finish();
  if (count) tally_.Call("Generate", r.status.error_code());
  CheckDuration(start, deadline, "Generate");
  return r;
}

grpc::Status Worker::Session(const v1::SessionRequest& req, v1::SessionResponse* resp, const char* op) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  const auto start = std::chrono::steady_clock::now();
  grpc::Status st = server_->SessionControl(&ctx, req, resp);
  CheckDuration(start, kCallDeadline, op);
  tally_.Call("SessionControl", st.error_code());
  if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    tally_.Violation(
        absl::StrCat("worker ", index_, ": SessionControl ", op, " stuck for ", kCallDeadline.count(), " ms"));
  }
  return st;
}

void Worker::CheckDuration(std::chrono::steady_clock::time_point start, milliseconds deadline, const char* what) {
  const auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  if (took > deadline + kGrace) {
    tally_.Violation(absl::StrCat("worker ", index_, ": ", what, " took ", took.count(), " ms, its deadline was ",
                                  deadline.count(), " ms"));
  }
}

bool Worker::Expected(const grpc::Status& st, const std::string& what,
                      std::initializer_list<grpc::StatusCode> allowed) {
  if (std::find(allowed.begin(), allowed.end(), st.error_code()) != allowed.end()) return true;
  // A failing disk may refuse to read a session file back (restoring a
  // session this incarnation has not loaded yet).
  if (disk_faults_ && st.error_code() == grpc::StatusCode::INTERNAL &&
      st.error_message().find("Input/output error") != std::string::npos) {
    tally_.disk_errors_seen.fetch_add(1);
    return false;
  }
  tally_.Violation(absl::StrCat("worker ", index_, ": ", what, " ended ", Describe(st)));
  return false;
}

void Worker::CreateSession() {
  if (static_cast<int>(sessions_.size()) >= options_.max_sessions) {
    return DeleteSession(static_cast<size_t>(Uniform(0, static_cast<int>(sessions_.size()) - 1)));
  }
  v1::SessionRequest req;
  req.mutable_create()->set_model(options_.model);
  req.mutable_create()->set_session_id(absl::StrCat("soak-w", index_, "-", created_++, "-", absl::Hex(rng_())));
  v1::SessionResponse resp;
  if (!Expected(Session(req, &resp, "create"), "create", {grpc::StatusCode::OK})) return;
  sessions_.push_back(View{resp.session().session_id(), {}, {}});
  CheckSession(sessions_.back(), "create");
  // The first turn starts with the prefix every session shares.
  View& s = sessions_.back();
  v1::GenerateRequest turn = Request(Concat(options_.shared_prefix, RandomTokens(2, 8)), Uniform(1, 8));
  turn.set_session_id(s.id);
  turn.set_append(true);
  turn.set_session_tokens(0);
  const Reply r = Generate(*server_, turn, kCallDeadline, 0);
  if (Expected(r.status, "first turn", {grpc::StatusCode::OK})) {
    s.history = Concat(Concat(s.history, std::vector<int32_t>(turn.parts(0).tokens().ids().begin(),
                                                              turn.parts(0).tokens().ids().end())),
                       r.ids);
  }
  CheckSession(s, "first turn");
}

void Worker::DeleteSession(size_t index) {
  v1::SessionRequest req;
  req.mutable_delete_()->set_session_id(sessions_[index].id);
  v1::SessionResponse resp;
  Expected(Session(req, &resp, "delete"), "delete", {grpc::StatusCode::OK});
  // Gone either way: a failed delete's session is not used again.
  sessions_.erase(sessions_.begin() + static_cast<ptrdiff_t>(index));
}

void Worker::Turn(View& s, bool append) {
  std::vector<int32_t> added = RandomTokens(1, 12);
  std::vector<int32_t> prompt = added;
  std::vector<int32_t> whole;
  if (append) {
    whole = Concat(s.history, added);
  } else {
    // The whole conversation, sometimes edited: cut back somewhere first.
    const size_t keep =
        Uniform(0, 2) == 0 ? static_cast<size_t>(Uniform(0, static_cast<int>(s.history.size()))) : s.history.size();
    whole = Concat(std::vector<int32_t>(s.history.begin(), s.history.begin() + static_cast<ptrdiff_t>(keep)), added);
    prompt = whole;
  }
  v1::GenerateRequest req = Request(prompt, Uniform(1, 16));
  req.set_session_id(s.id);
  req.set_append(append);
  // Appending: the history the client has, which undoes a raced turn (the
  // whole conversation needs it not: the server finds the divergence).
  if (append) req.set_session_tokens(static_cast<int32_t>(s.history.size()));
  const Reply r = Generate(*server_, req, kCallDeadline, 0);
  const char* what = append ? "turn" : "whole-conversation turn";
  if (r.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    tally_.Violation(absl::StrCat("worker ", index_, ": ", what, " stuck for ", kCallDeadline.count(), " ms"));
  } else if (Expected(r.status, what, {grpc::StatusCode::OK})) {
    if (static_cast<int>(r.ids.size()) != req.stop().max_tokens()) {
      tally_.Violation(absl::StrCat("worker ", index_, ": ", what, " gave ", r.ids.size(), " tokens, asked ",
                                    req.stop().max_tokens()));
    }
    s.history = Concat(whole, r.ids);
    s.raced.clear();
    if (std::uniform_real_distribution<double>(0, 1)(rng_) < options_.fresh_check_rate) CheckFresh(whole, r.ids);
  }
  CheckSession(s, what);
}

// A short reply cut at about its end: cancelled right after its last token,
// or given a deadline about as long as it takes. The server may end it OK
// just before the cut takes effect (the race): the client saw it fail, the
// session holds it, and the client's next appended turn undoes it by
// stating its history.
void Worker::CutShort(View& s, bool cancel) {
  const std::vector<int32_t> added = RandomTokens(1, 8);
  const std::vector<int32_t> whole = Concat(s.history, added);
  const int max_tokens = Uniform(1, options_.cut_short_tokens);
  v1::GenerateRequest req = Request(added, max_tokens);
  req.set_session_id(s.id);
  req.set_append(true);
  req.set_session_tokens(static_cast<int32_t>(s.history.size()));
  const milliseconds deadline = cancel ? kCallDeadline : milliseconds(Uniform(1, kShortDeadline.count()));
  const Reply r = Generate(*server_, req, deadline, cancel ? max_tokens : 0);
  (cancel ? tally_.cancels : tally_.deadlines).fetch_add(1);
  if (r.status.ok()) {
    // It finished before the cut: the client read every token.
    s.history = Concat(whole, r.ids);
    s.raced.clear();
  } else if (Expected(r.status, cancel ? "cancelled stream" : "short deadline",
                      {cancel ? grpc::StatusCode::CANCELLED : grpc::StatusCode::DEADLINE_EXCEEDED})) {
    s.raced.push_back(Raced{Concat(whole, r.ids), whole.size() + static_cast<size_t>(max_tokens)});
  }
  Found found;
  const std::string what =
      absl::StrCat(cancel ? "a stream cancelled after its last token" : "a short deadline", " ended ",
                   CodeName(r.status.error_code()), " after ", r.ids.size(), " of ", max_tokens, " tokens");
  if (!CheckSession(s, what.c_str(), nullptr, &found)) return;
  if (found.raced != nullptr && found.raced == &s.raced.back()) tally_.races.fetch_add(1);
  // A non-OK turn changes nothing, its cut included: the session holds the
  // view, this turn raced, or an earlier raced turn. Certain once no request
  // holds it (one whose client gave up may still run, and end OK).
  if (!found.busy) s.raced = found.raced != nullptr ? std::vector<Raced>{*found.raced} : std::vector<Raced>{};
}

void Worker::Fork(const View& s) {
  if (static_cast<int>(sessions_.size()) >= options_.max_sessions) return CreateSession();  // deletes one
  v1::SessionRequest req;
  req.mutable_fork()->set_session_id(s.id);
  v1::SessionResponse resp;
  if (!Expected(Session(req, &resp, "fork"), "fork", {grpc::StatusCode::OK})) return;
  View copy{resp.session().session_id(), s.history, s.raced};
  sessions_.push_back(std::move(copy));
  CheckSession(sessions_.back(), "fork");
}

void Worker::Rewind(View& s, int32_t tokens) {
  v1::SessionRequest req;
  req.mutable_rewind()->set_session_id(s.id);
  req.mutable_rewind()->set_tokens(tokens);
  v1::SessionResponse resp;
  if (Expected(Session(req, &resp, "rewind"), "rewind", {grpc::StatusCode::OK})) {
    s.history.resize(static_cast<size_t>(tokens));
    s.raced.clear();
  }
  CheckSession(s, "rewind");
}

void Worker::Sessionless() {
  // Often a prefix some session computed, so the prefix cache serves it.
  std::vector<int32_t> prompt = RandomTokens(2, 10);
  const View& s = sessions_[static_cast<size_t>(Uniform(0, static_cast<int>(sessions_.size()) - 1))];
  if (Uniform(0, 1) == 0 && !s.history.empty()) {
    const auto cut = s.history.begin() + Uniform(1, static_cast<int>(s.history.size()));
    prompt = Concat(std::vector<int32_t>(s.history.begin(), cut), prompt);
  }
  const Reply r = Generate(*server_, Request(prompt, Uniform(1, 12)), kCallDeadline, 0);
  if (Expected(r.status, "sessionless request", {grpc::StatusCode::OK}) &&
      std::uniform_real_distribution<double>(0, 1)(rng_) < options_.fresh_check_rate) {
    CheckFresh(prompt, r.ids);
  }
}

bool Worker::CheckSession(const View& s, const char* after, grpc::Status* lookup, Found* found) {
  tally_.sessions_checked.fetch_add(1);
  v1::SessionRequest req;
  req.mutable_get()->set_session_id(s.id);
  req.mutable_get()->set_include_tokens(true);
  v1::SessionResponse resp;
  grpc::Status st;
  // A failing disk may refuse the session file a few times in a row.
  for (int attempt = 0; attempt < 20; ++attempt) {
    st = Session(req, &resp, "get");
    if (!disk_faults_ || st.error_code() != grpc::StatusCode::INTERNAL) break;
    tally_.disk_errors_seen.fetch_add(1);
  }
  if (lookup != nullptr) *lookup = st;
  if (lookup != nullptr && st.error_code() == grpc::StatusCode::NOT_FOUND) return false;
  if (!Expected(st, absl::StrCat("GetSession ", s.id), {grpc::StatusCode::OK})) return false;
  const std::vector<int32_t> held(resp.session().token_ids().begin(), resp.session().token_ids().end());
  if (held == s.history) {
    if (found != nullptr) *found = Found{nullptr, resp.session().busy()};
    return true;
  }
  for (const Raced& turn : s.raced) {
    if (held.size() == turn.size && std::equal(turn.seen.begin(), turn.seen.end(), held.begin())) {
      if (found != nullptr) *found = Found{&turn, resp.session().busy()};
      return true;
    }
  }
  tally_.Violation(absl::StrCat("worker ", index_, ": after ", after, ", session ", s.id, " holds ", Brief(held),
                                ", its client saw ", Brief(s.history), resp.session().busy() ? " (busy)" : ""));
  return false;
}

void Worker::CheckFresh(const std::vector<int32_t>& prompt, const std::vector<int32_t>& reply) {
  tally_.fresh_checks.fetch_add(1);
  const Reply fresh =
      Generate(*reference_, Request(prompt, static_cast<int>(reply.size())), kCallDeadline, 0, /*count=*/false);
  if (!fresh.status.ok()) {
    tally_.Violation(absl::StrCat("worker ", index_, ": the reference server failed: ", Describe(fresh.status)));
  } else if (fresh.ids != reply) {
    tally_.Violation(absl::StrCat("worker ", index_, ": cached reply ", Brief(reply), " != fresh ", Brief(fresh.ids),
                                  " for a prompt of ", prompt.size(), " tokens"));
  }
}

void Worker::VerifyAfterRestart(const std::set<std::string>& may_be_lost) {
  for (size_t i = 0; i < sessions_.size();) {
    grpc::Status lookup;
    if (!CheckSession(sessions_[i], "a restart", &lookup) && lookup.error_code() == grpc::StatusCode::NOT_FOUND) {
      if (may_be_lost.count(sessions_[i].id) == 0) {
        tally_.Violation(absl::StrCat("worker ", index_, ": session ", sessions_[i].id,
                                      " is gone after a restart though every write of it succeeded"));
      } else {
        tally_.sessions_lost.fetch_add(1);
      }
      sessions_.erase(sessions_.begin() + static_cast<ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
}

std::vector<int32_t> Worker::RandomTokens(int min, int max) {
  std::vector<int32_t> ids(static_cast<size_t>(Uniform(min, max)));
  for (int32_t& t : ids) t = Uniform(3, 500);
  return ids;
}

}  // namespace cairn::soak
