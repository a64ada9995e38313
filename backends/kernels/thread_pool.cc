#include "backends/kernels/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CAIRN_CPU_RELAX() _mm_pause()
#else
#define CAIRN_CPU_RELAX() ((void)0)
#endif

namespace cairn {

// Static partitioning: worker i always gets the i-th range, so a kernel's
// result never depends on timing (bitwise-reproducible forward passes), and
// each thread streams one contiguous slice of a weight matrix.
struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable wake;
  std::condition_variable done_cv;
  // Incremented per job; workers run when they see a new value.
  std::atomic<uint64_t> generation{0};
  std::atomic<int> pending{0};
  bool stop = false;

  const std::function<void(int64_t, int64_t)>* body = nullptr;
  int64_t n = 0;
  int n_chunks = 0;

  void RunChunk(int chunk) {
    int64_t begin = n * chunk / n_chunks;
    int64_t end = n * (chunk + 1) / n_chunks;
    if (begin < end) (*body)(begin, end);
  }

  void WorkerLoop(int index) {
    uint64_t seen = 0;
    for (;;) {
      // Spin briefly: decode issues hundreds of small jobs per token and a
      // condition-variable wake-up costs more than the job itself.
      uint64_t gen = generation.load(std::memory_order_acquire);
      for (int spin = 0; gen == seen && spin < 20000; ++spin) {
        CAIRN_CPU_RELAX();
        gen = generation.load(std::memory_order_acquire);
      }
      if (gen == seen) {
        std::unique_lock<std::mutex> lock(mu);
        wake.wait(lock, [&] { return stop || generation.load(std::memory_order_acquire) != seen; });
        if (stop) return;
        gen = generation.load(std::memory_order_acquire);
      }
      seen = gen;
      // Chunk 0 belongs to the caller; worker `index` takes chunk index + 1.
      if (index + 1 < n_chunks) RunChunk(index + 1);
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu);
        done_cv.notify_one();
      }
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : impl_(new Impl) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  for (int i = 0; i + 1 < n_threads; ++i) {
    impl_->workers.emplace_back([this, i] { impl_->WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  for (std::thread& t : impl_->workers) t.join();
  delete impl_;
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t max_chunks = std::max<int64_t>(1, n / grain);
  int n_chunks = static_cast<int>(std::min<int64_t>(n_threads_, max_chunks));
  if (n_chunks <= 1 || impl_->workers.empty()) {
    body(0, n);
    return;
  }
  Impl& im = *impl_;
  im.body = &body;
  im.n = n;
  im.n_chunks = n_chunks;
  int n_workers = static_cast<int>(im.workers.size());
  im.pending.store(n_workers, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(im.mu);
    im.generation.fetch_add(1, std::memory_order_acq_rel);
  }
  im.wake.notify_all();
  im.RunChunk(0);
  // Wait for every worker (also those without a chunk) so the job fields can
  // be reused safely by the next call.
  for (int spin = 0; im.pending.load(std::memory_order_acquire) != 0 && spin < 200000; ++spin) {
    CAIRN_CPU_RELAX();
  }
  if (im.pending.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lock(im.mu);
    im.done_cv.wait(lock, [&] { return im.pending.load(std::memory_order_acquire) == 0; });
  }
}

}  // namespace cairn
