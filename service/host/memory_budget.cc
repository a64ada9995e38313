#include "service/host/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/options.h"

namespace cairn::service {
namespace {

constexpr char kExceedsWholeBudget[] = "cairn/exceeds_whole_memory_budget";

}  // namespace

MemoryReservation& MemoryReservation::operator=(MemoryReservation&& o) noexcept {
  if (this != &o) {
    Reset();
    budget_ = o.budget_;
    bytes_ = o.bytes_;
    o.budget_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

absl::Status MemoryReservation::Grow(size_t bytes, std::string_view what) {
  if (budget_ == nullptr || bytes <= bytes_) return absl::OkStatus();
  if (absl::Status st = budget_->Change(bytes_, bytes, /*check=*/true, what); !st.ok()) return st;
  bytes_ = bytes;
  return absl::OkStatus();
}

void MemoryReservation::Set(size_t bytes) {
  if (budget_ == nullptr) return;
  budget_->Change(bytes_, bytes, /*check=*/false, "").IgnoreError();
  bytes_ = bytes;
}

void MemoryReservation::Reset() {
  if (budget_ != nullptr) budget_->Change(bytes_, 0, /*check=*/false, "").IgnoreError();
  budget_ = nullptr;
  bytes_ = 0;
}

bool ExceedsWholeBudget(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted && status.GetPayload(kExceedsWholeBudget).has_value();
}

absl::StatusOr<MemoryReservation> MemoryBudget::Reserve(size_t bytes, std::string_view what) {
  if (absl::Status st = Change(0, bytes, /*check=*/true, what); !st.ok()) return st;
  return MemoryReservation(this, bytes);
}

size_t MemoryBudget::in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

absl::Status MemoryBudget::Change(size_t from, size_t to, bool check, std::string_view what) {
  absl::MutexLock lock(&mu_);
  // in_use_ >= from always: it is the sum of the reservations.
  const size_t others = in_use_ - std::min(in_use_, from);
  if (check && budget_ > 0 && to > from && (to > budget_ || others > budget_ - to)) {
    absl::Status refused = absl::ResourceExhaustedError(
        absl::StrCat("memory budget exceeded: ", std::string(what), " needs ", to, " bytes of sequence memory; ",
                     in_use_, " bytes are in use by live sequences (", from, " of them by this one); the budget is ",
                     budget_, " bytes (--memory-budget)"));
    if (to > budget_) refused.SetPayload(kExceedsWholeBudget, absl::Cord());
    return refused;
  }
  in_use_ = others + to;
  return absl::OkStatus();
}

absl::StatusOr<size_t> ParseMemoryBudget(std::string_view text, const std::string& cgroup_root) {
  if (!text.empty() && text.back() == '%') {
    double pct = 0;
    if (!absl::SimpleAtod(std::string(text.substr(0, text.size() - 1)), &pct) || !(pct >= 0) || pct > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("memory budget '", std::string(text), "': a percentage must be in [0, 100]"));
    }
    const size_t ram = AvailableRamBytes(cgroup_root);
    if (ram == 0 && pct > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("memory budget '", std::string(text), "': the RAM size is unknown here; give a byte size"));
    }
    return static_cast<size_t>(std::floor(static_cast<double>(ram) * pct / 100.0));
  }
  return checkpoint::ParseByteSize(text);
}

size_t AvailableRamBytes(const std::string& cgroup_root, const std::string& cgroup_path) {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  size_t ram = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
  // cgroup v2, then v1 ("max" or a huge number when unlimited).
  std::vector<std::string> files = CgroupFilesUpward(cgroup_root, cgroup_path, "memory.max");
  files.push_back(absl::StrCat(cgroup_root, "/memory/memory.limit_in_bytes"));
  for (const std::string& path : files) {
    std::ifstream in(path);
    std::string v;
    uint64_t limit = 0;
    if (in >> v && absl::SimpleAtoi(v, &limit) && limit > 0 && (ram == 0 || limit < ram)) {
      ram = static_cast<size_t>(limit);
    }
  }
  return ram;
}

}  // namespace cairn::service
