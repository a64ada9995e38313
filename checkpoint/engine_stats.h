// What the checkpoint engine counts: per prompt (PrefillStats, returned with
// a PrefillResult) and in total (EngineStats, CheckpointEngine::stats()), and
// EngineCounters, the running totals the engine's parts add to.
#ifndef CAIRN_CHECKPOINT_ENGINE_STATS_H_
#define CAIRN_CHECKPOINT_ENGINE_STATS_H_

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "backends/memory.h"
#include "checkpoint/policy.h"

namespace cairn::checkpoint {

struct PrefillStats {
  size_t prompt_symbols = 0;
  Pos prompt_positions = 0;
  Pos reused = 0;      // positions not run through Forward
  Pos recomputed = 0;  // positions run through Forward
  ReuseKind source = ReuseKind::kLive;
  Pos restored_pos = -1;                // position of the restored snapshot; -1: none
  bool logits_from_checkpoint = false;  // no forward pass at all
  int32_t captured = 0;                 // checkpoints captured during this call
  size_t captured_bytes = 0;
  int32_t forward_calls = 0;
  double restore_seconds = 0;
  double capture_seconds = 0;
  double forward_seconds = 0;
};

struct EngineStats {
  uint64_t prompts = 0;
  int64_t prompt_positions = 0;
  int64_t reused = 0;
  int64_t recomputed = 0;
  uint64_t captures = 0;
  uint64_t capture_failures = 0;  // did not fit the budget (reuse lost, not an error)
  uint64_t capture_bytes = 0;
  uint64_t restores = 0;
  uint64_t restore_failures = 0;  // fell back to another candidate
  double capture_seconds = 0;
  double restore_seconds = 0;
  double forward_seconds = 0;
};

// Thread-safe: one internal mutex, held only to add or copy (nothing is
// locked under it, so any other lock may be held when calling).
class EngineCounters final {
 public:
  void CaptureFailed() {
    absl::MutexLock lock(&mu_);
    ++stats_.capture_failures;
  }
  void Captured(size_t bytes, double seconds) {
    absl::MutexLock lock(&mu_);
    ++stats_.captures;
    stats_.capture_bytes += bytes;
    stats_.capture_seconds += seconds;
  }
  void RestoreFailed() {
    absl::MutexLock lock(&mu_);
    ++stats_.restore_failures;
  }
  void Restored(double seconds) {
    absl::MutexLock lock(&mu_);
    ++stats_.restores;
    stats_.restore_seconds += seconds;
  }
  // Forward time outside a prompt (a decoded token).
  void Forwarded(double seconds) {
    absl::MutexLock lock(&mu_);
    stats_.forward_seconds += seconds;
  }
  // A prompt's totals, once it ends (done, failed or cancelled).
  void PromptEnded(const PrefillStats& prompt) {
    absl::MutexLock lock(&mu_);
    ++stats_.prompts;
    stats_.prompt_positions += prompt.prompt_positions;
    stats_.reused += prompt.reused;
    stats_.recomputed += prompt.recomputed;
    stats_.forward_seconds += prompt.forward_seconds;
  }
  EngineStats Get() const {
    absl::MutexLock lock(&mu_);
    return stats_;
  }

 private:
  mutable absl::Mutex mu_;
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_ENGINE_STATS_H_
