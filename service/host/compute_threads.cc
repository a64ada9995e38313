#include "service/host/compute_threads.h"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace cairn::service {
namespace {

// CPUs in the affinity mask; 0 when it cannot be read. The mask is sized
// for machines far larger than cpu_set_t's 1024 CPUs.
int AffinityCpus() {
  constexpr int kMaxCpus = 1 << 15;
  cpu_set_t* set = CPU_ALLOC(kMaxCpus);
  if (set == nullptr) return 0;
  const size_t bytes = CPU_ALLOC_SIZE(kMaxCpus);
  CPU_ZERO_S(bytes, set);
  const int n = sched_getaffinity(0, bytes, set) == 0 ? CPU_COUNT_S(bytes, set) : 0;
  CPU_FREE(set);
  return n;
}

// The smallest quota of the cgroup `path` and its ancestors under `root`,
// with the file it came from; unparseable files are noted in `*notes`.
std::optional<std::pair<int, std::string>> SmallestQuota(const std::string& root, const std::string& path,
                                                         std::string* notes) {
  std::optional<std::pair<int, std::string>> best;
  for (const std::string& file : CgroupFilesUpward(root, path, "cpu.max")) {
    std::ifstream in(file);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<std::optional<int>> cpus = ParseCpuMax(text.str());
    if (!cpus.ok()) {
      absl::StrAppend(notes, "; ignored ", file, ": ", cpus.status().message());
    } else if (cpus->has_value() && (!best || **cpus < best->first)) {
      best = std::make_pair(**cpus,
                            absl::StrCat("cgroup CPU quota ", absl::StripAsciiWhitespace(text.str()), " (", file, ")"));
    }
  }
  return best;
}

}  // namespace

std::string OwnCgroupPath() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "0::") && !rest.empty() && rest[0] == '/' &&
        rest.find("..") == absl::string_view::npos) {
      return std::string(rest);
    }
  }
  return "/";
}

std::vector<std::string> CgroupFilesUpward(const std::string& cgroup_root, const std::string& cgroup_path,
                                           std::string_view file) {
  std::vector<std::string> files;
  std::string dir = cgroup_path.empty() ? "/" : cgroup_path;
  for (;;) {
    files.push_back(
        absl::StrCat(cgroup_root, dir == "/" ? std::string() : dir, "/", absl::string_view(file.data(), file.size())));
    if (dir == "/") return files;
    const size_t slash = dir.rfind('/');
    dir = slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
  }
}

absl::StatusOr<std::optional<int>> ParseCpuMax(std::string_view contents) {
  const absl::string_view text = absl::StripAsciiWhitespace(absl::string_view(contents.data(), contents.size()));
  const std::vector<absl::string_view> fields = absl::StrSplit(text, ' ', absl::SkipEmpty());
  const auto malformed = [&] {
    return absl::InvalidArgumentError(absl::StrCat("cpu.max '", text, "' is not 'QUOTA PERIOD' or 'max PERIOD'"));
  };
  uint64_t period = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[1], &period) || period == 0) return malformed();
  if (fields[0] == "max") return std::optional<int>();
  uint64_t quota = 0;
  if (!absl::SimpleAtoi(fields[0], &quota)) return malformed();
  const uint64_t cpus = std::max<uint64_t>(1, (quota + period - 1) / period);
  return std::optional<int>(static_cast<int>(std::min<uint64_t>(cpus, 1 << 20)));
}

ComputeThreads DefaultComputeThreads(const std::string& cgroup_root, const std::string& cgroup_path) {
  ComputeThreads out;
  int affinity = AffinityCpus();
  std::string affinity_source = absl::StrCat("CPU affinity: ", affinity, " CPUs");
  if (affinity <= 0) {
    affinity = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    affinity_source = absl::StrCat("online CPUs: ", affinity, " (affinity unreadable)");
  }
  std::string notes;
  const auto quota = SmallestQuota(cgroup_root, cgroup_path, &notes);
  if (quota && quota->first < affinity) {
    out.threads = quota->first;
    out.source = absl::StrCat(quota->second, "; ", affinity_source, notes);
  } else {
    out.threads = affinity;
    out.source = absl::StrCat(affinity_source, quota ? absl::StrCat("; ", quota->second) : "", notes);
  }
  return out;
}

}  // namespace cairn::service
