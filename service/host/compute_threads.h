// How many compute threads the process should run per model when the
// operator does not say (cairn-server --threads absent or 0): the CPUs it
// may really use, not the machine's. A container limited to 2 CPUs on a
// 64-core node gets 2, where hardware_concurrency() says 64 and 64 threads
// would fight over 2 CPUs' worth of time slices.
//
// Two limits, the lower wins: the CPU affinity mask (taskset, cpusets) and
// the cgroup v2 CPU quota (`cpu.max`, "QUOTA PERIOD" or "max PERIOD"), of
// the process's cgroup and each of its ancestors up to the mount point. The
// cgroup mount point is a parameter, so tests point it at a directory of
// their own. Free functions; thread-safe.
#ifndef CAIRN_SERVICE_HOST_COMPUTE_THREADS_H_
#define CAIRN_SERVICE_HOST_COMPUTE_THREADS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace cairn::service {

// Where cgroup v2 is mounted on Linux.
inline constexpr const char* kDefaultCgroupRoot = "/sys/fs/cgroup";

// The contents of a cpu.max file as whole CPUs: ceil(QUOTA / PERIOD), at
// least 1; nullopt for "max PERIOD" (no quota). INVALID_ARGUMENT, naming
// the text, for anything else (not two fields, a non-number, a zero period).
absl::StatusOr<std::optional<int>> ParseCpuMax(std::string_view text);

struct ComputeThreads {
  int threads = 1;
  // Where the count came from, for the start-up log, e.g. "CPU affinity: 2
  // CPUs" or "cgroup CPU quota 150000/100000 (ROOT/cpu.max); CPU affinity:
  // 64 CPUs".
  std::string source;
};

// The process's cgroup v2 path, "/..." from the "0::PATH" line of
// /proc/self/cgroup; "/" without one (or inside a cgroup namespace).
std::string OwnCgroupPath();

// The files named `file` of the cgroup `cgroup_path` and each of its
// ancestors under `cgroup_root`, the cgroup's own first ("ROOT/a/b/FILE",
// "ROOT/a/FILE", "ROOT/FILE"): a limit set on any of them applies.
std::vector<std::string> CgroupFilesUpward(const std::string& cgroup_root, const std::string& cgroup_path,
                                           std::string_view file);

// The threads the affinity mask and the quotas under `cgroup_root` allow:
// those of `cgroup_path` and each of its ancestors. A cpu.max that cannot
// be parsed is skipped and named in `source`, so a strange file never stops
// the server; missing files mean no quota (cgroup v1, or no cpu
// controller).
ComputeThreads DefaultComputeThreads(const std::string& cgroup_root, const std::string& cgroup_path = OwnCgroupPath());

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_HOST_COMPUTE_THREADS_H_
