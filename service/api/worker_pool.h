// Threads for the steps of a call that may block: a Generate's start (a
// session read from the session directory, a long prompt tokenized) and its
// end (the session written there). The callback API runs a call's
// reactions on gRPC's own few threads, which must never wait on a disk or a
// long computation, so those steps run here instead.
//
// A task never waits for a thread: one is started when none is idle, and
// threads are kept for the next tasks, so there are as many as steps ever ran
// at once (as with the synchronous API's thread per call, but only for the
// blocking steps, which are short). Thread-safe.
#ifndef CAIRN_SERVICE_API_WORKER_POOL_H_
#define CAIRN_SERVICE_API_WORKER_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cairn::service {

class WorkerPool final {
 public:
  WorkerPool() = default;
  // Runs the tasks already queued, then joins every thread.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs `task` on a pool thread (never on the caller's), at once. Not
  // after the destructor has begun (tasks then do not start new ones).
  void Run(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

  // Threads started so far (for tests).
  size_t threads() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Work() ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;  // threads waiting for a task
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_WORKER_POOL_H_
