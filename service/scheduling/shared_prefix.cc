#include "service/scheduling/shared_prefix.h"

#include <algorithm>
#include <utility>

namespace cairn::service {

bool SharedPrefixWaits::MaybeHold(const std::shared_ptr<GenerateJob>& job, const checkpoint::Prompt& prompt,
                                  std::string_view tenant, size_t reusable, std::span<const PrefixLeader> leaders) {
  if (min_positions_ <= 0 || prompt.size() < 2) return false;
  checkpoint::PrefillJob* best = nullptr;
  size_t best_shared = 0;
  for (const PrefixLeader& l : leaders) {
    if (l.tenant != tenant || l.job->done()) continue;
    const checkpoint::Prompt& theirs = l.job->prompt();
    // At least one symbol of this prompt is left to compute: its logits.
    const size_t shared = std::min(checkpoint::CommonPrefix(prompt.keys(), theirs.keys()), prompt.size() - 1);
    if (shared <= std::max(reusable, l.job->absorbed()) || shared <= best_shared) continue;
    if (prompt.pos_after(shared) - prompt.pos_after(reusable) < min_positions_) continue;
    best = l.job;
    best_shared = shared;
  }
  if (best == nullptr || !best->AddSharedPoint(best_shared)) return false;
  held_.push_back(Held{job, best, best_shared});
  return true;
}

std::vector<std::shared_ptr<GenerateJob>> SharedPrefixWaits::TakeReady(std::span<const PrefixLeader> leaders) {
  std::vector<std::shared_ptr<GenerateJob>> ready;
  auto is_ready = [&](const Held& h) {
    if (h.job->stop_reason() != StopReason::kNone || Clock::now() >= h.job->deadline) return true;
    auto it = std::find_if(leaders.begin(), leaders.end(), [&](const PrefixLeader& l) { return l.job == h.leader; });
    return it == leaders.end() || it->job->done() || it->job->absorbed() >= h.shared;
  };
  for (auto it = held_.begin(); it != held_.end();) {
    if (is_ready(*it)) {
      ready.push_back(std::move(it->job));
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  return ready;
}

std::vector<std::shared_ptr<GenerateJob>> SharedPrefixWaits::TakeAll() {
  std::vector<std::shared_ptr<GenerateJob>> all;
  for (Held& h : held_) all.push_back(std::move(h.job));
  held_.clear();
  return all;
}

}  // namespace cairn::service
