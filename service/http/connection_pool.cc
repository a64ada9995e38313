#include "service/http/connection_pool.h"

#include <utility>

namespace cairn::service::http {

ConnectionPool::ConnectionPool(size_t threads, size_t queued) : max_queued_(queued) {
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

ConnectionPool::~ConnectionPool() { shutdown(); }

void ConnectionPool::enqueue(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return tasks_.size() < max_queued_ || stopping_; };
  mu_.Await(absl::Condition(&room));
  tasks_.push_back(std::move(fn));
}

void ConnectionPool::shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ConnectionPool::Work() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !tasks_.empty() || stopping_; };
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;  // stopping, nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace cairn::service::http
