// A bound on work whose transient memory is a large multiple of its input:
// parsing a JSON body into values, rendering a chat template over tools
// JSON, tokenizing megabytes of text (16 MiB of nested empty arrays took
// 440 MB in nlohmann's values). Each of the many threads that run requests
// (connection threads, the worker pool) would otherwise hold that at once.
//
// Contract:
// - Run(bytes, fn) runs fn at once when `bytes` (the input's size) is at
//   most large_bytes; a larger input waits until fewer than `slots` large
//   ones are running. Every ordinary request is small and never waits.
// - After a large one, the memory it freed is given back to the system
//   (malloc_trim): glibc keeps a thread's freed memory in that thread's
//   arena, where the next large input, on another thread, cannot reuse it.
// - Thread-safe.
#ifndef CAIRN_SERVICE_API_LARGE_WORK_GATE_H_
#define CAIRN_SERVICE_API_LARGE_WORK_GATE_H_

#include <cstddef>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cairn::service {

class LargeWorkGate final {
 public:
  LargeWorkGate(size_t large_bytes, int slots) : large_bytes_(large_bytes), slots_(slots) {}
  LargeWorkGate(const LargeWorkGate&) = delete;
  LargeWorkGate& operator=(const LargeWorkGate&) = delete;

  template <class Fn>
  auto Run(size_t bytes, Fn&& fn) -> decltype(fn()) {
    if (bytes <= large_bytes_) return fn();
    Enter();
    struct Leave {
      LargeWorkGate* gate;
      ~Leave() { gate->Exit(); }
    } leave{this};
    return fn();
  }

 private:
  void Enter() ABSL_LOCKS_EXCLUDED(mu_);
  void Exit() ABSL_LOCKS_EXCLUDED(mu_);
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ < slots_; }

  const size_t large_bytes_;
  const int slots_;
  absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_API_LARGE_WORK_GATE_H_
