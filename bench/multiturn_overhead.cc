#include "bench/multiturn_overhead.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "bench/bench_util.h"
#include "checkpoint/engine.h"

namespace cairn::bench {

using checkpoint::CheckpointEngine;
using checkpoint::CheckpointOptions;
using checkpoint::CheckpointStore;
using checkpoint::Prompt;
using checkpoint::Sequence;

// Checkpointing cost on one long prompt (one message): prefill with
// checkpoints on (interval, tail and end captures, and the chunk splits they
// force) against off, interleaved, best of `reps`; then a prompt diverging
// near the end restores one.
void PrintCheckpointOverhead(Backend& backend, const CheckpointOptions& options, int positions, int reps) {
  std::mt19937 rng(7);
  const int V = backend.info().n_vocab;
  std::vector<TokenId> t(positions);
  for (auto& x : t) x = 3 + static_cast<TokenId>(rng() % (V - 3));
  Prompt p;
  p.AddTokens(t);
  p.EndMessage();
  CheckpointOptions off = options;
  off.enabled = false;
  double best_on = 1e30, best_off = 1e30;
  checkpoint::PrefillStats on_stats;
  std::unique_ptr<CheckpointEngine> keep;
  std::unique_ptr<Sequence> keep_seq;
  for (int rep = 0; rep < reps; ++rep) {
    for (int mode = 0; mode < 2; ++mode) {
      const CheckpointOptions& o = mode == 0 ? off : options;
      std::shared_ptr<CheckpointStore> store;
      if (o.enabled) store = std::move(*CheckpointStore::Create(o.store()));
      auto engine = CheckpointEngine::Create(&backend, store, o);
      if (!engine.ok()) return;
      auto seq = (*engine)->NewSequence();
      const auto t0 = Clock::now();
      auto r = (*engine)->Prefill(**seq, p);
      const double secs = Since(t0);
      if (!r.ok()) return;
      if (mode == 0) {
        best_off = std::min(best_off, secs);
      } else if (secs < best_on) {
        best_on = secs;
        on_stats = r->stats;
        keep_seq.reset();
        keep = std::move(*engine);
        keep_seq = std::move(*seq);
      }
    }
  }
  const auto& s = on_stats;
  std::printf(
      "  long prompt %d positions (in process, through the engine): prefill %.1f ms with checkpoints, "
      "%.1f ms without (best of %d, interleaved): %+.2f%%; %d checkpoints of %.1f KiB, capture %.3f ms "
      "each (%.2f%% of forward time)",
      positions, 1e3 * best_on, 1e3 * best_off, reps, 100.0 * (best_on - best_off) / best_off, s.captured,
      s.captured ? s.captured_bytes / 1024.0 / s.captured : 0.0,
      s.captured ? 1e3 * s.capture_seconds / s.captured : 0.0,
      100.0 * s.capture_seconds / std::max(1e-9, s.forward_seconds));
  std::vector<TokenId> t2 = t;
  t2[positions - positions / 8] = 3 + (t2[positions - positions / 8] + 1) % (V - 3);
  Prompt q;
  q.AddTokens(t2);
  q.EndMessage();
  auto r2 = keep->Prefill(*keep_seq, q);
  if (r2.ok() && r2->stats.restored_pos >= 0) {
    std::printf("; diverging at %d: restore at %d in %.3f ms, %d positions recomputed", positions - positions / 8,
                r2->stats.restored_pos, 1e3 * r2->stats.restore_seconds, r2->stats.recomputed);
  } else if (r2.ok()) {
    std::printf("; diverging at %d: cut back, %d positions recomputed", positions - positions / 8,
                r2->stats.recomputed);
  }
  std::printf("\n");
  keep_seq.reset();
}

}  // namespace cairn::bench
