// The threads that serve the HTTP door's connections, bounded: `threads`
// connections are served at once, `queued` more wait for a thread, and
// beyond that the accepting thread waits (new connections then wait in the
// kernel's listen backlog), so no number of clients can make the server
// start threads or hold memory without bound.
#ifndef CAIRN_SERVICE_HTTP_CONNECTION_POOL_H_
#define CAIRN_SERVICE_HTTP_CONNECTION_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "httplib.h"

namespace cairn::service::http {

// httplib's task queue (one task per accepted connection). Thread-safe.
class ConnectionPool final : public httplib::TaskQueue {
 public:
  ConnectionPool(size_t threads, size_t queued);
  ~ConnectionPool() override;

  // Blocks while `queued` tasks wait already.
  void enqueue(std::function<void()> fn) override ABSL_LOCKS_EXCLUDED(mu_);
  // Runs what is queued, then joins the threads.
  void shutdown() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Work() ABSL_LOCKS_EXCLUDED(mu_);

  const size_t max_queued_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace cairn::service::http

#endif  // CAIRN_SERVICE_HTTP_CONNECTION_POOL_H_
