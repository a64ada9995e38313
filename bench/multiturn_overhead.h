// bench/multiturn's line on the cost of checkpointing a long prompt,
// measured in process through the engine.
#ifndef CAIRN_BENCH_MULTITURN_OVERHEAD_H_
#define CAIRN_BENCH_MULTITURN_OVERHEAD_H_

#include "backends/backend.h"
#include "checkpoint/options.h"

namespace cairn::bench {

// Prints one line: the prefill of a `positions`-token single-message prompt
// with checkpoints as `options` against without (best of `reps`,
// interleaved), the checkpoints it took and what they cost, and what a
// divergence at 7/8 of the prompt restores.
void PrintCheckpointOverhead(Backend& backend, const checkpoint::CheckpointOptions& options, int positions, int reps);

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_MULTITURN_OVERHEAD_H_
