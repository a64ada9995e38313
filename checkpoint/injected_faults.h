// TESTING ONLY. An Env that makes a real server process see a full or a
// failing disk, for the soak (tests/service/soak) and other tests that run
// cairn-server as a child process and cannot hand it a test Env.
//
// Env::Default() wraps the POSIX Env in one when the environment variable
// CAIRN_TESTING_DISK_FAULTS is set (never set it in a deployment):
//   full               every WriteFileAtomically fails with ENOSPC
//                      (RESOURCE_EXHAUSTED), as on a full file system
//   failing:P[:SEED]   each write, and each read of an opened file, fails
//                      with EIO (INTERNAL) with probability P (0..1), drawn
//                      from a generator seeded with SEED (default 1)
// Directory creation, listing, stat and delete are never failed (a full
// disk still unlinks), so a server always starts. Each injected fault is
// logged on stderr as one "cairn: injected disk fault: ..." line, which the
// soak counts.
#ifndef CAIRN_CHECKPOINT_INJECTED_FAULTS_H_
#define CAIRN_CHECKPOINT_INJECTED_FAULTS_H_

#include <memory>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "checkpoint/env.h"

namespace cairn::checkpoint {

inline constexpr char kDiskFaultsVariable[] = "CAIRN_TESTING_DISK_FAULTS";

// An Env failing as `spec` says (grammar above) and otherwise forwarding to
// `base`, which must outlive it. INVALID_ARGUMENT for a malformed spec.
// Thread-safe as `base` is.
absl::StatusOr<std::unique_ptr<Env>> InjectedFaultsEnv(absl::string_view spec, Env* base);

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_INJECTED_FAULTS_H_
