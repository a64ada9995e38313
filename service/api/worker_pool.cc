#include "service/api/worker_pool.h"

#include <utility>

namespace cairn::service {

WorkerPool::~WorkerPool() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void WorkerPool::Run(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
  // An idle thread takes it when mu_ is released (Work awaits tasks_ on
  // mu_); a task queued for one already taken needs a thread of its own.
  if (idle_ >= tasks_.size()) return;
  threads_.emplace_back([this] { Work(); });
}

size_t WorkerPool::threads() const {
  absl::MutexLock lock(&mu_);
  return threads_.size();
}

void WorkerPool::Work() {
  mu_.Lock();
  for (;;) {
    ++idle_;
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !tasks_.empty() || stopping_; };
    mu_.Await(absl::Condition(&ready));
    --idle_;
    if (tasks_.empty()) break;  // stopping, nothing left
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    task();
    task = nullptr;  // what it captured goes before the next wait
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace cairn::service
