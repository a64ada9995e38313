// The soak's client side: a Worker is one client thread holding a few
// sessions and, for each, the exact token history it saw (committed turns
// only). Every step is one call of the mix (turns, whole-conversation
// turns, forks, rewinds, deletes, sessionless requests, short replies
// cancelled right after their last token, short deadlines), followed by the
// invariant checks of that step: the session equals the client's view
// (every step), a greedy reply equals a fresh computation on the reference
// server (sampled), and no call outlives its deadline. Appended turns state
// the history their client has (GenerateRequest.session_tokens): the short
// cut-short replies provoke the race where the server ends a turn OK just
// before the client's cancel or deadline, and the next turn must undo it.
#ifndef CAIRN_TESTS_SERVICE_SOAK_WORKER_H_
#define CAIRN_TESTS_SERVICE_SOAK_WORKER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cairn/v1/inference.grpc.pb.h"
#include "grpcpp/channel.h"

namespace cairn::soak {

// What the soak counts; thread-safe.
class Tally {
 public:
  // One finished RPC as the client saw it.
  void Call(const std::string& method, grpc::StatusCode code);
  // Prints `what` at once and counts it.
  void Violation(const std::string& what);
  // The calls by (method, status code name) since the last Reset.
  std::map<std::pair<std::string, std::string>, int64_t> CallsByCode() const;
  void ResetCallsByCode();

  std::atomic<int64_t> calls{0}, cancels{0}, deadlines{0}, fresh_checks{0}, sessions_checked{0};
  // Cut-short turns the server ended OK while their client saw them fail
  // (the session held them after the step).
  std::atomic<int64_t> races{0};
  std::atomic<int64_t> disk_errors_seen{0}, sessions_lost{0}, violations{0};

 private:
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, int64_t> by_code_ ABSL_GUARDED_BY(mu_);
};

struct WorkerOptions {
  std::string model;
  int max_history = 300;  // longer views are rewound first
  int max_sessions = 4;   // per worker
  // The most tokens asked of a stream that is cut short (cancelled after
  // its last token, or given a deadline about as long as it takes): short,
  // so that the server often ends it OK just before the cut.
  int cut_short_tokens = 8;
  double fresh_check_rate = 0.25;
  std::vector<int32_t> shared_prefix;  // starts every new session (the prefix cache's system prompt)
};

class Worker {
 public:
  Worker(int index, uint64_t seed, const WorkerOptions& options, Tally& tally);

  // The servers of the current incarnation: the soaked one and the
  // reference (--checkpoints=off). `disk_faults`: the soaked server may
  // fail disk reads (an INTERNAL naming an I/O error is then expected).
  void Connect(std::shared_ptr<grpc::Channel> server, std::shared_ptr<grpc::Channel> reference, bool disk_faults);
  // Steps until `until`.
  void RunUntil(std::chrono::steady_clock::time_point until);
  // After a restart: every session must equal its view, or be gone when
  // its file may have missed a write (`may_be_lost`: ids).
  void VerifyAfterRestart(const std::set<std::string>& may_be_lost);

 private:
  // A turn the client saw fail that the server may have ended OK just
  // before (the race): the session then holds `seen` (the history, the
  // turn's prompt, the tokens the client read) and more, `size` symbols in
  // all, until the client's next turn states its history.
  struct Raced {
    std::vector<int32_t> seen;
    size_t size = 0;
  };
  struct View {
    std::string id;
    std::vector<int32_t> history;
    std::vector<Raced> raced;  // what the session may hold instead, since the last certain state
  };
  // What CheckSession found besides a match.
  struct Found {
    const Raced* raced = nullptr;  // the raced turn the session holds; null: the view
    bool busy = false;             // a request (one its client gave up on) still held it
  };
  struct Reply {
    grpc::Status status;
    std::vector<int32_t> ids;
  };

  void Step();
  void Turn(View& s, bool append);
  void CutShort(View& s, bool cancel);
  void Fork(const View& s);
  void Rewind(View& s, int32_t tokens);
  void Sessionless();
  void CreateSession();
  void DeleteSession(size_t index);

  // One Generate read to its end; cancelled after `cancel_after` tokens
  // (0: never); `deadline` from now.
  Reply Generate(v1::Inference::Stub& stub, const v1::GenerateRequest& req, std::chrono::milliseconds deadline,
                 int cancel_after, bool count = true);
  grpc::Status Session(const v1::SessionRequest& req, v1::SessionResponse* resp, const char* op);
  v1::GenerateRequest Request(const std::vector<int32_t>& prompt, int max_tokens) const;
  // The session's committed history must equal the view, or one of its
  // raced turns (`found`, when given, tells which); NOT_FOUND is reported
  // as such (true: it matched).
  bool CheckSession(const View& s, const char* after, grpc::Status* lookup = nullptr, Found* found = nullptr);
  // A greedy reply must equal the reference server's for the same prompt.
  void CheckFresh(const std::vector<int32_t>& prompt, const std::vector<int32_t>& reply);
  // A call that ended long after its deadline was stuck.
  void CheckDuration(std::chrono::steady_clock::time_point start, std::chrono::milliseconds deadline, const char* what);
  // A status a call of this kind may end with; reports a violation if not.
  bool Expected(const grpc::Status& st, const std::string& what, std::initializer_list<grpc::StatusCode> allowed);
  std::vector<int32_t> RandomTokens(int min, int max);
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  const int index_;
  const WorkerOptions options_;
  Tally& tally_;
  std::mt19937_64 rng_;
  std::unique_ptr<v1::Inference::Stub> server_;
  std::unique_ptr<v1::Inference::Stub> reference_;
  bool disk_faults_ = false;
  std::vector<View> sessions_;
  int64_t created_ = 0;
};

}  // namespace cairn::soak

#endif  // CAIRN_TESTS_SERVICE_SOAK_WORKER_H_
