#include "checkpoint/eviction_memory.h"

namespace cairn::checkpoint {

void EvictionMemory::Remember(RetentionFacts& f, const RetentionClock& now) {
  // One on the same path is remembered already: the older one is what a
  // store that had kept it would hold.
  if (!policy_.wants_misses() || f.path_key == 0 || ghosts_.contains(f.path_key)) return;
  f.remembered = true;
  ghosts_[f.path_key] = Ghost{f, now, ++serial_};
  order_.emplace_back(f.path_key, serial_);
  ForgetOld(now);
}

void EvictionMemory::ForgetOld(const RetentionClock& now) {
  while (!order_.empty()) {
    const auto [key, serial] = order_.front();
    auto it = ghosts_.find(key);
    const bool current = it != ghosts_.end() && it->second.serial == serial;
    if (current && ghosts_.size() <= kCapacity && order_.size() <= 2 * kCapacity &&
        now.request - it->second.gone.request < kMissHorizon) {
      return;
    }
    if (current) Forget(key, now);
    order_.pop_front();
  }
}

void EvictionMemory::Forget(uint64_t path_key, const RetentionClock& now) {
  auto it = ghosts_.find(path_key);
  if (it == ghosts_.end()) return;
  policy_.Observe(RetentionEvent::kForgotten, it->second.facts, now);
  ghosts_.erase(it);
}

void EvictionMemory::NoteMissed(std::span<const uint64_t> path_keys, size_t full_only, const RetentionClock& now) {
  for (size_t k = 0; k < path_keys.size(); ++k) {
    auto it = ghosts_.find(path_keys[k]);
    if (it == ghosts_.end() || (k < full_only && it->second.facts.scope != SnapshotScope::kFull)) continue;
    policy_.Observe(RetentionEvent::kMissed, it->second.facts, now);
    ghosts_.erase(it);
    return;
  }
}

}  // namespace cairn::checkpoint
