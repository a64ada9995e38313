// A fixed pool of worker threads for data-parallel kernels.
#ifndef CAIRN_BACKENDS_KERNELS_THREAD_POOL_H_
#define CAIRN_BACKENDS_KERNELS_THREAD_POOL_H_

#include <cstdint>
#include <functional>

namespace cairn {

// ParallelFor splits [0, n) into contiguous ranges and runs them on the
// calling thread plus the workers; it returns when all ranges are done.
// One ParallelFor at a time per pool (a backend serializes its Forward
// calls); the body must not call ParallelFor on the same pool.
class ThreadPool {
 public:
  // n_threads <= 0: one per hardware core.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // body(begin, end) for disjoint ranges covering [0, n); ranges are at least
  // `grain` long (except the last). The ranges' boundaries depend only on n,
  // grain, size() and chunks_per_thread: up to chunks_per_thread x size()
  // ranges, which any thread may claim. More than one per thread lets the
  // running threads take the share of one that is descheduled (a loaded
  // machine) instead of waiting for it: for long jobs bound by memory, such
  // as a decode step's weight products.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body,
                   int chunks_per_thread = 1);

  // fn(i) for every i in [0, n), split as ParallelFor(n, grain, ...): the
  // per-row steps of a forward pass (norms, activations, RoPE).
  void ForEach(int64_t n, const std::function<void(int64_t)>& fn, int64_t grain = 4) {
    ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) fn(i);
    });
  }

 private:
  struct Impl;
  Impl* impl_;
  int n_threads_;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_THREAD_POOL_H_
