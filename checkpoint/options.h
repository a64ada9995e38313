// Checkpoint flags: one plain options struct with documented defaults, and a
// parser the server uses for its command line (no global flag registry, so
// tests and benchmarks build options directly).
#ifndef CAIRN_CHECKPOINT_OPTIONS_H_
#define CAIRN_CHECKPOINT_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/policy.h"
#include "checkpoint/store.h"

namespace cairn::checkpoint {

struct CheckpointOptions {
  // --checkpoints=on|off. Off is the benchmark baseline: no checkpoints, no
  // shared prefixes; a sequence is only cut back where its memory allows.
  bool enabled = true;
  // --checkpoint-ram=SIZE. Bytes of snapshots kept in RAM (all models).
  size_t ram_budget_bytes = size_t{2} << 30;  // 2 GiB
  // --checkpoint-disk-dir=PATH. Disk tier for evicted checkpoints; empty: none.
  std::string disk_dir;
  // --checkpoint-disk-budget=SIZE. Bytes on disk when a directory is given.
  size_t disk_budget_bytes = size_t{16} << 30;  // 16 GiB
  // --checkpoint-every=N. Positions between interval checkpoints in a long
  // prompt; 0 disables them.
  Pos every_n = 512;
  // --checkpoint-tail-every=N. Positions between checkpoints inside the
  // last message of a prompt (edits resume near the change); 0 disables.
  // See PolicyOptions::tail_every for the cost.
  Pos tail_every = 8;
  // --checkpoint-generation-every=N. Positions between checkpoints inside a
  // generated reply (a reply re-sent cut short resumes near the cut); 0
  // disables. See PolicyOptions::generation_every.
  Pos generation_every = 16;
  // --checkpoint-spaced-first=N. In a prompt without message boundaries,
  // checkpoints at marks N positions apart from its start, then an eighth
  // of the position apart (a divergence anywhere in it resumes near it); 0
  // disables. See PolicyOptions::spaced_first.
  Pos spaced_first = 32;
  // --checkpoint-branch-min=N. Keep a full snapshot of a history before
  // cutting at least N positions of it away; 0 disables.
  Pos min_branch_preserve = 32;
  // --prefill-chunk=N. Most tokens per Forward call during prompt processing.
  int32_t prefill_chunk = 512;
  // --checkpoint-policy=cairn|lru|marconi[:ALPHA]. Which checkpoints stay
  // when they do not fit the RAM budget (retention.h) and, for marconi,
  // where they are taken (Placement::kMarconi). lru and marconi are the
  // baselines bench/pressure measures cairn against.
  std::string cache_policy = "cairn";
  // Placement switches without flags (bench/pressure's ablations); see
  // PolicyOptions.
  bool divergence_points = true;
  bool keep_turn_checkpoints = true;
  bool budget_spacing = true;

  PolicyOptions policy() const;
  StoreOptions store() const;
};

// "4096", "512KiB", "2GiB", "1.5G", "300MB" (K/M/G/T are binary: 1024-based,
// as are KiB/MiB/GiB/TiB; KB/MB/GB/TB are decimal). INVALID_ARGUMENT otherwise.
absl::StatusOr<size_t> ParseByteSize(std::string_view text);

// Applies one "--name=value" argument. Returns false (and OK) when the
// argument is not a checkpoint flag; INVALID_ARGUMENT for a bad value.
absl::StatusOr<bool> ApplyCheckpointFlag(std::string_view arg, CheckpointOptions* options);

// Applies every checkpoint flag in `args` and removes them, leaving the rest
// for the caller. On error `args` and `options` may be partly updated.
absl::Status ParseCheckpointFlags(std::vector<std::string>* args, CheckpointOptions* options);

// Usage lines for --help, with the defaults.
std::string CheckpointFlagsHelp();

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_OPTIONS_H_
