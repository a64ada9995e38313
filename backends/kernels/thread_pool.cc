#include "backends/kernels/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
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
namespace {

// How long an idle worker spins for the next job, once the last one is
// complete, before it sleeps. Forward passes have serial stretches of tens
// of microseconds between jobs; the gap between forward passes is longer.
constexpr std::chrono::microseconds kSpinBeforeSleep{100};

}  // namespace

// A job is split into at most n_threads (x chunks_per_thread) chunks with fixed boundaries, so a
// kernel's result never depends on which thread ran which chunk (forward
// passes are bitwise reproducible). Any thread may claim any chunk: when a
// worker is descheduled (a loaded machine) the caller runs its chunk instead
// of waiting a time slice for it.
struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable wake;
  bool stop = false;

  // (generation << 32) | (chunk count << 16) | next unclaimed chunk. A
  // thread decides from this word alone whether a chunk is left, and a
  // worker holding a stale generation can never claim one of a newer job.
  std::atomic<uint64_t> ticket{0};
  std::atomic<int> done{0};

  const std::function<void(int64_t, int64_t)>* body = nullptr;
  int64_t n = 0;
  int n_chunks = 0;

  void RunChunk(int chunk) {
    const int64_t begin = n * chunk / n_chunks;
    const int64_t end = n * (chunk + 1) / n_chunks;
    if (begin < end) (*body)(begin, end);
  }

  // Claims and runs chunks of job `gen` until none is left.
  void Drain(uint32_t gen) {
    uint64_t t = ticket.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(t >> 32) != gen) return;
      const int chunk = static_cast<int>(t & 0xffffu);
      if (chunk >= static_cast<int>((t >> 16) & 0xffffu)) return;
      if (ticket.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        RunChunk(chunk);
        done.fetch_add(1, std::memory_order_acq_rel);
        t = ticket.load(std::memory_order_acquire);
      }
    }
  }

  void WorkerLoop() {
    uint32_t seen = 0;
    for (;;) {
      // Spin while the job we took part in is still running elsewhere and
      // briefly after it completes: a forward pass issues hundreds of small
      // jobs back to back and a condition-variable wake-up costs more than
      // many of them. Only briefly: between forward passes (sampling,
      // streaming) a spinning worker would take a core from the threads
      // doing that work.
      uint64_t t = ticket.load(std::memory_order_acquire);
      uint32_t gen = static_cast<uint32_t>(t >> 32);
      auto idle_since = std::chrono::steady_clock::now();
      for (int spin = 0; gen == seen; ++spin) {
        if ((spin & 63) == 63) {
          const bool job_running = done.load(std::memory_order_acquire) < static_cast<int>((t >> 16) & 0xffffu);
          const auto now = std::chrono::steady_clock::now();
          if (job_running) {
            idle_since = now;
          } else if (now - idle_since >= kSpinBeforeSleep) {
            break;
          }
        }
        CAIRN_CPU_RELAX();
        t = ticket.load(std::memory_order_acquire);
        gen = static_cast<uint32_t>(t >> 32);
      }
      if (gen == seen) {
        std::unique_lock<std::mutex> lock(mu);
        wake.wait(lock,
                  [&] { return stop || static_cast<uint32_t>(ticket.load(std::memory_order_acquire) >> 32) != seen; });
        if (stop) return;
        gen = static_cast<uint32_t>(ticket.load(std::memory_order_acquire) >> 32);
      }
      seen = gen;
      Drain(gen);
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : impl_(new Impl) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  for (int i = 0; i + 1 < n_threads; ++i) {
    impl_->workers.emplace_back([this] { impl_->WorkerLoop(); });
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

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body,
                             int chunks_per_thread) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = std::max<int64_t>(1, n / grain);
  const int64_t wanted = static_cast<int64_t>(n_threads_) * std::max(chunks_per_thread, 1);
  const int n_chunks = static_cast<int>(std::min<int64_t>({wanted, max_chunks, 0xffff}));
  if (n_chunks <= 1 || impl_->workers.empty()) {
    body(0, n);
    return;
  }
  Impl& im = *impl_;
  // The previous job is complete (done == n_chunks and every claimed chunk
  // finished), so no thread reads these fields now.
  im.body = &body;
  im.n = n;
  im.n_chunks = n_chunks;
  im.done.store(0, std::memory_order_relaxed);
  const uint32_t gen = static_cast<uint32_t>(im.ticket.load(std::memory_order_relaxed) >> 32) + 1;
  {
    std::lock_guard<std::mutex> lock(im.mu);
    im.ticket.store((static_cast<uint64_t>(gen) << 32) | (static_cast<uint64_t>(n_chunks) << 16),
                    std::memory_order_release);
  }
  im.wake.notify_all();
  im.Drain(gen);
  for (int spin = 0; im.done.load(std::memory_order_acquire) != n_chunks; ++spin) {
    if (spin < 100000) {
      CAIRN_CPU_RELAX();
    } else {
      std::this_thread::yield();  // a worker holding a chunk was descheduled
    }
  }
}

}  // namespace cairn
